"""Users' checked items packed compactly, for the records ``max_items_per_user="auto"`` holds.

A block is a run of users, each user's distinct items as ids into the block's own item
list (and their occurrences, for a mechanism that reads frequencies); SIPS's rounds carry
their users as such blocks. Why and how: docs/explanation/bounding.md#record-blocks.
"""

from __future__ import annotations

import pickle
import struct
from array import array
from itertools import chain, compress, repeat
from typing import Container, Iterator, Mapping, NamedTuple

import numpy as np

from beam_dpsu.core.max_items_choice import size_counts
from beam_dpsu.core.policies import ItemIds
from beam_dpsu.core.tokenizer import Tokens

__all__ = ["IDS_PER_BLOCK", "ITEMS_PER_BLOCK", "RecordBlockBuilder", "DecodedBlock",
           "ascending_per_user", "encode_ids", "decode_ids", "decode_block", "block_runs",
           "unpack_block", "block_users", "with_keys", "without_items"]

# A block ends at this many (user, item) ids, or once it holds this many
# distinct items (the last user may bring more new items than were left).
IDS_PER_BLOCK = 1 << 20
ITEMS_PER_BLOCK = 60_000
# The most ids of a run of users worked on at once (``block_runs``).
RUN_IDS = 1 << 16


class RecordBlockBuilder:
    """Packs users' checked items ({item: occurrences} or a set of items) one by one;
    ``keyed``: with a key per user (``add``'s ``key``), read back by ``block_users``."""

    def __init__(self, occurrences: bool, keyed: bool = False):
        self._occurrences = occurrences
        self._keys: list | None = [] if keyed else None
        self._ids = ItemIds()
        self._items = array("i")
        self._counts = array("i")
        self._ends = array("q")
        self._plain_str = True

    @property
    def users(self) -> int:
        return len(self._ends)

    @property
    def full(self) -> bool:
        """Whether the block has reached ``IDS_PER_BLOCK`` ids or ``ITEMS_PER_BLOCK`` items."""
        return len(self._items) >= IDS_PER_BLOCK or len(self._ids) >= ITEMS_PER_BLOCK

    def add(self, items, plain_str: bool, key=None) -> None:
        """One user's distinct items: a set, or a dict of occurrences (``occurrences``).
        ``plain_str``: whether they are known to be non-empty plain str; ``key``: the
        user's key in a ``keyed`` block."""
        # ``fromlist``: half the time of ``extend`` for a list (no iterator protocol)
        self._items.fromlist(self._ids.ids(items))
        if self._keys is not None:
            self._keys.append(key)
        if self._occurrences:
            self._counts.extend(items.values() if isinstance(items, Mapping)
                                else repeat(1, len(items)))
        self._ends.append(len(self._items))
        self._plain_str = self._plain_str and plain_str

    def build(self, edges: np.ndarray) -> tuple:
        """(users per size bin, the block as one bytes value)."""
        ends = np.frombuffer(self._ends, dtype=np.int64)
        return size_counts(np.diff(ends, prepend=0), edges), self.packed()

    def packed(self) -> bytes:
        """The block as one bytes value."""
        counts = np.array(self._counts, dtype=np.int32) if self._occurrences else None
        return _block(self._ids.items(), np.frombuffer(self._items, dtype=np.int32),
                      np.frombuffer(self._ends, dtype=np.int64), counts, self._plain_str,
                      self._keys)


