"""What a record of user data must be: one user id, checked as such (pure).

``canonical_user_id`` is the one place user ids are keyed: every transform
groups, samples and orders (keyed hash) users by its result, so the same
text given as str, int or bytes is one user everywhere. ``plain_str_or_bytes``
is the one rule by which a str or bytes subclass (``numpy.str_``) becomes the
plain value every transform keys an item by: what it holds.

Errors about records name the field and the type found, never a value: runner
logs keep error messages (docs/privacy.md, invariant 6).
"""

from __future__ import annotations

from typing import Any, overload

import numpy as np

from beam_dpsu.core.checks import a_type

__all__ = ["InvalidRecordError", "canonical_user_id", "plain_str_or_bytes"]


class InvalidRecordError(ValueError):
    """A record that cannot be attributed to one user and one text item."""


@overload
def plain_str_or_bytes(value: str) -> str: ...
@overload
def plain_str_or_bytes(value: bytes) -> bytes: ...
@overload
def plain_str_or_bytes(value: str | bytes) -> str | bytes: ...


def plain_str_or_bytes(value: str | bytes) -> str | bytes:
    """A str or bytes as the plain ``str`` or ``bytes`` holding the same text or bytes.

    The one rule every transform keys an item (and a user id's text) by: an
    instance of a subclass (``numpy.str_``, ``numpy.bytes_``, a user's own) is
    what it holds, never what its own ``__str__`` or ``__bytes__`` returns
    (``str(v)`` and ``bytes(v)`` call those; ``memoryview(v)`` calls a Python
    class's ``__buffer__`` from Python 3.12), so that ``SelectItems``,
    ``CountReleased`` and ``KeepReleased`` key the same value as one item. A plain
    str or bytes is returned as it is.

    Args:
      value: a str or bytes, or an instance of a subclass of either.

    Returns:
      A ``str`` or ``bytes`` (exactly that type) equal to what ``value`` holds.
    """
    if type(value) is str or type(value) is bytes:
        return value
    if isinstance(value, str):
        return str.__str__(value)  # a plain copy of the characters
    # The bytes type's own full slice: a plain copy of the bytes.
    return bytes.__getitem__(value, slice(None))


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
        return plain_str_or_bytes(user_id)
    if isinstance(user_id, bytes):
        raw = plain_str_or_bytes(user_id)  # what it holds (a subclass's methods unasked)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return raw
    if isinstance(user_id, (int, np.integer)):
        return str(int(user_id))
    if isinstance(user_id, tuple) and user_id:
        return tuple(canonical_user_id(part, record) for part in user_id)
    raise InvalidRecordError(f"user id (field 0) of a {record} must be a str, bytes, int or "
                             f"tuple of these, got {a_type(user_id)}")
