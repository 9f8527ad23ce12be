"""Per-user histogram update rules, as pure functions (the Beam transforms and tests call them).

Parallel rules add a fixed weight to each of a user's ≤ Δ0 items; sequential rules
(Policy Laplace/Gaussian, GW, GW-KT) update the histogram so far, users in keyed-hash
order, and key every item of every user's list (docs/privacy.md, invariant 8).
Proofs: docs/explanation/proofs.md#parallel-and-sequential-updates (and #gw-and-gw-kt).
"""

from __future__ import annotations

import math
from collections import abc, defaultdict
from itertools import count
from typing import Callable, Hashable, Iterable, Mapping, Sequence

import numpy as np

from beam_dpsu.core import checks
from beam_dpsu.core.checks import a_type
from beam_dpsu.core.hashing import canonical_bytes

__all__ = ["count_weight", "weighted_laplace_weight", "weighted_gaussian_weight",
           "user_contribution", "ItemIds", "WeightedHistogramBuilder", "l1_descent", "l2_descent",
           "greedy_update", "apply_policy", "policy_histogram", "policy_weights", "gw_item_order"]


def count_weight(num_items: int) -> float:
    """Count mechanisms: every sampled item gets +1 (dpsu §1.1)."""
    checks.user_size(num_items)
    return 1.0


def weighted_laplace_weight(num_items: int) -> float:
    """Weighted Laplace: +1/|W| per item, so a user moves the histogram by 1 in ℓ1 (dpsu Alg. 9)."""
    return 1.0 / checks.user_size(num_items)


def weighted_gaussian_weight(num_items: int) -> float:
    """Weighted Gaussian: +1/√|W| per item, moving it by 1 in ℓ2 (dpsu Alg. 10; dp-sips Alg. 2)."""
    return 1.0 / math.sqrt(checks.user_size(num_items))


def user_contribution(items: Iterable[Hashable],
                      item_weight: Callable[[int], float]) -> list[tuple[Hashable, float]]:
    """The (item, weight) pairs one user adds: each distinct item gets item_weight(|W|)."""
    distinct = list(dict.fromkeys(items))
    w = item_weight(len(distinct)) if distinct else 0.0  # item_weight(0) raises
    return [(item, w) for item in distinct]


class ItemIds:
    """Small integer ids for items, numbered 0, 1, 2, … in order of first sight, one C-level
    lookup per item (docs/explanation/accounting.md#item-ids-and-histograms)."""

    __slots__ = ("_index",)

    def __init__(self):
        self._index = defaultdict(count().__next__)

    def __len__(self) -> int:
        return len(self._index)

    def __reduce__(self):
        # By its items: a counter cannot be pickled or copied from Python 3.14 on.
        return _item_ids_of, (self.items(),)

    def ids(self, items: Iterable[Hashable]) -> list:
        """The ids of ``items`` (read once); new items get the next ids, none if the call fails."""
        index = self._index
        size = len(index)
        try:
            return list(map(index.__getitem__, items))
        except BaseException:
            while len(index) > size:
                index.popitem()  # dicts pop their last insertion first
            index.default_factory = count(size).__next__
            raise

    def items(self) -> list:
        """The items seen so far, by id."""
        return list(self._index)

    def of_block(self, items: list, ids) -> np.ndarray:
        """``ids`` (indices into ``items``) as ids here: one lookup per distinct item named."""
        ids = np.asarray(ids, dtype=np.intp)
        held = np.flatnonzero(np.bincount(ids, minlength=len(items)))
        to_these = np.zeros(len(items), dtype=np.intp)
        to_these[held] = self.ids([items[i] for i in held.tolist()])
        return to_these[ids]


def _item_ids_of(items: list) -> ItemIds:
    ids = ItemIds()
    ids.ids(items)
    return ids