def _block(items: list, ids: np.ndarray, ends: np.ndarray, counts: np.ndarray | None,
           plain_str: bool, keys: list | None, in_order: bool = False) -> bytes:
    """A block's fields as one bytes value (``in_order``: each user's ids already ascend)."""
    if not in_order:
        ids, counts = ascending_per_user(ids, ends, counts)
    small, low, large = encode_ids(ids, ends)
    ends_type = np.uint32 if not len(ends) or ends[-1] < 1 << 32 else np.int64
    listed = _joined(items, plain_str)
    flags = ((_PLAIN_STR if plain_str else 0) | (_COUNTS if counts is not None else 0)
             | (_JOINED if listed is not None else 0) | (_KEYS if keys is not None else 0))
    if listed is None:
        listed = pickle.dumps(items, protocol=pickle.HIGHEST_PROTOCOL)
    keys_bytes = b"" if keys is None else pickle.dumps(keys, protocol=pickle.HIGHEST_PROTOCOL)
    sections = [ends.astype(ends_type).tobytes(), large.tobytes(),
                b"" if counts is None else counts.astype(np.int32).tobytes(),
                small.tobytes(), low.tobytes(), listed, keys_bytes]
    header = _HEADER.pack(flags, len(ends), len(small), len(low), len(large), large.itemsize,
                          np.dtype(ends_type).itemsize, len(listed), len(keys_bytes))
    return b"".join([header] + [part + bytes(-len(part) % 8) for part in sections])


# A block: this header, then each section padded to 8 bytes, its arrays read in
# place (``numpy.frombuffer``), not copied out of a pickle; layout:
# docs/explanation/bounding.md#record-blocks.
_HEADER = struct.Struct("<9Q")
_PLAIN_STR, _COUNTS, _JOINED, _KEYS = 1, 2, 4, 8


def _joined(items: list, plain_str: bool) -> bytes | None:
    """The items joined by NUL in UTF-8 (1 byte an item, against 3 pickled) when every one
    is a str without NUL (so ``split`` is exact), else None."""
    if not items or not (plain_str or all(type(item) is str for item in items)):
        return None
    joined = "\0".join(items)
    if joined.count("\0") != len(items) - 1:
        return None
    return joined.encode("utf-8", "surrogatepass")


class _Fields(NamedTuple):
    """A block's sections, its arrays views of its bytes."""

    items: list
    small: np.ndarray
    low: np.ndarray
    large: np.ndarray
    ends: np.ndarray
    counts: np.ndarray | None
    plain_str: bool
    keys: list | None


def _fields(block: bytes) -> _Fields:
    flags, users, pairs, n_low, n_large, large_size, ends_size, items_size, keys_size = (
        _HEADER.unpack_from(block))
    offset = _HEADER.size

    def section(dtype, count: int) -> np.ndarray:
        nonlocal offset
        start, size = offset, count * np.dtype(dtype).itemsize
        offset += size + -size % 8
        return np.frombuffer(block, dtype=dtype, count=count, offset=start)

    ends = section(np.uint32 if ends_size == 4 else np.int64, users)
    large = section(np.uint16 if large_size == 2 else np.uint32, n_large)
    counts = section(np.int32, pairs) if flags & _COUNTS else None  # (else no bytes)
    small = section(np.uint8, pairs)
    low = section(np.uint8, n_low)
    listed = section(np.uint8, items_size).tobytes()
    items = (listed.decode("utf-8", "surrogatepass").split("\0") if flags & _JOINED
             else pickle.loads(listed))
    keys = pickle.loads(section(np.uint8, keys_size).data) if flags & _KEYS else None
    return _Fields(items, small, low, large, ends.astype(np.int64), counts,
                   bool(flags & _PLAIN_STR), keys)


# The first byte of an id difference: below ``_WIDE`` the difference itself; from
# ``_WIDE`` to ``_LARGE`` - 1 the high bits of one below ``_WIDE_END``, its low byte
# next in ``low``; ``_LARGE``: the difference is written in full (``encode_ids``).
_WIDE = 224
_LARGE = 255
_WIDE_END = _WIDE + ((_LARGE - _WIDE) << 8)


def ascending_per_user(ids: np.ndarray, ends: np.ndarray, counts: np.ndarray | None = None):
    """``ids`` (user i's ending at ``ends[i]``) and ``counts`` (or None), each user's ascending."""
    sizes = np.diff(ends, prepend=0)
    span = int(ids.max()) + 1 if len(ids) else 1
    # Each user's ids offset past the users before it: one sort orders every user
    # apart and keeps the users in their order.
    key_type = np.uint32 if len(ends) * span < 1 << 32 else np.int64
    offsets = np.repeat(np.arange(len(ends), dtype=key_type) * key_type(span), sizes)
    keys = offsets + ids.astype(key_type)
    if counts is None:
        keys.sort()
        return keys - offsets, None
    order = np.argsort(keys, kind="stable")
    return ids[order], counts[order]


