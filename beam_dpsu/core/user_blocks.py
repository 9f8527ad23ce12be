"""Users of one shard of a sequential policy packed into one compact block (pure
Python/numpy, no Beam): ``UserBlockBuilder``. ``beam_dpsu.beam.sequential`` packs
them, and its shards decode and visit them (``shard_policy_histogram``)."""

from __future__ import annotations

import pickle
from typing import Iterable

import numpy as np

from beam_dpsu.core.policies import ItemIds

__all__ = ["UserBlockBuilder"]


class UserBlockBuilder:
    """Users of one shard packed into one compact block: ``add`` them, then ``encode``.

    A block holds the users' 16-byte order keys, its distinct items (each
    stored once), and each user's list as int32 ids into them, in the list's
    order. Ids are given with one C-level dict lookup per listed item
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

    def encode(self) -> bytes:
        listed = np.concatenate(self._listed_before + [np.array(self._listed, dtype=np.int32)])
        return pickle.dumps((b"".join(self._order_keys), self._ids.items(), listed,
                             np.array(self._lengths, dtype=np.int32)),
                            protocol=pickle.HIGHEST_PROTOCOL)
