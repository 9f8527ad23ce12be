"""Contribution bounding as Beam PTransforms: one record per user, Δ0 items each.

``(user_id, item)`` pairs and/or ``(user_id, items)`` records are checked (errors name
the field, position and type, never a value), merged into one record per user
(docs/privacy.md, invariant 1) and sampled uniformly to Δ0 distinct items. With
``privacy_unit="element"`` each element is one person's items, nothing merged.

Details: docs/explanation/proofs.md#bounding-and-the-privacy-unit.
"""

from __future__ import annotations

import functools
from collections import Counter
from itertools import filterfalse, repeat
from collections.abc import Iterable, Mapping
from typing import Any

import apache_beam as beam
import numpy as np

from beam_dpsu.core import checks, hashing
from beam_dpsu.core.documents import encodes_as_utf8
# numpy.str_ and other subclasses become the plain str/bytes they hold (Beam encodes
# those deterministically as keys), as every transform keys items.
from beam_dpsu.core.user_records import (InvalidRecordError, canonical_user_id,
                                         plain_str_or_bytes as _plain)
from beam_dpsu.beam.max_items_choice.chosen import Chosen
from beam_dpsu.beam.input_types import RECORDS, ReadsContainers
from beam_dpsu.beam.randomness import draws_randomness
from beam_dpsu.beam.release_guard import seed_announced, warn_if_seeded
from beam_dpsu.core.sampling import CandidateSamplers, item_sort_key
from beam_dpsu.core.tokenizer import Tokens
from beam_dpsu.core.checks import a_type
from beam_dpsu.beam.windowing import require_global_window

__all__ = ["InvalidRecordError", "canonical_user_id", "check_shape", "check_pair", "item_counts",
           "element_item_counts", "element_distinct_items", "element_items", "plain_str_items",
           "distinct_element_id", "MergeItemCounts", "WholeItemCountsPerUser",
           "ItemCountsPerUser", "SampleItemsPerUser", "BoundContributions"]


def check_shape(element: Any, expected: str) -> None:
    """Raises ``InvalidRecordError`` unless ``element`` is a 2-tuple, naming its type.

    Args:
      element: the record.
      expected: what a record should be, for the message ("(user_id, item) pair").
    """
    if not isinstance(element, tuple) or len(element) != 2:
        shape = (f"a tuple of {len(element)} fields" if isinstance(element, tuple)
                 else a_type(element))
        raise InvalidRecordError(f"expected a {expected}, got {shape}")


def check_pair(record: Any) -> tuple:
    """Returns ``record`` as a plain (user_id, item) pair; raises naming what is wrong.

    The user id (a str, bytes, int or tuple of these) is keyed by its text; the item
    must be a non-empty str or bytes. Errors name the field and type, never a value.
    """
    check_shape(record, "(user_id, item) pair")
    return _checked_pair(*record)


def _checked_pair(user_id, item) -> tuple:
    user_id = _check_user_id(user_id, "(user_id, item) record")
    if not isinstance(item, (str, bytes)):
        raise InvalidRecordError(f"item (field 1) must be str or bytes, got {a_type(item)}")
    item = _plain(item)  # checked as what it holds, never by a subclass's own methods
    if not item:
        raise InvalidRecordError("a (user_id, item) record has an empty item in field 1")
    if _has_lone_surrogate(item):
        raise InvalidRecordError(f"item (field 1) of a (user_id, item) record {LONE_SURROGATE}")
    return user_id, item


def _check_user_id(user_id, what: str):
    if user_id is None or (isinstance(user_id, (str, bytes)) and not user_id):
        raise InvalidRecordError(f"a {what} has a missing user id (None or empty) in field 0")
    return canonical_user_id(user_id, what)


# Every writer encodes str items as UTF-8, which cannot hold a lone surrogate
# (what errors="surrogateescape" decoding makes of an invalid byte): refused where
# items are checked, before anything is noised, never after the release.
LONE_SURROGATE = ("holds a lone surrogate (not UTF-8; decode the input strictly, or give "
                  "the items as bytes)")


