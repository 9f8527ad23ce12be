"""Contribution bounding as Beam PTransforms.

First every (user_id, item) record is checked (a bad record fails the
pipeline with an error naming it; nothing is dropped silently), then each
user's records are combined into one compact per-user record of item counts,
and finally each user's distinct items are sampled uniformly down to Δ0.
All of this happens before any aggregate across users (DESIGN §4.1).
"""

from __future__ import annotations

from typing import Any

import apache_beam as beam
import numpy as np

from beam_dpsu import noise
from beam_dpsu.windowing import require_global_window

__all__ = [
    "InvalidRecordError",
    "check_pair",
    "ValidatePairs",
    "ItemCountsPerUser",
    "sample_items",
    "SampleItemsPerUser",
    "BoundContributions",
]


class InvalidRecordError(ValueError):
    """A record that cannot be attributed to one user and one text item."""


def check_pair(record: Any) -> tuple:
    """Returns ``record`` if it is a (user_id, item) pair; raises naming what is wrong.

    The user id must be present (not None, not an empty string) and hashable;
    the item must be a non-empty str or bytes. The error names the field and
    the type found, never the record's values: runner logs keep error text,
    and a user id or item there would leave the pipeline unprotected.
    """
    if not isinstance(record, tuple) or len(record) != 2:
        shape = (f"a tuple of {len(record)} fields" if isinstance(record, tuple)
                 else f"a {type(record).__name__}")
        raise InvalidRecordError(f"expected a (user_id, item) pair, got {shape}")
    user_id, item = record
    if user_id is None or (isinstance(user_id, (str, bytes)) and not user_id):
        raise InvalidRecordError("a (user_id, item) record has a missing user id "
                                 "(None or empty) in field 0")
    try:
        hash(user_id)
    except TypeError:
        raise InvalidRecordError(
            f"user id (field 0) must be hashable, got a {type(user_id).__name__}") from None
    if not isinstance(item, (str, bytes)):
        raise InvalidRecordError(
            f"item (field 1) must be str or bytes, got a {type(item).__name__}")
    if not item:
        raise InvalidRecordError("a (user_id, item) record has an empty item in field 1")
    return record


class ValidatePairs(beam.PTransform):
    """Checks each element is a valid (user_id, item) pair; fails on the first bad one."""

    def expand(self, pairs):
        return pairs | "CheckPair" >> beam.Map(check_pair)


class _ItemCountsFn(beam.CombineFn):
    """Accumulates one user's items into {item: occurrences}."""

    def create_accumulator(self):
        return {}

    def add_input(self, counts, item):
        counts[item] = counts.get(item, 0) + 1
        return counts

    def merge_accumulators(self, accumulators):
        accumulators = iter(accumulators)
        merged = next(accumulators)
        for acc in accumulators:
            for item, c in acc.items():
                merged[item] = merged.get(item, 0) + c
        return merged

    def extract_output(self, counts):
        return counts


class ItemCountsPerUser(beam.PTransform):
    """(user_id, item) occurrences → (user_id, {item: count}), one record per user.

    A combiner, so runners pre-aggregate before the shuffle. GW uses the
    counts; the other mechanisms only the keys (deduplication).
    """

    def expand(self, pairs):
        require_global_window(pairs, "ItemCountsPerUser")
        return pairs | "CombineItemsPerUser" >> beam.CombinePerKey(_ItemCountsFn())


def _sort_key(item):
    return (isinstance(item, bytes), item)


def sample_items(items, max_items_per_user: int, rng: np.random.Generator,
                 ordered: bool = False) -> list:
    """A uniform sample of at most Δ0 distinct items, without replacement.

    ``ordered`` sorts the items first, so that a seeded ``rng`` gives the same
    sample in every process (set and dict order depend on PYTHONHASHSEED).
    """
    items = list(items)
    if ordered:
        items.sort(key=_sort_key)
    if len(items) <= max_items_per_user:
        return items
    chosen = rng.choice(len(items), size=max_items_per_user, replace=False)
    return [items[i] for i in chosen]


class _SampleItemsFn(beam.DoFn):

    def __init__(self, max_items_per_user: int, seed: int | None, salt: str):
        self._max_items = max_items_per_user
        self._seed = seed
        self._salt = salt
        self._rng = None

    def setup(self):
        self._rng = noise.os_rng()

    def process(self, user_record):
        user_id, counts = user_record
        if self._seed is None:
            sampled = sample_items(counts, self._max_items, self._rng)
        else:
            sampled = sample_items(counts, self._max_items,
                                   noise.derived_rng(self._seed, "sample", self._salt, user_id),
                                   ordered=True)
        yield user_id, tuple(sampled)


class SampleItemsPerUser(beam.PTransform):
    """(user_id, items) → (user_id, tuple of ≤ Δ0 distinct items sampled uniformly).

    ``salt`` makes seeded samples of several rounds independent of each other.
    """

    def __init__(self, max_items_per_user: int, seed: int | None = None, salt: str = ""):
        super().__init__()
        if max_items_per_user < 1:
            raise ValueError(f"max_items_per_user must be >= 1, got {max_items_per_user!r}")
        self._max_items = max_items_per_user
        self._seed = noise.check_seed(seed)
        self._salt = salt

    def expand(self, user_records):
        require_global_window(user_records, "SampleItemsPerUser")
        return user_records | "SampleDistinctItems" >> beam.ParDo(
            _SampleItemsFn(self._max_items, self._seed, self._salt))


class BoundContributions(beam.PTransform):
    """(user_id, item) occurrences → (user_id, ≤ Δ0 distinct items): validate, group, sample."""

    def __init__(self, max_items_per_user: int, seed: int | None = None):
        super().__init__()
        self._max_items = max_items_per_user
        self._seed = seed

    def expand(self, pairs):
        require_global_window(pairs, "BoundContributions")
        return (pairs
                | "ValidatePairs" >> ValidatePairs()
                | "ItemCountsPerUser" >> ItemCountsPerUser()
                | "SampleItemsPerUser" >> SampleItemsPerUser(self._max_items, self._seed))