def encode_ids(ids: np.ndarray, ends: np.ndarray) -> tuple:
    """Each user's ascending ids (``ascending_per_user``) as differences, in (``small``,
    ``low``, ``large``): one byte below ``_WIDE``, two below ``_WIDE_END``, else
    ``_LARGE`` and a full value (docs/explanation/bounding.md#record-blocks)."""
    steps = np.array(ids, dtype=np.int32 if not len(ids) or ids.max() < 1 << 31 else np.int64)
    steps[1:] -= steps[:-1].copy()
    sizes = np.diff(ends, prepend=0)
    starts = (ends - sizes)[sizes > 0]
    steps[starts] = ids[starts]
    small = steps.astype(np.uint8)  # the differences below _WIDE; the others next
    wide = (steps >= _WIDE) & (steps < _WIDE_END)
    above = steps[wide] - _WIDE
    small[wide] = _WIDE + (above >> 8)
    low = (above & 0xFF).astype(np.uint8)
    full = steps >= _WIDE_END
    small[full] = _LARGE
    large = steps[full]
    large_type = np.uint16 if not len(large) or large.max() < 1 << 16 else np.uint32
    return small, low, large.astype(large_type)


def decode_ids(small: np.ndarray, low: np.ndarray, large: np.ndarray, ends: np.ndarray,
               items: int) -> np.ndarray:
    """``encode_ids``'s ids back, given the users' ``ends`` and the block's number of
    ``items``: uint16 when they fit, else int32 (int64 past 2^31 items), by one running
    sum and no other array per id (docs/explanation/bounding.md#record-blocks)."""
    id_type = np.uint16 if items <= 1 << 16 else np.int32 if items <= 1 << 31 else np.int64
    ids = small.astype(id_type)
    wide = (small >= _WIDE) & (small < _LARGE)
    ids[wide] = ((ids[wide] - _WIDE) << 8) + _WIDE + low
    ids[small == _LARGE] = large
    sizes = np.diff(ends, prepend=0)
    starts = (ends - sizes)[sizes > 0]
    if len(starts) > 1:
        last = np.add.reduceat(ids, starts, dtype=id_type)
        ids[starts[1:]] -= last[:-1]
    np.cumsum(ids, out=ids, dtype=id_type)
    return ids


class DecodedBlock(NamedTuple):
    """A packed block as arrays: its ``items``, every user's ``ids`` into them one user
    after another, each user's end in ``ids`` (``ends``), each id's ``counts`` (or
    None), ``plain_str`` and each user's key (``keys``, or None)."""

    items: list
    ids: np.ndarray
    ends: np.ndarray
    counts: np.ndarray | None
    plain_str: bool
    keys: list | None = None

    def listed(self) -> list:
        """Every (user, item) id of the block as its item, in packing order."""
        vocabulary = np.empty(len(self.items), dtype=object)
        vocabulary[:] = self.items
        return vocabulary[self.ids].tolist()


def decode_block(block: bytes) -> DecodedBlock:
    """A packed block (``RecordBlockBuilder.build``) → its arrays, nothing per user."""
    fields = _fields(block)
    ids = decode_ids(fields.small, fields.low, fields.large, fields.ends, len(fields.items))
    return DecodedBlock(fields.items, ids, fields.ends, fields.counts, fields.plain_str,
                        fields.keys)


def block_runs(block: bytes, max_ids: int = RUN_IDS) -> tuple:
    """(items, runs): the block's items, and each run of users holding ≤ ``max_ids`` ids in
    all (a larger user alone) as (ids, sizes), in packing order, decoded as it comes."""
    fields = _fields(block)
    return fields.items, _decoded_runs(fields, max_ids)