def _has_lone_surrogate(item) -> bool:
    """Whether a str ``item`` holds a surrogate code point (ASCII known in O(1))."""
    return not (isinstance(item, bytes) or item.isascii() or encodes_as_utf8(item))


def _bad_item(item) -> str | None:
    """Why ``item`` is not an item (a non-empty str or bytes UTF-8 holds), or None."""
    if not isinstance(item, (str, bytes)):
        return f"must be str or bytes, got {a_type(item)}"
    item = _plain(item)  # what it holds, never a subclass's own methods
    if not item:
        return "is empty"
    if _has_lone_surrogate(item):
        return LONE_SURROGATE
    return None


def _record_error(items, record: str = "a (user_id, items) record (field 1)") -> InvalidRecordError:
    """The error for a record with a bad item, naming its position if the record has order."""
    positions = (enumerate(items) if isinstance(items, (list, tuple))
                 else ((None, item) for item in items))
    for position, item in positions:
        try:
            hash(item)
            problem = _bad_item(item)
        except TypeError:
            problem = f"must be str or bytes, got {a_type(item)}"
        if problem:
            where = "an item" if position is None else f"item {position}"
            return InvalidRecordError(f"{where} of {record} {problem}")
    return InvalidRecordError(f"{record} cannot be read as items (non-empty str or bytes)")


def item_counts(element: Any, occurrences: bool = True) -> tuple:
    """One input element → (canonical user id, {item: occurrences}); raises naming the problem.

    ``element`` is a ``(user_id, item)`` pair or a ``(user_id, items)`` record (each
    occurrence once); with ``occurrences=False`` every item counts 1.
    """
    check_shape(element, "(user_id, item) pair or (user_id, items) record")
    user_id, value = element
    if isinstance(value, (str, bytes)):
        user_id, item = _checked_pair(user_id, value)
        return user_id, {item: 1}
    user_id = _check_user_id(user_id, "(user_id, items) record")
    if isinstance(value, Mapping) or not isinstance(value, (Iterable, np.ndarray)):
        raise InvalidRecordError(
            f"field 1 must be an item (str or bytes) or a list, tuple, set or array of "
            f"items, got {a_type(value)}"
            + ("; give the items as a list, an item repeated once per occurrence"
               if isinstance(value, Mapping) else ""))
    return user_id, _counts_of(value, occurrences, "a (user_id, items) record (field 1)", "field 1")


def _counts_of(value, occurrences: bool, record: str, field: str) -> dict:
    """{item: occurrences} of an iterable of items; raises naming ``record`` and a position."""
    if isinstance(value, np.ndarray):
        if value.ndim != 1:  # a 0-d array of a string would be split into characters
            raise InvalidRecordError(f"{field} must be a 1-D array of items, got a "
                                     f"{value.ndim}-D array")
        value = value.tolist()  # numpy.str_ → str in one C call
    elif not isinstance(value, (list, tuple, set, frozenset)):
        value = tuple(value)  # a one-shot iterable: kept, to name a bad item's position
    try:
        # C speed: the hot path of every job.
        counts = dict(Counter(value)) if occurrences else dict.fromkeys(value, 1)
    except TypeError:  # an unhashable item
        raise _record_error(value, record) from None
    # Plain non-empty str is the common case, checked in one C-level pass;
    # anything else takes the slow path that canonicalises or names the bad item.
    if not plain_str_items(counts):
        # Counted again as the plain text each item holds: a subclass's own __eq__ or
        # __hash__ must not merge (and so drop) distinct items.
        if any(map(_bad_item, value)):
            raise _record_error(value, record)
        held = [_plain(item) for item in value]
        counts = dict(Counter(held)) if occurrences else dict.fromkeys(held, 1)
    return counts


# What an element of privacy_unit="element" input may be: not other iterables such
# as beam.Row (a tuple), generators or dict views, which keyed data arrives as.
_ELEMENT_TYPES = (list, set, frozenset, np.ndarray)


@draws_randomness  # the element's id (unseeded)
def element_item_counts(element: Any, occurrences: bool = True, seed: int | None = None) -> tuple:
    """One element of ``privacy_unit="element"`` input → (element id, {item: occurrences}).

    ``element`` is a list, set, frozenset or 1-D array of one person's items; anything
    else is refused (keyed data read as items would release user ids). The id only
    orders and seeds it (docs/explanation/beam-pipeline.md#one-element-one-person).
    """
    counts = _element_counts(element, occurrences)
    return element_id(counts.items(), seed), counts


