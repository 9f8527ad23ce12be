"""Reference histograms for the tests: the plain sums the fast builders must match."""

import math
from typing import Callable, Hashable, Iterable, Mapping, Sequence

from beam_dpsu.beam.sequential import shard_of, user_order_key
from beam_dpsu.core.policies import WeightedHistogramBuilder, apply_policy


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


def sharded_policy_histogram(named_users: Iterable[tuple[Hashable, Sequence]], update,
                             cutoff: float, shards: int, key: bytes) -> dict:
    """Pure reference of what ``SequentialPolicyHistogram`` computes."""
    by_shard: dict = {}
    for user_id, items in named_users:
        by_shard.setdefault(shard_of(user_id, shards, key), []).append(
            (user_order_key(user_id, key), list(items)))
    total: dict = {}
    for users in by_shard.values():
        hist: dict = {}
        for _, items in sorted(users, key=lambda u: u[0]):
            apply_policy(hist, items, update, cutoff)
        for item, w in hist.items():
            total[item] = total.get(item, 0.0) + w
    return total
