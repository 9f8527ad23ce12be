"""Users of one shard of a sequential policy packed into one compact block (pure
Python/numpy, no Beam): ``UserBlockBuilder``; and a shard's policy histogram from its
blocks (``shard_policy_histogram``), for ``beam_dpsu.beam.sequential``."""

from __future__ import annotations

import pickle
import struct
from array import array
from typing import Iterable, NamedTuple

import numpy as np

from beam_dpsu.core.hashing import canonical_bytes
from beam_dpsu.core.policies import ItemIds, policy_weights

__all__ = ["SMALL_IDS", "UserBlockBuilder", "UserBlock", "decode_user_block",
           "shard_policy_histogram"]

# A block of at most this many distinct items lists them as 16-bit ids, else 32-bit.
SMALL_IDS = 1 << 16
# An encoded block: this header (users, listed ids, bytes per id), the users' order
# keys (16 bytes each), their lengths (int32), their ids, and the pickled items.
_HEADER = struct.Struct("<QQB")


class UserBlockBuilder:
    """Users of one shard packed into one compact block: ``add`` them, then ``encode``.

    A block holds the users' 16-byte order keys, its distinct items (each once), and each
    user's list as ids into them, in order (16-bit up to ``SMALL_IDS`` items, else 32-bit).
    """

    def __init__(self):
        self._order_keys: list = []
        self._ids = ItemIds()
        # int32 arrays, not lists: a list would hold a new int object per id.
        self._listed = array("i")  # the users' item ids, one list after another
        self._lengths = array("i")

    def add(self, order_key: bytes, items: Iterable) -> None:
        """One user: its order key (``user_order_key``) and its list."""
        if len(order_key) != 16:
            raise ValueError(f"an order key has 16 bytes, got {len(order_key)}")
        ids = self._ids.ids(items)
        self._order_keys.append(order_key)
        self._listed.fromlist(ids)
        self._lengths.append(len(ids))

    def add_block(self, order_keys: bytes, items: list, ids: np.ndarray,
                  lengths: np.ndarray) -> None:
        """Many users at once: their 16-byte ``order_keys`` joined, their lists one after
        another as ``ids`` into ``items``, and each list's length (≥ 1)."""
        if len(order_keys) != 16 * len(lengths):
            raise ValueError(f"{len(lengths)} users need {16 * len(lengths)} bytes of "
                             f"order keys, got {len(order_keys)}")
        lengths = np.asarray(lengths)
        if len(lengths) and int(lengths.max()) >= 2 ** 31:
            raise OverflowError("a user's list in a block holds at most 2**31 - 1 items")
        if int(lengths.sum()) != len(ids):
            raise ValueError(f"{len(ids)} ids, but the users' lengths add up to "
                             f"{int(lengths.sum())}")
        block_ids = self._ids.of_block(items, ids)
        self._order_keys.append(order_keys)
        self._listed.frombytes(block_ids.astype(np.int32).tobytes())
        self._lengths.frombytes(lengths.astype(np.int32).tobytes())

    @property
    def distinct(self) -> int:
        """How many distinct items the block holds."""
        return len(self._ids)

    def encode(self) -> bytes:
        """The block as bytes (``decode_user_block`` reads it)."""
        dtype = np.uint16 if len(self._ids) <= SMALL_IDS else np.int32
        listed = np.frombuffer(self._listed, dtype=np.int32).astype(dtype)
        return b"".join((_HEADER.pack(len(self._lengths), len(listed), listed.itemsize),
                         *self._order_keys, self._lengths.tobytes(), listed.tobytes(),
                         pickle.dumps(self._ids.items(), protocol=pickle.HIGHEST_PROTOCOL)))


class UserBlock(NamedTuple):
    """A decoded block: the users' order keys joined, its distinct items, the users' lists
    as ids into them, and each list's length (read-only views of the bytes)."""

    order_keys: bytes
    items: list
    listed: np.ndarray
    lengths: np.ndarray


