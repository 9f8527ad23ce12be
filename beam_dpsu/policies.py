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
from typing import Callable, Hashable, Iterable, Mapping

__all__ = [
    "count_weight",
    "weighted_laplace_weight",
    "weighted_gaussian_weight",
    "user_contribution",
    "weighted_histogram",
    "histogram_distance",
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
