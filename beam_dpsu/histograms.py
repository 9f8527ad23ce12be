"""Weighted histograms as Beam PTransforms.

The parallel mechanisms' histogram is a sum of independent per-user
contributions (``policies.user_contribution``), so it is a ``CombinePerKey``:
first each bounded user record becomes (item, weight) pairs, then the
weights are summed per item. Only items some user holds ever get a key.
"""

from __future__ import annotations

from typing import Callable

import apache_beam as beam

from beam_dpsu import policies
from beam_dpsu.windowing import require_global_window

__all__ = ["WeightedHistogram"]


class WeightedHistogram(beam.PTransform):
    """(user_id, distinct items) → (item, Σ_users item_weight(|W_user|)).

    Args:
      item_weight: the per-item weight of a user holding n items
        (e.g. ``policies.weighted_gaussian_weight``).
      hot_key_fanout: if set, spreads each item's partial sums over this many
        intermediate keys before the final sum, which balances the Zipf head
        (a few items held by most users) across workers on large runners.
    """

    def __init__(self, item_weight: Callable[[int], float], hot_key_fanout: int | None = None):
        super().__init__()
        if hot_key_fanout is not None and (not isinstance(hot_key_fanout, int) or hot_key_fanout < 1):
            raise ValueError(f"hot_key_fanout must be None or an int >= 1, got {hot_key_fanout!r}")
        self._item_weight = item_weight
        self._fanout = hot_key_fanout

    def expand(self, user_items):
        require_global_window(user_items, "WeightedHistogram")
        item_weight = self._item_weight
        sum_per_item = beam.CombinePerKey(sum)
        if self._fanout:
            sum_per_item = sum_per_item.with_hot_key_fanout(self._fanout)
        return (user_items
                | "UserContribution" >> beam.FlatMap(
                    lambda record: policies.user_contribution(record[1], item_weight))
                | "SumPerItem" >> sum_per_item)