def decode_user_block(block: bytes) -> UserBlock:
    """A block ``UserBlockBuilder.encode`` made."""
    users, num_listed, id_size = _HEADER.unpack_from(block)
    keys_end = _HEADER.size + 16 * users
    lengths_end = keys_end + 4 * users
    listed_end = lengths_end + id_size * num_listed
    return UserBlock(
        block[_HEADER.size:keys_end],
        pickle.loads(memoryview(block)[listed_end:]),
        np.frombuffer(block, dtype=np.uint16 if id_size == 2 else np.int32, count=num_listed,
                      offset=lengths_end),
        np.frombuffer(block, dtype=np.int32, count=users, offset=keys_end))


def shard_policy_histogram(blocks: Iterable[bytes], update, cutoff: float,
                           count_holders: bool = False):
    """A shard's policy histogram from its encoded blocks, in any number and order.

    Users are visited sorted by order key, ties by their lists' bytes, so the result does
    not depend on how users fell into blocks (docs/explanation/bounding.md#shard-blocks).
    ``count_holders``: also {item: users listing it}, for a pre-threshold.
    """
    users = _ShardUsers(blocks)
    if not users.num_items:
        return ({}, {}) if count_holders else {}
    items = users.items
    words = np.frombuffer(users.order_keys, dtype=">u8").reshape(-1, 2)
    order = np.lexsort((words[:, 1], words[:, 0]))
    ties = np.flatnonzero((words[order[1:]] == words[order[:-1]]).all(axis=1))
    if ties.size:
        order = _order_ties(order, ties, users)
    weights = policy_weights(users.in_order(order), len(items), update, cutoff)
    histogram = dict(zip(items, weights.tolist()))
    if count_holders:
        return histogram, dict(zip(items, users.holders().tolist()))
    return histogram


class _ShardUsers:
    """A shard's users from its blocks, each block's ids views of its bytes, mapped to the
    shard's numbering by one array per block when read."""

    def __init__(self, blocks: Iterable[bytes]):
        ids = ItemIds()
        order_keys, lengths, self._blocks = [], [], []
        for block in blocks:
            decoded = decode_user_block(block)  # its ids and lengths: views, no copy
            order_keys.append(decoded.order_keys)
            lengths.append(decoded.lengths)
            # (its ids into the shard's, its users' lists)
            self._blocks.append((_as_ids(ids.ids(decoded.items), len(ids)), decoded.listed))
        self.order_keys = b"".join(order_keys)
        self.items = ids.items()
        self.num_items = len(self.items)
        # Each user's block, and where its list starts and ends in that block.
        self._block = np.repeat(np.arange(len(lengths), dtype=np.intp),
                                [len(part) for part in lengths])
        none = np.zeros(0, dtype=np.intp)
        self._starts = np.concatenate([none] + [np.cumsum(p, dtype=np.intp) - p for p in lengths])
        self._ends = self._starts + np.concatenate([none, *lengths])

    def in_order(self, order: np.ndarray):
        """The users' lists in ``order``, as ids of the shard (one numpy take each)."""
        blocks = self._blocks
        for block, start, end in zip(self._block[order].tolist(), self._starts[order].tolist(),
                                     self._ends[order].tolist()):
            to_shard, listed = blocks[block]
            yield to_shard.take(listed[start:end])  # (take: ~1 µs less than [] here)

    def holders(self) -> np.ndarray:
        """Each shard item's number of users (a user's list is distinct)."""
        holders = np.zeros(self.num_items, dtype=np.int64)
        for to_shard, listed in self._blocks:
            np.add.at(holders, to_shard, np.bincount(listed, minlength=len(to_shard)))
        return holders


def _as_ids(ids: list, num_items: int) -> np.ndarray:
    # 4 bytes per item, unless the shard has 2^31 distinct items or more.
    return np.array(ids, dtype=np.int32 if num_items <= 1 << 31 else np.int64)


def _order_ties(order, ties, users: _ShardUsers) -> np.ndarray:
    """``order`` with each run of equal order keys sorted by the users' lists (in place)."""
    items = users.items
    # A run of consecutive ties i (order[i] and order[i + 1] alike) is one run of equal keys.
    for run in np.split(ties, np.flatnonzero(np.diff(ties) > 1) + 1):
        tied = order[int(run[0]):int(run[-1]) + 2]  # a view: sorted in place
        lists = [tuple(canonical_bytes(items[i]) for i in ids.tolist())
                 for ids in users.in_order(tied)]
        tied[:] = tied[sorted(range(len(tied)), key=lists.__getitem__)]
    return order
