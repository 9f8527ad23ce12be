"""Users of one shard of a sequential policy packed into one compact block (pure
Python/numpy, no Beam): ``UserBlockBuilder``. ``beam_dpsu.beam.sequential`` packs
them, and its shards decode and visit them (``shard_policy_histogram``)."""

from __future__ import annotations

import pickle
import struct
from typing import Iterable, NamedTuple

import numpy as np

from beam_dpsu.core.policies import ItemIds

__all__ = ["SMALL_IDS", "UserBlockBuilder", "UserBlock", "decode_user_block"]

# A block of at most this many distinct items lists them as 16-bit ids, else 32-bit.
SMALL_IDS = 1 << 16
# An encoded block: this header (users, listed ids, bytes per id), then the users'
# order keys (16 bytes each), their lengths (int32), their ids, and the pickled items.
_HEADER = struct.Struct("<QQB")


class UserBlockBuilder:
    """Users of one shard packed into one compact block: ``add`` them, then ``encode``.

    A block holds the users' 16-byte order keys, its distinct items (each
    stored once), and each user's list as ids into them, in the list's order
    (16-bit when the block holds at most ``SMALL_IDS`` distinct items, else
    32-bit). Ids are given with one C-level dict lookup per listed item
    (``policies.ItemIds``), or, for users added a block at a time
    (``add_block``), one per distinct item of that block. Users with an empty
    list hold nothing and are not added.
    """

    def __init__(self):
        self._order_keys: list = []
        self._ids = ItemIds()
        self._listed: list = []  # the users' item ids, one list after another
        self._listed_before: list = []  # int32 arrays of ids listed before ``_listed``
        self._lengths: list = []

    def add(self, order_key: bytes, items: Iterable) -> None:
        """One user: its order key (``user_order_key``) and its list."""
        if len(order_key) != 16:
            raise ValueError(f"an order key has 16 bytes, got {len(order_key)}")
        ids = self._ids.ids(items)
        self._order_keys.append(order_key)
        self._listed.extend(ids)
        self._lengths.append(len(ids))

    def add_block(self, order_keys: bytes, items: list, ids: np.ndarray,
                  lengths: np.ndarray) -> None:
        """Many users at once, as ``add`` adds them one by one: ``order_keys`` their
        16-byte keys joined, ``ids`` their lists one after another as indices into
        ``items``, ``lengths`` each list's length (each ≥ 1)."""
        if len(order_keys) != 16 * len(lengths):
            raise ValueError(f"{len(lengths)} users need {16 * len(lengths)} bytes of "
                             f"order keys, got {len(order_keys)}")
        block_ids = self._ids.of_block(items, ids)
        self._order_keys.append(order_keys)
        # As int32 arrays, in order: a list would hold a new int object per id.
        if self._listed:
            self._listed_before.append(np.array(self._listed, dtype=np.int32))
            self._listed = []
        self._listed_before.append(block_ids.astype(np.int32))
        self._lengths.extend(np.asarray(lengths).tolist())

    @property
    def distinct(self) -> int:
        """How many distinct items the block holds."""
        return len(self._ids)

    def encode(self) -> bytes:
        """The block as bytes (``decode_user_block`` reads it): 2 bytes per listed id when
        it holds at most ``SMALL_IDS`` distinct items, else 4, and 20 per user."""
        dtype = np.uint16 if len(self._ids) <= SMALL_IDS else np.int32
        listed = np.concatenate([part.astype(dtype, copy=False) for part in self._listed_before]
                                + [np.array(self._listed, dtype=dtype)])
        order_keys = b"".join(self._order_keys)
        return b"".join((_HEADER.pack(len(self._lengths), len(listed), listed.itemsize),
                         order_keys, np.array(self._lengths, dtype=np.int32).tobytes(),
                         listed.tobytes(),
                         pickle.dumps(self._ids.items(), protocol=pickle.HIGHEST_PROTOCOL)))


class UserBlock(NamedTuple):
    """A decoded block: the users' order keys (16 bytes each, joined), the block's distinct
    items, each user's list as ids into them one after another, and each list's length.
    ``listed`` and ``lengths`` are read-only views into the encoded bytes (no copy)."""

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