def _decoded_runs(fields: _Fields, max_ids: int):
    """``block_runs``' runs, each decoded from the block's sections as it comes."""
    ends = fields.ends
    sizes = np.diff(ends, prepend=0)
    first, start, lows, escaped = 0, 0, 0, 0
    while first < len(ends):
        last = max(first + 1, int(np.searchsorted(ends, start + max_ids, side="right")))
        end = int(ends[last - 1])
        small = fields.small[start:end]
        n_large = int(np.count_nonzero(small == _LARGE))
        n_low = int(np.count_nonzero(small >= _WIDE)) - n_large
        yield (decode_ids(small, fields.low[lows:lows + n_low],
                          fields.large[escaped:escaped + n_large], ends[first:last] - start,
                          len(fields.items)),
               sizes[first:last])
        first, start, lows, escaped = last, end, lows + n_low, escaped + n_large


def unpack_block(block: bytes):
    """A packed block → each user's items as a list, in packing order (a ``Tokens`` list
    when every item of the block is a non-empty plain str, as a tokenizer makes them)."""
    decoded = decode_block(block)
    yield from _user_lists(decoded, Tokens if decoded.plain_str else list)


def _user_lists(decoded: DecodedBlock, kind=list):
    """Each user's items as a ``kind``, in packing order (with counts, repeated)."""
    listed, ends = decoded.listed(), decoded.ends.tolist()
    times = None if decoded.counts is None else decoded.counts.tolist()
    for start, end in zip([0] + ends, ends):
        own = listed[start:end]  # with counts: each item as many times as it occurs
        yield kind(own if times is None else chain(*map(repeat, own, times[start:end])))


def _decoded_distinct(block: bytes, refusal: str) -> DecodedBlock:
    """``decode_block`` of a block of distinct items; ``refusal`` for one of occurrences."""
    decoded = decode_block(block)
    if decoded.counts is not None:
        raise ValueError(refusal)
    return decoded


def block_users(block: bytes) -> Iterator[tuple]:
    """A block of distinct items → (key, items) per user, in packing order: ``key`` as
    given to a ``keyed`` builder (None otherwise), ``items`` a list."""
    decoded = _decoded_distinct(block, "block_users reads blocks of distinct items, not "
                                       "of occurrences")
    yield from zip(repeat(None) if decoded.keys is None else decoded.keys, _user_lists(decoded))


def with_keys(block: bytes, keys: list) -> bytes:
    """The block with ``keys``, one per user in packing order, in place of its own."""
    decoded = decode_block(block)
    if len(keys) != len(decoded.ends):
        raise ValueError(f"{len(keys)} keys for a block of {len(decoded.ends)} users")
    return _block(decoded.items, decoded.ids, decoded.ends, decoded.counts,
                  decoded.plain_str, list(keys), in_order=True)


def without_items(block: bytes, removed: Container) -> bytes | None:
    """A block of distinct items less every item in ``removed`` (read once per item of
    the block's list), users left with nothing dropped; None if no user is left; the
    block itself if it holds none of ``removed``."""
    decoded = _decoded_distinct(block, "without_items removes from blocks of distinct "
                                       "items only")
    items, ids_, keys = decoded.items, decoded.ids, decoded.keys
    gone = np.fromiter(map(removed.__contains__, items), dtype=bool, count=len(items))
    if not gone.any():
        return block
    kept = ~gone[ids_]
    # Each user's end among the (user, item) ids kept; users left with nothing
    # end where the user before them ends.
    kept_ends = np.concatenate(([0], np.cumsum(kept, dtype=np.int64)))[decoded.ends]
    left = np.diff(kept_ends, prepend=0) > 0
    if not left.any():
        return None
    renumbered = np.cumsum(~gone, dtype=np.int32) - 1
    # (the renumbering keeps each user's ids ascending)
    return _block([item for item, g in zip(items, gone.tolist()) if not g],
                  renumbered[ids_[kept]], kept_ends[left], None, decoded.plain_str,
                  None if keys is None else list(compress(keys, left.tolist())), in_order=True)
