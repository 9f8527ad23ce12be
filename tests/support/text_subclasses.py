"""A str and a bytes subclass whose ``str()`` / ``bytes()`` differ from what they hold.

A subclass may define ``__str__`` or ``__bytes__`` (numpy's do not, a user's
may): a key made with ``str(v)`` or ``bytes(v)`` would then be another item than
the one the value holds, and two transforms normalising items differently
would key the same item apart.
"""

__all__ = ["OwnStr", "OwnBytes", "EXAMPLES"]


class OwnStr(str):
    """A str whose ``str()`` is another text."""

    def __str__(self):
        return "not-what-it-holds"


class OwnBytes(bytes):
    """A bytes whose ``bytes()`` is other bytes."""

    def __bytes__(self):
        return b"not-what-it-holds"


# (value, the plain str or bytes it holds)
EXAMPLES = [(OwnStr("held"), "held"), (OwnBytes(b"held"), b"held"),
            (OwnStr("\xe9t\xe9"), "\xe9t\xe9"), (OwnBytes(b"\xff\x01"), b"\xff\x01")]
