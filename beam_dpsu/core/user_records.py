"""What a record of user data must be: one user id, checked as such (pure).

``canonical_user_id`` is the one place user ids are keyed: every transform
groups, samples and orders (keyed hash) users by its result, so the same
text given as str, int or bytes is one user everywhere.

Errors about records name the field and the type found, never a value: runner
logs keep error messages (docs/privacy.md, invariant 6).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from beam_dpsu.core.checks import a_type

__all__ = ["InvalidRecordError", "canonical_user_id"]


class InvalidRecordError(ValueError):
    """A record that cannot be attributed to one user and one text item."""


def canonical_user_id(user_id: Any, record: str = "(user_id, item) record"):
    """The user id as one key per text: ids that are the same text are one user.

    A str is itself; an int (numpy's too) is its decimal text, so ``5`` and
    ``"5"`` are one user; bytes that are UTF-8 are their text, so ``b"u1"``
    and ``"u1"`` are one user; bytes that are not UTF-8 stay bytes (no str
    spells them, so they merge with nothing); a tuple is a composite key of
    canonical parts (``("a", 1)`` is ``("a", "1")``, never ``"a"``). Merging
    spellings of one id can only lower that person's contribution. Texts
    are compared as they are: ``"05"``, ``" 5"`` and ``"5"`` are three users.

    Args:
      user_id: the id as given.
      record: what it came in, for the error.

    Returns:
      A str, bytes (not UTF-8) or tuple of these.

    Raises:
      InvalidRecordError: for an id whose text is ambiguous or that is no id
        (a bool, a float, None, an empty tuple, any other type), naming its
        type, never its value.
    """
    if type(user_id) is str:  # the common case first
        return user_id
    if isinstance(user_id, (bool, np.bool_)):
        raise InvalidRecordError(f"user id (field 0) of a {record} must be a str, bytes, int "
                                 "or tuple of these, got a bool")
    if isinstance(user_id, str):
        return str(user_id)
    if isinstance(user_id, bytes):
        try:
            return user_id.decode("utf-8")
        except UnicodeDecodeError:
            return bytes(user_id)
    if isinstance(user_id, (int, np.integer)):
        return str(int(user_id))
    if isinstance(user_id, tuple) and user_id:
        return tuple(canonical_user_id(part, record) for part in user_id)
    raise InvalidRecordError(f"user id (field 0) of a {record} must be a str, bytes, int or "
                             f"tuple of these, got {a_type(user_id)}")