def plain_str_items(distinct) -> bool:
    """Whether checked distinct items are all non-empty plain str (one C-level pass)."""
    # UTF-8 checked on the non-ASCII items alone, joined: str.isascii is O(1).
    return not distinct or ("" not in distinct and set(map(type, distinct)) == {str}
                            and encodes_as_utf8("".join(filterfalse(str.isascii, distinct))))


def element_distinct_items(element: Any) -> set | dict:
    """One ``privacy_unit="element"`` element → its checked distinct items (set or dict keys)."""
    if type(element) is Tokens:
        distinct = set(element)
        if plain_str_items(distinct):  # a Tokens list can be changed after tokenising
            return distinct
    return _element_counts(element, False)


def element_items(element: Any, occurrences: bool) -> set | dict:
    """``element_item_counts``'s items without an id."""
    return _element_counts(element, True) if occurrences else element_distinct_items(element)


def element_id(item_counts: Iterable[tuple], seed: int | None = None) -> int:
    """An element's internal id: 128 random bits, or (seeded) a hash of its sorted items."""
    if seed is None:
        return hashing.random_id128()
    content = tuple(sorted(item_counts, key=lambda ic: item_sort_key(ic[0])))
    return hashing.stable_hash64(("element", content))


def distinct_element_id(distinct_items: Iterable, seed: int | None = None) -> int:
    """``element_id`` of an element known by its distinct items, each counted once."""
    return element_id(zip(distinct_items, repeat(1)), seed)


def _element_counts(element: Any, occurrences: bool) -> dict:
    """A checked element's {item: occurrences} (each item 1 without ``occurrences``)."""
    if not isinstance(element, _ELEMENT_TYPES) or (
            isinstance(element, np.ndarray) and element.dtype.kind not in "USO"):
        hint = ("; a tuple could be a (user_id, item) pair: give each person's items as "
                "a list or set, or use privacy_unit='user_id' for keyed records"
                if isinstance(element, tuple)
                else "; tokenise a document into a list of items first"
                if isinstance(element, (str, bytes))
                else f" of dtype kind {element.dtype.kind!r}, not of strings"
                if isinstance(element, np.ndarray) else "")
        raise InvalidRecordError(
            "with privacy_unit='element' each element must be a list, set, frozenset or 1-D "
            f"array of one person's items, got {a_type(element)}{hint}")
    return _counts_of(element, occurrences, "an element", "an element")


class _MergeItemCountsFn(beam.CombineFn):
    """Merges one user's {item: occurrences} records into one (sums dicts per key)."""

    def create_accumulator(self):
        return {}

    def add_input(self, merged, counts):
        if not merged:
            return dict(counts)
        for item, c in counts.items():
            merged[item] = merged.get(item, 0) + c
        return merged

    def merge_accumulators(self, accumulators):
        # One pass (the first copied by add_input): never all of them at once.
        return functools.reduce(self.add_input, accumulators, {})

    def extract_output(self, merged):
        return merged


class MergeItemCounts(beam.PTransform):
    """(user_id, {item: occurrences}) records → one merged record per user (a combiner).

    Global window only: per window it would bound users per window.
    """

    def expand(self, user_counts):
        require_global_window(user_counts, "MergeItemCounts")
        return user_counts | "MergePerUser" >> beam.CombinePerKey(_MergeItemCountsFn())


class WholeItemCountsPerUser(beam.PTransform):
    """Checked (user_id, item) pairs, each item taken whole → (user_id, {item: occurrences}).

    For tuple items (n-grams), which ``ItemCountsPerUser`` would read as records.
    The pairs must already be checked (user ids canonical).
    """

    def expand(self, pairs):
        require_global_window(pairs, "WholeItemCountsPerUser")
        return (pairs
                | "AsItemCounts" >> beam.MapTuple(lambda user, item: (user, {item: 1}))
                | "MergePerUser" >> MergeItemCounts())


