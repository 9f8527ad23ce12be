"""Noisy user counts of the released items: ``CountReleased``.

Integers plus exact discrete noise, never floating point (Mironov 2012; Canonne,
Kamath & Steinke 2020). Details: docs/explanation/transforms.md#countreleased.
Proof: docs/explanation/proofs.md#counts-of-released-items.
"""

from __future__ import annotations

import random

import apache_beam as beam

from beam_dpsu.core import checks, hashing, max_items_choice
from beam_dpsu.core.max_items_choice import counts as counts_choice
from beam_dpsu.core.budgets import Budget, ZCDPBudget
from beam_dpsu.core.checks import ParameterError, a_type
from beam_dpsu.core.counts_budget import count_calibration
from beam_dpsu.core.discrete_noise import os_random
from beam_dpsu.core.report import counts_report
from beam_dpsu.core.user_records import plain_str_or_bytes
from beam_dpsu.beam.bounding import (InvalidRecordError, ItemCountsPerUser, SampleEachUser,
                                     WholeItemCountsPerUser, check_shape, check_pair)
from beam_dpsu.beam.fields import input_fields, read_fields
from beam_dpsu.beam.input_types import RECORDS, ReadsContainers
from beam_dpsu.beam.max_items_choice.counts import SampleAtChosenMaxItems
from beam_dpsu.beam.randomness import draws_randomness
from beam_dpsu.beam.release_guard import ReleaseTransform
from beam_dpsu.beam.windowing import require_global_window

__all__ = ["CountReleased", "check_ngram_pair"]


def _is_ngram(value) -> bool:
    """A non-empty tuple of non-empty str."""
    return (isinstance(value, tuple) and bool(value)
            and all(isinstance(token, str) and token for token in value))


def check_ngram_pair(record):
    """A (user_id, n-gram) pair, the n-gram a non-empty tuple of non-empty str; raises otherwise.

    User ids as in ``bounding.check_pair``. Errors name the field, never the values.
    """
    check_shape(record, "(user_id, n-gram) pair")
    gram = record[1]
    if not _is_ngram(gram):
        raise InvalidRecordError("an n-gram item (field 1) must be a non-empty tuple of "
                                 f"non-empty str, got {a_type(gram)}")
    user_id, _ = check_pair((record[0], "n-gram"))  # the user id, canonical
    return user_id, tuple(plain_str_or_bytes(token) for token in gram)


def _released_item(item, ngrams: bool):
    """A released item as a plain str/bytes (or n-gram: tuple of str); raises on the wrong kind."""
    if isinstance(item, tuple):
        if not ngrams:
            raise InvalidRecordError("a released item is an n-gram (a tuple): count n-grams "
                                     "with CountReleased(..., ngrams=True)")
        if not _is_ngram(item):
            raise InvalidRecordError("a released n-gram must be a non-empty tuple of non-empty str")
        return tuple(plain_str_or_bytes(token) for token in item)
    if isinstance(item, (str, bytes)):
        if ngrams:
            raise InvalidRecordError("a released item is a str or bytes, not an n-gram: count "
                                     "text items with CountReleased(..., ngrams=False)")
        return plain_str_or_bytes(item)  # keyed as bounding keys the users' items
    raise InvalidRecordError(f"released items must be str, bytes or n-grams (tuples of str), "
                             f"got {a_type(item)}")


def _released_held(user_counts, released):
    """(user, {item: occurrences}) → (user, [released items it holds]); drops users with none."""
    user_id, counts = user_counts
    kept = [item for item in counts if item in released]
    if kept:
        yield user_id, kept


@draws_randomness
class _AddDiscreteNoiseFn(beam.DoFn):
    """(item, count) → (item, count + ``noises[chosen]``), ``chosen`` a side input under "auto"."""

    def __init__(self, noises: tuple, seed: int | None):
        self._noises, self._seed, self._rng = tuple(noises), seed, None

    def setup(self):
        self._rng = os_random()

    def process(self, item_count, chosen: int = 0):
        item, count = item_count
        rng = self._rng if self._seed is None else random.Random(
            hashing.stable_hash64(("count-noise", self._seed, item)))
        yield item, int(count) + self._noises[chosen].sample(rng)


