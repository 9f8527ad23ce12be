"""Users' checked items packed compactly, for the records ``max_items_per_user="auto"`` holds.

With ``"auto"``, no selection can start before Δ0 is chosen, and the choice
needs every user's size: so the users' records wait, all of them, until the
choice is made (a side input). As pickled lists of str they took ~7.7 bytes
per (user, item) pair encoded on IMDb, and the DirectRunner held ~35 bytes
per pair (buffered, then copied when read back); packed here they take ~2.6
bytes per distinct pair, each block's items included (docs/benchmarks.md).

A block is a run of users: each user's distinct items as 16-bit ids into the
block's own item list (32-bit when the last user took it past 65,536 items),
and, for a mechanism that reads frequencies, each item's occurrences; the
users' size bins are counted as they are packed, so the size histogram needs
no pass of its own. Unpacking gives every user back as a list of its
distinct items (an item repeated once per occurrence with ``occurrences``):
the same items, the same counts, in another order (seeded samples and
element ids sort the items first: ``beam_dpsu.core.sampling``).

The SIPS rounds carry their users' records as such blocks from one round to
the next (``beam_dpsu.beam.sips``): a block of distinct items, each user
with a key when a seeded run needs one (``keyed``); ``block_users`` reads a
block's users back as (key, items), and ``without_items`` removes a round's
release from a block by mapping the released set over the block's item list
once, the ids of the items left renumbered, the users left with nothing
dropped.

Pure Python/numpy (no Beam).
"""

from __future__ import annotations

import pickle
from array import array
from itertools import compress, repeat
from typing import Container, Iterator, Mapping, NamedTuple

import numpy as np

from beam_dpsu.core.max_items_choice import size_counts
from beam_dpsu.core.policies import ItemIds
from beam_dpsu.core.tokenizer import Tokens

__all__ = ["IDS_PER_BLOCK", "ITEMS_PER_BLOCK", "RecordBlockBuilder", "DecodedBlock",
           "decode_block", "unpack_block", "block_users", "with_keys", "without_items"]

# A block ends at this many (user, item) ids, or once it holds this many
# distinct items: its ids then fit in 16 bits (2 MiB of ids), unless the last
# user brought more new items than were left (then 32).
IDS_PER_BLOCK = 1 << 20
ITEMS_PER_BLOCK = 60_000
# The most ids of a run of users worked on at once (``DecodedBlock.runs``).
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
    def pairs(self) -> int:
        return len(self._items)

    @property
    def full(self) -> bool:
        """Whether the block has reached ``IDS_PER_BLOCK`` ids or ``ITEMS_PER_BLOCK`` items."""
        return len(self._items) >= IDS_PER_BLOCK or len(self._ids) >= ITEMS_PER_BLOCK

    def add(self, items, plain_str: bool, key=None) -> None:
        """One user's distinct items: a set, or a dict of occurrences (``occurrences``).
        ``plain_str``: whether they are known to be non-empty plain str; ``key``: the
        user's key in a ``keyed`` block."""
        self._items.extend(self._ids.ids(items))
        if self._keys is not None:
            self._keys.append(key)
        if self._occurrences:
            self._counts.extend(items.values() if isinstance(items, Mapping)
                                else repeat(1, len(items)))
        self._ends.append(len(self._items))
        self._plain_str = self._plain_str and plain_str

    def build(self, edges: np.ndarray) -> tuple:
        """(users per size bin, as ``max_items_choice.size_counts`` counts them, the
        block as one bytes value)."""
        ends = np.frombuffer(self._ends, dtype=np.int64) if self._ends else np.zeros(
            0, dtype=np.int64)
        return size_counts(np.diff(ends, prepend=0), edges), self.packed()

    def packed(self) -> bytes:
        """The block as one bytes value."""
        ids = np.frombuffer(self._items, dtype=np.int32) if self._items else np.zeros(
            0, dtype=np.int32)
        return _block(self._ids.items(), ids, bytes(self._ends),
                      bytes(self._counts) if self._occurrences else None, self._plain_str,
                      self._keys)


