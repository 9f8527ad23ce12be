"""What a record of user data must be: one user id, checked as such (pure).

``canonical_user_id`` is the one place user ids are keyed; ``plain_str_or_bytes`` the one
rule by which a str or bytes subclass becomes a plain value. Errors name the field and the
type, never a value (runner logs keep them). Why: docs/explanation/bounding.md#user-ids.
"""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np

from beam_dpsu.core.checks import a_type

__all__ = ["InvalidRecordError", "canonical_user_id", "plain_str_or_bytes"]


class InvalidRecordError(ValueError):
    """A record that cannot be attributed to one user and one text item."""


_StrOrBytes = TypeVar("_StrOrBytes", str, bytes, str | bytes)


def plain_str_or_bytes(value: _StrOrBytes) -> _StrOrBytes:
    """A str or bytes as the plain ``str`` or ``bytes`` holding the same text or bytes.

    A subclass's instance is what it holds, never what its own ``__str__``,
    ``__bytes__`` or ``__buffer__`` returns (docs/explanation/bounding.md#user-ids).

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

    An int is its decimal text (``5`` is ``"5"``), UTF-8 bytes their text, other
    bytes stay bytes, a tuple is a tuple of canonical parts; texts are compared as
    they are (``"05"`` is not ``"5"``). Why: docs/explanation/bounding.md#user-ids.

    Args:
      user_id: the id as given.
      record: what it came in, for the error.

    Returns:
      A str, bytes (not UTF-8) or tuple of these.

    Raises:
      InvalidRecordError: for a bool, float, None, empty tuple or other type,
        naming its type, never its value.
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
