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

Pure Python/numpy (no Beam).
"""

from __future__ import annotations

import pickle
from array import array
from itertools import repeat
from typing import Mapping, NamedTuple

import numpy as np

from beam_dpsu.core.max_items_choice import size_counts
from beam_dpsu.core.policies import ItemIds
from beam_dpsu.core.tokenizer import Tokens

__all__ = ["IDS_PER_BLOCK", "ITEMS_PER_BLOCK", "RecordBlockBuilder", "DecodedBlock",
           "decode_block", "unpack_block"]

# A block ends at this many (user, item) ids, or once it holds this many
# distinct items: its ids then fit in 16 bits (2 MiB of ids), unless the last
# user brought more new items than were left (then 32).
IDS_PER_BLOCK = 1 << 20
ITEMS_PER_BLOCK = 60_000
# The most ids of a run of users worked on at once (``DecodedBlock.runs``).
RUN_IDS = 1 << 16


class RecordBlockBuilder:
    """Packs users' checked items ({item: occurrences} or a set of items) one by one."""

    def __init__(self, occurrences: bool):
        self._occurrences = occurrences
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

    def add(self, items, plain_str: bool) -> None:
        """One user's distinct items: a set, or a dict of occurrences (``occurrences``).
        ``plain_str``: whether they are known to be non-empty plain str."""
        self._items.extend(self._ids.ids(items))
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
        sizes = np.diff(ends, prepend=0)
        items = self._ids.items()
        ids = np.frombuffer(self._items, dtype=np.int32) if self._items else np.zeros(
            0, dtype=np.int32)
        if len(items) <= 1 << 16:
            ids = ids.astype(np.uint16)
        block = (items, ids.tobytes(), ids.dtype.char, bytes(self._ends),
                 bytes(self._counts) if self._occurrences else None, self._plain_str)
        return size_counts(sizes, edges), pickle.dumps(block,
                                                           protocol=pickle.HIGHEST_PROTOCOL)


class DecodedBlock(NamedTuple):
    """A packed block as arrays: ``items`` (the block's item list), ``ids`` (every user's
    distinct items as indices into it, one user after another), ``ends`` (where each
    user's ids end), ``counts`` (each id's occurrences, or None) and ``plain_str``."""

    items: list
    ids: np.ndarray
    ends: np.ndarray
    counts: np.ndarray | None
    plain_str: bool

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
    items, ids, id_type, ends, counts, plain_str = pickle.loads(block)
    return DecodedBlock(items, np.frombuffer(ids, dtype=id_type),
                        np.frombuffer(ends, dtype=np.int64),
                        None if counts is None else np.frombuffer(counts, dtype=np.int32),
                        plain_str)


def unpack_block(block: bytes):
    """A packed block → each user's items as a list, in packing order (a ``Tokens`` list
    when every item of the block is a non-empty plain str, as a tokenizer makes them)."""
    decoded = decode_block(block)
    vocabulary = np.empty(len(decoded.items), dtype=object)
    vocabulary[:] = decoded.items
    listed = vocabulary[decoded.ids].tolist()
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