class WeightedHistogramBuilder:
    """Builds Σ_users user_contribution(W_i) from users' item sets, fast and in a fixed order.

    Σ_n item_weight(n)·#{users with |W| = n holding the item}, sizes in increasing order,
    so each sum is the same bit for bit whatever the users' order. ``entries`` is the
    memory held, in ~100-byte units (docs/explanation/accounting.md#item-ids-and-histograms).
    """

    # Fold a size's ids into counts at this many, and at least one per item (so the
    # array, one int64 per item, is never larger than the list it replaces).
    FOLD_IDS = 1 << 12

    def __init__(self, item_weight: Callable[[int], float]):
        self._item_weight = item_weight
        self._ids = ItemIds()
        self._pending: dict = {}  # size → ids of its users' items, not yet counted
        self._pending_arrays: dict = {}  # size → int32 arrays of ids (``add_block``)
        self._counts: dict = {}  # size → int64 counts per id (folded lists)
        self._pending_ids = 0
        self._count_cells = 0

    @property
    def entries(self) -> int:
        return len(self._ids) + (self._pending_ids + self._count_cells) // 8

    def add(self, items: Iterable[Hashable]) -> None:
        """Adds one user's distinct items (duplicates count once)."""
        if isinstance(items, (str, bytes)):  # one item, not a user's items
            raise TypeError(f"a user's items must be a collection of items, got {a_type(items)}")
        self.add_distinct(dict.fromkeys(items).keys())

    def add_distinct(self, distinct) -> None:
        """``add`` for items known to be distinct (a repeated item would count twice)."""
        if isinstance(distinct, abc.Mapping):  # its keys, never its values as counts
            distinct = distinct.keys()
        size = len(distinct)
        if not size:
            return
        ids = self._ids.ids(distinct)
        pending = self._pending.setdefault(size, [])
        pending.extend(ids)
        self._pending_ids += size
        # (the list alone: ``add_block``'s arrays only delay a fold, which changes no sum)
        if self._full(len(pending)):
            self._fold(size)

    def _listed(self, size: int) -> int:
        """How many ids of this size wait to be counted."""
        return len(self._pending.get(size, ())) + sum(map(len, self._pending_arrays.get(size, ())))

    def _full(self, listed: int) -> bool:
        return listed >= self.FOLD_IDS and listed >= len(self._ids)

    def add_block(self, items: list, ids: np.ndarray, sizes: np.ndarray) -> None:
        """``add_distinct`` for many users: ``ids`` index ``items``, user after user, ``sizes``
        long each, with one dict probe per distinct item of the block."""
        if not len(ids):
            return
        builder_ids = self._ids.of_block(items, ids)
        pair_sizes = np.repeat(np.asarray(sizes, dtype=np.intp), sizes)
        order = np.argsort(pair_sizes, kind="stable")
        by_size, starts = np.unique(pair_sizes[order], return_index=True)
        grouped = builder_ids[order]
        for size, start, end in zip(by_size.tolist(), starts.tolist(),
                                    starts[1:].tolist() + [len(grouped)]):
            # As int32 arrays: a list would hold a new int object per id.
            self._pending_arrays.setdefault(size, []).append(grouped[start:end].astype(np.int32))
            self._pending_ids += end - start
            if self._full(self._listed(size)):
                self._fold(size)

    def _size_counts(self, size: int) -> np.ndarray:
        """The exact number of users of this size holding each item, by id."""
        counts = np.bincount(np.array(self._pending.get(size, ()), dtype=np.intp),
                             minlength=len(self._ids))
        arrays = self._pending_arrays.get(size)
        if arrays:
            counts += np.bincount(np.concatenate(arrays), minlength=len(self._ids))
        folded = self._counts.get(size)
        if folded is not None:
            counts[:len(folded)] += folded
        return counts

    def _fold(self, size: int) -> None:
        counts = self._size_counts(size)
        folded = self._counts.get(size)
        self._count_cells += len(counts) - (0 if folded is None else len(folded))
        self._counts[size] = counts
        self._pending_ids -= self._listed(size)
        self._pending[size] = []
        self._pending_arrays.pop(size, None)

    def histogram(self) -> dict:
        """The histogram {item: Σ weights} of the users added so far."""
        hist = np.zeros(len(self._ids))
        for size in self._sizes():
            hist += self._item_weight(size) * self._size_counts(size)
        return dict(zip(self._ids.items(), hist.tolist()))

    def _sizes(self) -> list:
        return sorted(set(self._pending) | set(self._pending_arrays) | set(self._counts))

    def holders(self) -> dict:
        """{item: how many users added so far hold it} (``beam_dpsu.core.pre_threshold``)."""
        held = sum(map(self._size_counts, self._sizes()), np.zeros(len(self._ids), np.int64))
        return dict(zip(self._ids.items(), held.tolist()))


# --- sequential (policy) updates: users visited in keyed-hash order --------------------


def l1_descent(weights: np.ndarray, cutoff: float) -> np.ndarray:
    """ℓ1-descent (dpsu Algorithm 4): the increments one user adds to its items.

    Water-filling toward Γ with an ℓ1 budget of 1 (Algorithm 4's misprint: docs/privacy.md);
    ℓ1-contractive (dpsu Lemma 4.1). Derivation: docs/explanation/accounting.md#descent-policies.
    """
    gaps = np.maximum(cutoff - np.asarray(weights, dtype=np.float64), 0.0)
    if gaps.sum() <= 1.0:
        return gaps
    ordered = np.sort(gaps)
    n = ordered.size
    # With the k smallest gaps filled, the rest share (1 − Σ_{j<k} g_j)/(n − k);
    # λ is that share for the first k where it does not exceed g_k.
    filled_before = np.concatenate(([0.0], np.cumsum(ordered)[:-1]))
    shares = (1.0 - filled_before) / (n - np.arange(n))
    k = int(np.argmax(shares <= ordered))
    return np.minimum(gaps, shares[k])