def _block(items: list, ids: np.ndarray, ends: bytes, counts: bytes | None, plain_str: bool,
           keys: list | None) -> bytes:
    """A block's fields as one bytes value, its ids in 16 bits when its items allow."""
    if len(items) <= 1 << 16:
        ids = ids.astype(np.uint16)
    block = (items, ids.tobytes(), ids.dtype.char, ends, counts, plain_str, keys)
    return pickle.dumps(block, protocol=pickle.HIGHEST_PROTOCOL)


class DecodedBlock(NamedTuple):
    """A packed block as arrays: ``items`` (the block's item list), ``ids`` (every user's
    distinct items as indices into it, one user after another), ``ends`` (where each
    user's ids end), ``counts`` (each id's occurrences, or None), ``plain_str`` and
    ``keys`` (each user's key, or None)."""

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

    @property
    def sizes(self) -> np.ndarray:
        """Each user's number of distinct items, in packing order."""
        return np.diff(self.ends, prepend=0)

    def runs(self, max_ids: int = RUN_IDS):
        """The users in runs of consecutive users holding at most ``max_ids`` ids in all
        (a larger user alone): (ids, sizes) of each run, views of the block's arrays.
        Array work on a run at a time keeps its temporary arrays small."""
        sizes = self.sizes
        first, start = 0, 0
        while first < len(sizes):
            last = max(first + 1, int(np.searchsorted(self.ends, start + max_ids,
                                                      side="right")))
            end = int(self.ends[last - 1])
            yield self.ids[start:end], sizes[first:last]
            first, start = last, end


def decode_block(block: bytes) -> DecodedBlock:
    """A packed block (``RecordBlockBuilder.build``) → its arrays, nothing per user."""
    items, ids, id_type, ends, counts, plain_str, keys = pickle.loads(block)
    return DecodedBlock(items, np.frombuffer(ids, dtype=id_type),
                        np.frombuffer(ends, dtype=np.int64),
                        None if counts is None else np.frombuffer(counts, dtype=np.int32),
                        plain_str, keys)


def unpack_block(block: bytes):
    """A packed block → each user's items as a list, in packing order (a ``Tokens`` list
    when every item of the block is a non-empty plain str, as a tokenizer makes them)."""
    decoded = decode_block(block)
    listed = decoded.listed()
    if decoded.counts is not None:
        times = decoded.counts.tolist()
    kind = Tokens if decoded.plain_str else list
    start = 0
    for end in decoded.ends.tolist():
        if decoded.counts is None:
            yield kind(listed[start:end])
        else:
            yield kind(item for i in range(start, end) for item in repeat(listed[i], times[i]))
        start = end


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
    listed, keys = decoded.listed(), decoded.keys
    start = 0
    for user, end in enumerate(decoded.ends.tolist()):
        yield (None if keys is None else keys[user]), listed[start:end]
        start = end


def with_keys(block: bytes, keys: list) -> bytes:
    """The block with ``keys``, one per user in packing order, in place of its own."""
    decoded = decode_block(block)
    if len(keys) != len(decoded.ends):
        raise ValueError(f"{len(keys)} keys for a block of {len(decoded.ends)} users")
    return _block(decoded.items, decoded.ids, decoded.ends.tobytes(),
                  None if decoded.counts is None else decoded.counts.tobytes(),
                  decoded.plain_str, list(keys))


def without_items(block: bytes, removed: Container) -> bytes | None:
    """A block of distinct items less every item in ``removed``: the users in their
    order, each user's items left in theirs, a user the removal leaves with nothing
    dropped (None if no user is left). A block that holds none of ``removed`` is
    returned as it is, with any user that held nothing to begin with (such a user
    adds nothing to a histogram). ``removed`` is read once per item of the block's
    item list, not once per (user, item); the items left are renumbered."""
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
    renumbered = np.cumsum(~gone) - 1
    return _block([item for item, g in zip(items, gone.tolist()) if not g],
                  renumbered[ids_[kept]].astype(np.int32), kept_ends[left].tobytes(), None,
                  decoded.plain_str, None if keys is None else list(compress(keys, left.tolist())))
