"""Reference histograms for the tests: the plain sums the fast builders must match."""

import math
from typing import Callable, Hashable, Iterable, Mapping

from beam_dpsu.core.policies import WeightedHistogramBuilder


def weighted_histogram(users_items: Iterable[Iterable[Hashable]],
                       item_weight: Callable[[int], float]) -> dict:
    """The histogram Σ_users user_contribution(W_i); only held items appear in it."""
    builder = WeightedHistogramBuilder(item_weight)
    for items in users_items:
        builder.add(items)
    return builder.histogram()


def histogram_distance(h1: Mapping, h2: Mapping, p: int) -> float:
    """‖h1 − h2‖_p over the union of supports (missing keys weigh 0)."""
    keys = set(h1) | set(h2)
    diffs = [abs(h1.get(k, 0.0) - h2.get(k, 0.0)) for k in keys]
    if p == 1:
        return math.fsum(diffs)
    if p == 2:
        return math.sqrt(math.fsum(d * d for d in diffs))
    raise ValueError(f"p must be 1 or 2, got {p!r}")
