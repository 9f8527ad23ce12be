"""Per-user histogram update rules, as pure functions.

A user holds a set W of at most Δ0 distinct items (after bounding). The
parallel mechanisms add the same weight to each item of W, independent of
other users, so the histogram is a plain sum and can be built by
``CombinePerKey(sum)``. What bounds the histogram's sensitivity is the weight:

* Count:            +1 to each item        ℓ1 ≤ Δ0, ℓ2 ≤ √Δ0  (dpsu §1.1)
* Weighted Laplace: +1/|W| to each item    ℓ1 ≤ 1            (dpsu Alg. 9, Thm B.1)
* Weighted Gaussian: +1/√|W| to each item  ℓ2 ≤ 1            (dpsu Alg. 10, Thm B.2)

The Beam histogram transform and the property tests call the same functions.
"""

from __future__ import annotations

import math
from typing import Callable, Hashable, Iterable, Mapping, Sequence

import numpy as np

__all__ = [
    "count_weight",
    "weighted_laplace_weight",
    "weighted_gaussian_weight",
    "user_contribution",
    "weighted_histogram",
    "histogram_distance",
    "l1_descent",
    "l2_descent",
    "greedy_update",
    "apply_policy",
    "policy_histogram",
    "gw_item_order",
]


def _check_size(num_items: int) -> int:
    if num_items < 1:
        raise ValueError(f"a contributing user holds at least 1 item, got {num_items!r}")
    return num_items


def count_weight(num_items: int) -> float:
    """Count mechanisms: every sampled item gets +1 (dpsu §1.1)."""
    _check_size(num_items)
    return 1.0


def weighted_laplace_weight(num_items: int) -> float:
    """Weighted Laplace: +1/|W| per item, so a user moves the histogram by 1 in ℓ1 (dpsu Alg. 9)."""
    return 1.0 / _check_size(num_items)


def weighted_gaussian_weight(num_items: int) -> float:
    """Weighted Gaussian: +1/√|W| per item, so a user moves it by 1 in ℓ2 (dpsu Alg. 10; dp-sips Alg. 2)."""
    return 1.0 / math.sqrt(_check_size(num_items))


def user_contribution(items: Iterable[Hashable],
                      item_weight: Callable[[int], float]) -> list[tuple[Hashable, float]]:
    """The (item, weight) pairs one user adds: each distinct item gets item_weight(|W|)."""
    distinct = list(dict.fromkeys(items))
    if not distinct:
        return []
    w = item_weight(len(distinct))
    return [(item, w) for item in distinct]


def weighted_histogram(users_items: Iterable[Iterable[Hashable]],
                       item_weight: Callable[[int], float]) -> dict:
    """The histogram Σ_users user_contribution(W_i); only held items appear in it."""
    hist: dict = {}
    for items in users_items:
        for item, w in user_contribution(items, item_weight):
            hist[item] = hist.get(item, 0.0) + w
    return hist


def histogram_distance(h1: Mapping, h2: Mapping, p: int) -> float:
    """‖h1 − h2‖_p over the union of supports (missing keys weigh 0)."""
    keys = set(h1) | set(h2)
    diffs = [abs(h1.get(k, 0.0) - h2.get(k, 0.0)) for k in keys]
    if p == 1:
        return math.fsum(diffs)
    if p == 2:
        return math.sqrt(math.fsum(d * d for d in diffs))
    raise ValueError(f"p must be 1 or 2, got {p!r}")


# ---------------------------------------------------------------------------
# Sequential (policy) updates: each user's update depends on the histogram so
# far. The histogram is built by visiting users in a fixed order (a keyed hash
# of the user id) and applying the policy to the user's items.
# ---------------------------------------------------------------------------


def l1_descent(weights: np.ndarray, cutoff: float) -> np.ndarray:
    """ℓ1-descent (dpsu Algorithm 4): the increments one user adds to its items.

    Water-filling toward Γ with a total ℓ1 budget of 1: with gaps
    G = max(Γ − H, 0), find λ ≥ 0 with Σ min(G_u, λ) = 1 and add min(G_u, λ).
    λ is found exactly from the sorted gaps. If Σ G ≤ 1 every item is filled to
    Γ (Algorithm 4 prints ``H1|W ← H0|W`` there; the intent, per DESIGN §3, is
    ``H1|W ← (Γ,…,Γ)``). The policy is ℓ1-contractive (dpsu Lemma 4.1).
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

    Moves the user's items toward (Γ,…,Γ) by an ℓ2 distance of at most 1:
    H1 = H0 + G / max(‖G‖₂, 1) with G = Γ − H0, reaching Γ exactly when
    ‖G‖₂ ≤ 1. The policy is ℓ2-contractive (dpsu Lemma 5.2).
    """
    gaps = cutoff - np.asarray(weights, dtype=np.float64)
    norm = math.sqrt(float(np.dot(gaps, gaps)))
    return gaps / max(norm, 1.0)


def greedy_update(weights: np.ndarray, cutoff: float) -> np.ndarray:
    """GW's greedy update (gw Algorithm 2) on items already in priority order.

    With a budget of 1, the first item below Γ is filled toward Γ, then the
    next, until the budget is spent or every item has reached Γ (the
    termination the printed algorithm lacks; dp-sips footnote 1). Items at Γ
    get 0; so does every item after the budget runs out. ℓ1 sensitivity 1
    (gw Lemma 1).
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

    Only items with a positive increment are written, so an item enters the
    histogram only when a user who holds it gives it weight (never a
    zero-weight key: see DESIGN §3 on the GW reference code).
    """
    if not items:
        return
    current = np.fromiter((histogram.get(u, 0.0) for u in items), dtype=np.float64,
                          count=len(items))
    increments = update(current, cutoff)
    for item, old, inc in zip(items, current, increments):
        if inc > 0.0:
            histogram[item] = old + inc


def policy_histogram(users_items: Iterable[Sequence[Hashable]], update, cutoff: float) -> dict:
    """The histogram built by visiting users in the given order (dpsu Algorithm 2)."""
    hist: dict = {}
    for items in users_items:
        apply_policy(hist, list(items), update, cutoff)
    return hist


def gw_item_order(counts: Mapping, tie_key: Callable[[Hashable], int],
                  public_counts: Mapping | None = None) -> list:
    """A user's items in GW priority order (gw Algorithm 2, line 8; §4 for KT).

    Most frequent first by the user's own counts C_i, or, with
    ``public_counts`` (GW-KT), by the public counts (items absent from the
    public data count 1). Ties are broken by ``tie_key(item)`` (a keyed hash),
    which depends on the item alone, never on the histogram.
    """
    if public_counts is None:
        return sorted(counts, key=lambda u: (-counts[u], tie_key(u)))
    return sorted(counts, key=lambda u: (-public_counts.get(u, 1), tie_key(u)))
