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
    "canonical_user_id",
    "check_pair",
    "ValidatePairs",
    "ItemCountsPerUser",
    "sample_items",
    "SampleItemsPerUser",
    "BoundContributions",
]


class InvalidRecordError(ValueError):
    """A record that cannot be attributed to one user and one text item."""


def canonical_user_id(user_id: Any, record: str = "(user_id, item) record"):
    """The user id as a plain str, bytes, int or tuple of these; raises naming its type.

    One user must be one key wherever the runner groups: ``numpy.int64(7)``
    and ``7``, or ``1`` and ``True``, would otherwise be one user in one
    bundle and two in another, and types Beam cannot encode deterministically
    (floats, dates, Decimals) fail later with the value in the error.
    """
    if isinstance(user_id, (bool, np.bool_)):
        raise InvalidRecordError(f"user id (field 0) of a {record} must be a str, bytes, int "
                                 "or tuple of these, got a bool")
    if isinstance(user_id, str):
        return str(user_id)
    if isinstance(user_id, bytes):
        return bytes(user_id)
    if isinstance(user_id, (int, np.integer)):
        return int(user_id)
    if isinstance(user_id, tuple) and user_id:
        return tuple(canonical_user_id(part, record) for part in user_id)
    raise InvalidRecordError(f"user id (field 0) of a {record} must be a str, bytes, int or "
                             f"tuple of these, got a {type(user_id).__name__}")


def check_pair(record: Any) -> tuple:
    """Returns ``record`` as a plain (user_id, item) pair; raises naming what is wrong.

    The user id must be present (not None, not an empty string) and a str,
    bytes, int or tuple of these (see ``canonical_user_id``); the item must be
    a non-empty str or bytes (subclasses such as ``numpy.str_`` become plain
    str). The error names the field and the type found, never the record's
    values: runner logs keep error text, and a user id or item there would
    leave the pipeline unprotected.
    """
    if not isinstance(record, tuple) or len(record) != 2:
        shape = (f"a tuple of {len(record)} fields" if isinstance(record, tuple)
                 else f"a {type(record).__name__}")
        raise InvalidRecordError(f"expected a (user_id, item) pair, got {shape}")
    user_id, item = record
    if user_id is None or (isinstance(user_id, (str, bytes)) and not user_id):
        raise InvalidRecordError("a (user_id, item) record has a missing user id "
                                 "(None or empty) in field 0")
    user_id = canonical_user_id(user_id)
    if isinstance(item, str):
        item = str(item)
    elif isinstance(item, bytes):
        item = bytes(item)
    else:
        raise InvalidRecordError(
            f"item (field 1) must be str or bytes, got a {type(item).__name__}")
    if not item:
        raise InvalidRecordError("a (user_id, item) record has an empty item in field 1")
    return user_id, item


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


class _DistinctItemsFn(beam.CombineFn):
    """Merges one user's records into the distinct items they hold."""

    def create_accumulator(self):
        return {}

    def add_input(self, distinct, items):
        distinct.update(dict.fromkeys(items))
        return distinct

    def merge_accumulators(self, accumulators):
        accumulators = iter(accumulators)
        merged = next(accumulators)
        for acc in accumulators:
            merged.update(acc)
        return merged

    def extract_output(self, distinct):
        return tuple(distinct)


class SampleItemsPerUser(beam.PTransform):
    """(user_id, items) → (user_id, tuple of ≤ Δ0 distinct items sampled uniformly).

    A user may arrive in several records (rows, or windows re-merged into the
    global one): they are first merged per user, so each user is sampled, and
    bounded, once. ``one_record_per_user=True`` skips that shuffle; it is for
    inputs that are already one record per user by construction (the output
    of ``ItemCountsPerUser`` or a ``GroupByKey``), as inside the mechanisms.
    ``salt`` makes seeded samples of several rounds independent of each other.
    """

    def __init__(self, max_items_per_user: int, seed: int | None = None, salt: str = "",
                 one_record_per_user: bool = False):
        super().__init__()
        if max_items_per_user < 1:
            raise ValueError(f"max_items_per_user must be >= 1, got {max_items_per_user!r}")
        self._max_items = max_items_per_user
        self._seed = noise.check_seed(seed)
        self._salt = salt
        self._one_record_per_user = bool(one_record_per_user)

    def expand(self, user_records):
        require_global_window(user_records, "SampleItemsPerUser")
        if not self._one_record_per_user:
            user_records = user_records | "MergeRecordsPerUser" >> beam.CombinePerKey(
                _DistinctItemsFn())
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
                | "SampleItemsPerUser" >> SampleItemsPerUser(self._max_items, self._seed,
                                                             one_record_per_user=True))