class ItemCountsPerUser(beam.PTransform):
    """Pairs and/or per-user records → (user_id, {item: occurrences}), one record per user.

    Checks every element (``item_counts``), then merges each user's elements; with
    ``privacy_unit="element"`` each element is given an id (``seed``: tests only).
    """

    def __init__(self, occurrences: bool = True, privacy_unit: str = "user_id",
                 seed: int | None = None):
        super().__init__()
        self._occurrences = bool(occurrences)
        self._privacy_unit = checks.privacy_unit(privacy_unit)
        self._seed = checks.seed(seed)
        warn_if_seeded(self._seed, "ItemCountsPerUser")

    def expand(self, elements):
        require_global_window(elements, "ItemCountsPerUser")
        if self._privacy_unit == "element":
            return elements | "CheckElements" >> beam.Map(
                element_item_counts, self._occurrences, self._seed)
        return (elements
                | "CheckAndCount" >> beam.Map(item_counts, self._occurrences)
                | "MergePerUser" >> MergeItemCounts())


@draws_randomness
class _SampleItemsFn(beam.DoFn):
    """(user_id, distinct items) → (user_id, ≤ Δ0 of them), Δ0 the ``chosen`` candidate's."""

    def __init__(self, max_items: tuple, seed: int | None, salt: str):
        self._samples = CandidateSamplers(max_items, seed, salt)

    def process(self, user_record, chosen=0):
        user_id, items = user_record
        if not items:  # a user holding nothing contributes nothing
            return
        yield user_id, tuple(self._samples[chosen](user_id, items))


class SampleEachUser(beam.PTransform):
    """Samples ≤ Δ0 of each record's distinct items; internal, empty records left out.

    Its input must be one record per user (a user given twice would be bounded twice).
    """

    def __init__(self, max_items_per_user, seed: int | None = None, salt: str = ""):
        super().__init__()
        self._max_items = Chosen.of(max_items_per_user).map(
            lambda m: checks.at_least("max_items_per_user", m, 1))
        self._seed = checks.seed(seed)
        warn_if_seeded(self._seed, "SampleEachUser")
        self._salt = salt

    def expand(self, user_records):
        require_global_window(user_records, "SampleEachUser")
        return user_records | "SampleDistinctItems" >> beam.ParDo(
            _SampleItemsFn(self._max_items.values, self._seed, self._salt),
            **self._max_items.side_inputs())


class SampleItemsPerUser(beam.PTransform):
    """Pairs and/or per-user records → (user_id, ≤ Δ0 distinct items sampled uniformly).

    A user's elements are first merged, so each user is bounded once; ``salt``
    separates seeded samples of several rounds.
    """

    _NAME = "SampleItemsPerUser"  # in window errors

    def __init__(self, max_items_per_user: int, seed: int | None = None, salt: str = "",
                 privacy_unit: str = "user_id"):
        super().__init__()
        warn_if_seeded(checks.seed(seed), self._NAME)
        with seed_announced():
            self._sample = SampleEachUser(max_items_per_user, seed, salt)
            self._counts = ItemCountsPerUser(occurrences=False, privacy_unit=privacy_unit,
                                             seed=seed)

    def expand(self, elements):
        require_global_window(elements, self._NAME)
        return (elements
                | "ItemCountsPerUser" >> self._counts
                | "SampleEachUser" >> self._sample)


@beam.typehints.with_input_types(RECORDS)
class BoundContributions(ReadsContainers, SampleItemsPerUser):
    """Pairs and/or per-user records → (user_id, ≤ Δ0 distinct items): check, merge, sample.

    The parallel mechanisms' bounding step (``SampleItemsPerUser`` without a salt).

    Args:
      max_items_per_user: Δ0, the most distinct items kept per user.
      seed: test-only fixed seed; None (default) samples with OS entropy.
      privacy_unit: ``"user_id"`` (keyed pairs or records) or ``"element"`` (one person each).
    """

    _NAME = "BoundContributions"

    def __init__(self, max_items_per_user: int, *, seed: int | None = None,
                 privacy_unit: str = "user_id"):
        super().__init__(max_items_per_user, seed, privacy_unit=privacy_unit)