@beam.typehints.with_input_types(RECORDS)
class CountReleased(ReadsContainers, ReleaseTransform):
    """Users' items → (item, noisy user count) for exactly the released items.

    Bounds each user to ≤ Δ0 released items, sampled uniformly, counts 1 per (user,
    item) plus 0 for every released item, and adds exact discrete noise: every
    released item gets one count, no other item any. The input is what
    ``SelectItems`` takes (``ngrams=True``: ``(user_id, n-gram)`` pairs); the
    released set is a side input (it must fit in a worker's memory). One object
    is one release of counts. Guide: docs/how-to/count-released.md.

    Args:
      released: ``PCollection`` of released items (e.g. ``SelectItems``' output).
      budget: ``Budget(ε, δ)`` (discrete Laplace, scale Δ0/ε) or ``ZCDPBudget(ρ, δ)``
        (discrete Gaussian, σ² = Δ0/(2ρ)); δ may be 0 and is not spent.
      accountant: optional ``BudgetAccountant`` that ``budget`` is spent from (not
        for ``split_selection_and_counts``' parts: it spent them).
      max_items_per_user: Δ0, the most released items each user is counted for, or
        ``"auto"`` / ``AutoMaxItems(...)`` (``chosen_max_items_per_user`` once run).
      seed: test-only fixed seed (logs a WARNING); None (default) uses OS entropy.
      ngrams: the items are n-grams (tuples of str, as ``ExtractNgrams`` releases).
      privacy_unit: ``"user_id"`` (default) or ``"element"``, as in ``SelectItems``.
      user_field: read ``beam.Row``s, NamedTuples or dicts: the user id's field.
      item_field: the field holding one item (with ``ngrams``: one n-gram).
      item_list_field: the field holding a collection of items (or n-grams).

    Raises:
      ValueError, TypeError, InvalidRecordError: as ``SelectItems`` raises them;
        ValueError for ``"auto"`` with a tight split's part.
      AppliedTwiceError: applied a second time, when the pipeline is built.
    """

    def __init__(self, released, budget: Budget | ZCDPBudget, *,
                 max_items_per_user: int | str | max_items_choice.AutoMaxItems = 100,
                 seed: int | None = None, ngrams: bool = False, label=None,
                 privacy_unit: str = "user_id", accountant=None, user_field: str | None = None,
                 item_field: str | None = None, item_list_field: str | None = None):
        super().__init__(label)
        checks.instance("released", released, beam.pvalue.PCollection,
                        "the PCollection of released items")
        self.released, self.budget = released, budget
        self.seed = checks.seed(seed)
        self.ngrams = bool(ngrams)
        self.privacy_unit = checks.privacy_unit(privacy_unit)
        if self.ngrams and self.privacy_unit != "user_id":
            raise ParameterError.worded(
                "privacy_unit", "CountReleased counts n-grams from (user_id, n-gram) pairs: "
                                "privacy_unit='element' is for items, not n-grams")
        self.fields = input_fields(self.privacy_unit, user_field, self.ngrams,
                                   item_field=item_field, item_list_field=item_list_field)
        # "auto": a share of the budget picks Δ0 when run; every candidate calibrated now.
        self.auto_plan = self.calibration = self.chosen_max_items_per_user = None
        self.calibrations_by_candidate: dict = {}
        bound = max_items_choice.check_max_items_or_auto(max_items_per_user)
        if max_items_choice.is_auto(bound):
            # split_budget refuses a tight split's part: it is bound to one Δ0.
            self.auto_plan, self.calibrations_by_candidate = counts_choice.plan_counts_auto(
                bound, budget, count_calibration)
        else:
            # A tight split's selection part is made for one SelectItems, never for counts.
            if getattr(budget, "for_mechanism", None) is not None:
                checks.no_tight_part(budget, "CountReleased")
            checks.tight_part("max_items_per_user", bound,
                              getattr(budget, "for_max_items_per_user", None))
            self.calibration = count_calibration(budget, bound)
        # Spent once calibration succeeded: a refused construction spends nothing.
        self._spend(accountant, budget, "CountReleased")

    @property
    def report(self) -> dict:
        """The privacy parameters of the counts (no data needed)."""
        return counts_report(self.calibration, self.auto_plan, self.budget,
                             self.calibrations_by_candidate, self.seed, self.privacy_unit)

    def expand(self, elements):
        # Bounding is global (docs/privacy.md, invariant 7): both inputs in the global window.
        require_global_window(elements, "CountReleased (its users' items)")
        require_global_window(self.released, "CountReleased (its released items)")
        if self.released.pipeline is not elements.pipeline:
            raise ParameterError("released", "must come from the same pipeline as the users' items "
                                 "(e.g. SelectItems applied to them there), got a PCollection "
                                 "of another pipeline")
        elements = read_fields(elements, self.fields, "CountReleased")
        # Plain str/bytes/tuples: numpy.str_ and the like cannot be encoded deterministically.
        released = self.released | "CanonicalReleased" >> beam.Map(_released_item, self.ngrams)
        released_set = beam.pvalue.AsDict(
            released | "ReleasedAsKeys" >> beam.Map(lambda item: (item, None)))
        if self.ngrams:
            user_counts = (elements
                           | "ValidatePairs" >> beam.Map(check_ngram_pair)
                           | "DedupePerUser" >> WholeItemCountsPerUser())
        else:
            user_counts = elements | "DedupePerUser" >> ItemCountsPerUser(
                occurrences=False, privacy_unit=self.privacy_unit, seed=self.seed)
        user_released = user_counts | "KeepReleased" >> beam.FlatMap(_released_held, released_set)
        if self.auto_plan is None:
            user_items = user_released | "SampleItemsPerUser" >> SampleEachUser(
                self.calibration.max_items_per_user, self.seed, salt="counts")
            noises, chosen = (self.calibration.noise,), ()
        else:
            # The elements, not user_released, give privacy_unit="element" sizes.
            at_chosen = SampleAtChosenMaxItems(
                self.auto_plan, released, released_set,
                elements if self.privacy_unit == "element" else None, self.seed)
            user_items = user_released | "SampleAtChosenMaxItems" >> at_chosen
            self.chosen_max_items_per_user = at_chosen.chosen_max_items_per_user
            noises = tuple(k.noise for k in self.calibrations_by_candidate.values())
            chosen = (beam.pvalue.AsSingleton(at_chosen.chosen),)
        ones = user_items | "OnePerUserItem" >> beam.FlatMap(
            lambda record: ((item, 1) for item in record[1]))
        zeros = released | "ZeroPerReleased" >> beam.Map(lambda item: (item, 0))
        return ((ones, zeros)
                | "FlattenCounts" >> beam.Flatten()
                | "CountPerItem" >> beam.CombinePerKey(sum)
                | "AddDiscreteNoise" >> beam.ParDo(_AddDiscreteNoiseFn(noises, self.seed), *chosen)
                # The noisy counts are drawn once, whoever reads them (invariant 11).
                | "Checkpoint" >> beam.Reshuffle())