def l2_descent(weights: np.ndarray, cutoff: float) -> np.ndarray:
    """ℓ2-descent (dpsu Algorithm 7): the increments one user adds to its items.

    H1 = H0 + G / max(‖G‖₂, 1), G = Γ − H0: toward (Γ,…,Γ) by ℓ2 distance ≤ 1.
    ℓ2-contractive (dpsu Lemma 5.2).
    """
    gaps = cutoff - np.asarray(weights, dtype=np.float64)
    norm = math.sqrt(float(np.dot(gaps, gaps)))
    return gaps / max(norm, 1.0)


def greedy_update(weights: np.ndarray, cutoff: float) -> np.ndarray:
    """GW's greedy update (gw Algorithm 2) on items already in priority order.

    Items below Γ are filled toward Γ in order until a budget of 1 is spent (the termination
    the printed algorithm lacks; dp-sips footnote 1); ℓ1 sensitivity 1 (gw Lemma 1).
    """
    weights = np.asarray(weights, dtype=np.float64)
    increments = np.zeros_like(weights)
    budget = 1.0
    for i, w in enumerate(weights):
        gap = cutoff - w
        if gap <= 0.0:
            continue
        if gap <= budget:
            increments[i] = gap
            budget -= gap
            if budget <= 0.0:
                break
        else:
            increments[i] = budget
            break
    return increments


def apply_policy(histogram: dict, items: Sequence[Hashable], update, cutoff: float) -> None:
    """Applies one user's policy update to ``histogram`` in place.

    Every item of the list is written, increment 0 included, so neighbours' key sets differ
    only by the extra user's items (docs/explanation/proofs.md#parallel-and-sequential-updates).
    """
    if not items:
        return
    current = np.fromiter((histogram.get(u, 0.0) for u in items), dtype=np.float64,
                          count=len(items))
    increments = update(current, cutoff)
    for item, old, inc in zip(items, current, increments):
        histogram[item] = float(old + inc)


def policy_histogram(users_items: Iterable[Iterable[Hashable]], update, cutoff: float) -> dict:
    """The histogram that gets noised: users visited in the given order (dpsu Algorithm 2).

    ``users_items`` are the bounded lists (sampled, or ``gw_item_order``); ``apply_policy``
    once per user, on arrays (``policy_weights``). Every key is noised, zero weights included.
    """
    ids = ItemIds()
    users_ids = [np.array(ids.ids(user_items), dtype=np.intp) for user_items in users_items]
    weights = policy_weights(users_ids, len(ids), update, cutoff)
    return dict(zip(ids.items(), weights.tolist()))


def policy_weights(users_ids: Iterable[np.ndarray], num_items: int, update,
                   cutoff: float) -> np.ndarray:
    """The policy histogram by item id (``apply_policy``'s arithmetic); unlisted items weigh 0."""
    weights = np.zeros(num_items)
    for index in users_ids:
        if len(index):
            current = weights[index]
            weights[index] = current + update(current, cutoff)
    return weights


def gw_item_order(counts: Mapping, tie_key: Callable[[Hashable], int], max_items_per_user: int,
                  public_counts: Mapping | None = None) -> list:
    """A user's top-Δ0 items in GW priority order (gw Algorithm 2, line 8; §4 for KT).

    Most frequent first by ``counts`` or, GW-KT, ``public_counts`` (absent items count
    1); ties by ``tie_key(item)``, a keyed hash of the item alone. Only the first Δ0
    are kept (the cap bounding the extra user's keys: docs/explanation/proofs.md#gw-and-gw-kt).
    """
    # By (count, tie key, canonical bytes): total even on a 64-bit hash collision,
    # never the dict's order; the bytes only when (count, tie key) ties near the top.
    if public_counts is None:
        ranked = [(-c, tie_key(u), u) for u, c in counts.items()]
    else:
        ranked = [(-public_counts.get(u, 1), tie_key(u), u) for u in counts]
    ranked.sort(key=lambda r: r[:2])
    top = ranked[:max_items_per_user + 1]
    if any(a[:2] == b[:2] for a, b in zip(top, top[1:])):
        ranked.sort(key=lambda r: (r[0], r[1], canonical_bytes(r[2])))
    return [r[2] for r in ranked[:max_items_per_user]]
