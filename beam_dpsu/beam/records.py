"""Per-user records of distinct items, coded compactly between pipeline stages.

The SIPS rounds read every user's distinct items once per round, and a
round's release reaches the next round as a side input, so the records are
written out and read back between rounds. Beam's default coder writes each
item with a type tag and a length of its own and reads it back the same way;
``UserItemsCoder`` writes a record of str items as one UTF-8 string, the
items joined by NUL characters, and reads it back with one ``split``: the
same record, at a fraction of the per-item cost. A record it cannot write
that way (bytes items, an item containing NUL, no items) is pickled instead,
so every record comes back equal to what was written (lone surrogates
included, which Beam's default coder refuses).

A PCollection gets the coder by being typed ``UserItems``
(``.with_output_types(UserItems)``) and holding ``UserItems`` elements.
"""

from __future__ import annotations

import pickle

import apache_beam as beam
from apache_beam import coders

__all__ = ["UserItems", "UserItemsCoder"]


class UserItems(tuple):
    """(user_id, items): one user's distinct items (a tuple of str or bytes)."""

    __slots__ = ()

    def __new__(cls, user_id, items: tuple):
        return tuple.__new__(cls, (user_id, items))

    def __reduce__(self):
        return UserItems, tuple(self)


# The first byte of an encoded user id, then of the encoded items.
_INT_ID, _STR_ID, _PICKLED_ID = 0, 1, 2
_JOINED_ITEMS, _PICKLED_ITEMS = b"j", b"p"
_INT_ID_LIMIT = 1 << 128


def _pickled(value) -> bytes:
    return pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


class UserItemsCoder(coders.Coder):
    """Codes ``UserItems``: str items NUL-joined as UTF-8 (lone surrogates passed
    through), other items pickled; ids below 2^128 (the random ids of
    ``privacy_unit="element"``) as 16 bytes, str ids as UTF-8, others pickled."""

    def encode(self, record) -> bytes:
        user_id, items = record
        if type(user_id) is int and 0 <= user_id < _INT_ID_LIMIT:
            user = bytes((_INT_ID,)) + user_id.to_bytes(16, "big")
        else:
            kind, encoded = ((_STR_ID, user_id.encode("utf-8", "surrogatepass"))
                             if type(user_id) is str else (_PICKLED_ID, _pickled(user_id)))
            user = bytes((kind,)) + len(encoded).to_bytes(4, "big") + encoded
        try:
            joined = "\x00".join(items)
        except TypeError:  # a bytes (or other) item
            joined = None
        # As many NULs as separators: no item holds one, so the split is exact.
        if joined is not None and items and joined.count("\x00") == len(items) - 1:
            return user + _JOINED_ITEMS + joined.encode("utf-8", "surrogatepass")
        return user + _PICKLED_ITEMS + _pickled(tuple(items))

    def decode(self, data: bytes) -> UserItems:
        kind = data[0]
        user_id: object
        if kind == _INT_ID:
            user_id, start = int.from_bytes(data[1:17], "big"), 17
        else:
            size = int.from_bytes(data[1:5], "big")
            encoded, start = data[5:5 + size], 5 + size
            user_id = (encoded.decode("utf-8", "surrogatepass") if kind == _STR_ID
                       else pickle.loads(encoded))
        body = data[start + 1:]
        if data[start:start + 1] == _JOINED_ITEMS:
            items = tuple(body.decode("utf-8", "surrogatepass").split("\x00"))
        else:
            items = pickle.loads(body)
        return UserItems(user_id, items)

    def is_deterministic(self) -> bool:
        return False  # never a grouping key

    def to_type_hint(self):
        return UserItems

    def __eq__(self, other):
        return type(self) is type(other)

    def __hash__(self):
        return hash(type(self))


beam.coders.registry.register_coder(UserItems, UserItemsCoder)
