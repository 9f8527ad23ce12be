"""What a record of user data must be: one user id, checked as such (pure).

Errors about records name the field and the type found, never a value: runner
logs keep error messages (docs/privacy.md, invariant 6).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from beam_dpsu.core.wording import a_type

__all__ = ["InvalidRecordError", "canonical_user_id"]


class InvalidRecordError(ValueError):
    """A record that cannot be attributed to one user and one text item."""


def canonical_user_id(user_id: Any, record: str = "(user_id, item) record"):
    """The user id as a plain str, bytes, int or tuple of these; raises naming its type.

    One user must be one key wherever the runner groups: ``numpy.int64(7)``
    and ``7``, or ``1`` and ``True``, would otherwise be one user in one
    bundle and two in another, and types Beam cannot encode deterministically
    (floats, dates, Decimals) fail later with the value in the error.
    """
    if isinstance(user_id, (bool, np.bool_)):
        raise InvalidRecordError(f"user id (field 0) of a {record} must be a str, bytes, int "
                                 "or tuple of these, got a bool")
    if isinstance(user_id, str):
        return str(user_id)
    if isinstance(user_id, bytes):
        return bytes(user_id)
    if isinstance(user_id, (int, np.integer)):
        return int(user_id)
    if isinstance(user_id, tuple) and user_id:
        return tuple(canonical_user_id(part, record) for part in user_id)
    raise InvalidRecordError(f"user id (field 0) of a {record} must be a str, bytes, int or "
                             f"tuple of these, got {a_type(user_id)}")
