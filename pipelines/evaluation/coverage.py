"""How much of the data a released set covers: the missing mass (Dick, Joseph & Raman,
ICLR 2026), from raw counts of who holds each item: NOT differentially private, for
evaluation only (docs/explanation/reading.md#the-evaluation-job).
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Collection, Hashable, Iterable, Mapping

__all__ = ["missing_mass", "pair_counts"]


def missing_mass(pair_counts: Mapping[Hashable, int], released: Collection) -> float:
    """The share of the distinct (user, item) pairs whose item is not released.

    Args:
      pair_counts: distinct (user, item) pairs per item of the input (its users).
      released: the released set; items the input does not hold cover nothing.

    Returns:
      Σ over unreleased items of their pairs / Σ over all items; NaN for no pairs.

    Raises:
      ValueError: a count is not an integer >= 0.
    """
    total = missed = 0
    for item, n in pair_counts.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"pair counts must be integers >= 0, got {n!r}")
        total += n
        if item not in released:
            missed += n
    return missed / total if total else math.nan


def pair_counts(user_item_lists: Iterable[Iterable[Hashable]]) -> dict:
    """Distinct (user, item) pairs per item, from one item list per user."""
    return Counter(item for items in user_item_lists for item in set(items))
