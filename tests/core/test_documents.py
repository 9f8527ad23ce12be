"""A user's tokens (beam_dpsu.core.documents): checked as the plain text they hold."""

import pytest

from beam_dpsu.core.documents import checked_tokens
from beam_dpsu.core.user_records import InvalidRecordError


class _HidesSpace(str):
    """A str subclass whose own iteration and ``isspace`` hide the space it holds."""

    def __iter__(self):
        return iter(("x",))

    def isspace(self):
        return False


def test_a_token_is_checked_as_the_text_it_holds():
    # A token holding whitespace would make ("new york",) and ("new", "york") one
    # written line: refused whatever a subclass's own methods say.
    with pytest.raises(InvalidRecordError, match="contains whitespace"):
        checked_tokens([_HidesSpace("new york")], "a test record")
    tokens = checked_tokens([_HidesSpace("new"), "york"], "a test record")
    assert tokens == ("new", "york") and all(type(t) is str for t in tokens)
