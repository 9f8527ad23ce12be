"""The public set-union transform: ``SelectItems(mechanism, budget)``.

Details: docs/explanation/transforms.md#selectitems
"""

from __future__ import annotations

import apache_beam as beam

from beam_dpsu.core import checks, max_items_choice, policies
from beam_dpsu.core import pre_threshold as pre_threshold_rule
from beam_dpsu.core.pre_threshold import calibrations as pre_threshold_calibrations
from beam_dpsu.core.checks import ParameterError
from beam_dpsu.beam.max_items_choice.selection import AutoSelection
from beam_dpsu.core.budgets import Budget, ZCDPBudget
from beam_dpsu.beam.bounding import ItemCountsPerUser, SampleEachUser
from beam_dpsu.beam.max_items_choice.chosen import Chosen
from beam_dpsu.core.mechanisms import (SIPS, GreedyWithoutSampling, MechanismConfig,
                                       ParallelMechanism, PolicyLaplace, SequentialMechanism)
from beam_dpsu.beam.fields import input_fields, read_fields
from beam_dpsu.beam.input_types import RECORDS, ReadsContainers
from beam_dpsu.beam.histograms import HISTOGRAM_SHARDS, SampledWeightedHistogram
from beam_dpsu.beam.release_guard import LOG, ReleaseTransform
from beam_dpsu.core.report import selection_report
from beam_dpsu.core.calibration import KeepProbabilityCalibration
from beam_dpsu.beam.noisy_threshold import KeepWithProbability, NoisyThreshold
from beam_dpsu.beam.sequential import OrderItemsForGW, SequentialPolicyHistogram, run_order_key
from beam_dpsu.beam.sips import SIPSRounds
from beam_dpsu.beam.windowing import require_global_window

__all__ = ["SelectItems"]


@beam.typehints.with_input_types(RECORDS)
class SelectItems(ReadsContainers, ReleaseTransform):
    """Releases the items held by users under user-level DP.

    Bounds each user to ≤ Δ0 distinct items, sums the mechanism's weights into a
    histogram, adds noise and keeps the items above the threshold; ``.report`` is
    ready when constructed. The input (pairs, per-user records or rows;
    docs/how-to/input.md) must be bounded and in the global window. The output
    is a *set*: write it with ``beam_dpsu.WriteReleased``. One object spends its
    budget once. More: docs/explanation/transforms.md#selectitems.

    Args:
      mechanism: a config, e.g. ``WeightedGaussian(100)``; Δ0 is its ``max_items_per_user``.
      budget: ``Budget(epsilon, delta)`` or ``ZCDPBudget(rho, delta)``, all spent.
      seed: test-only fixed seed (logs a WARNING); None (default) uses OS entropy.
      hot_key_fanout: sum the partial histograms in 64 × fan-out item shards.
      privacy_unit: ``"user_id"`` (default) or ``"element"`` (one element: a whole person).
      accountant: optional ``BudgetAccountant`` that ``budget`` is spent from.
      non_private_stats: keep each SIPS round's release in ``non_private_released_by_stage``.
      user_field: read ``beam.Row``s, NamedTuples or dicts: the user id's field.
      item_field: with ``user_field``, the field holding one str/bytes item.
      item_list_field: the field holding a collection of items (never with ``item_field``).
      public_counts: GW-KT's public (item, count) pairs as a ``PCollection``.
      pre_threshold: k ≥ 1 (default 1, none): release only items ≥ k users hold.

    Raises:
      ValueError: field arguments that do not fit together, when constructed.
      TypeError: a field name that is not a str, or named fields on tuple input.
      InvalidRecordError: a missing field or a bad element (named, never its value).
      AppliedTwiceError: applied a second time, when the pipeline is built.
      NonGlobalWindowError: a windowed input, when the pipeline is built.
    """

    def __init__(self, mechanism: MechanismConfig, budget: Budget | ZCDPBudget, *,
                 seed: int | None = None, hot_key_fanout: int | None = None, label=None,
                 privacy_unit: str = "user_id", accountant=None,
                 non_private_stats: bool = False, user_field: str | None = None,
                 item_field: str | None = None, item_list_field: str | None = None,
                 public_counts=None, pre_threshold: int = 1):
        super().__init__(label)
        checks.instance("mechanism", mechanism, MechanismConfig, "a beam_dpsu mechanism config")
        checks.instance("budget", budget, (Budget, ZCDPBudget), "a Budget or ZCDPBudget")
        self.mechanism, self.budget = mechanism, budget
        self.public_counts = _check_public_counts(public_counts, mechanism)
        self.seed = checks.seed(seed)
        self.hot_key_fanout = hot_key_fanout
        self.privacy_unit = checks.privacy_unit(privacy_unit)
        self.fields = input_fields(self.privacy_unit, user_field, item_field=item_field,
                                   item_list_field=item_list_field)
        checks.tight_part("mechanism", mechanism, getattr(budget, "for_mechanism", None))
        self.pre_threshold = pre_threshold_rule.check_pre_threshold(pre_threshold)
        self.auto_plan = self.calibration = self.chosen_max_items_per_user = None
        if max_items_choice.is_auto(getattr(mechanism, "max_items_per_user", None)):
            self.auto_plan = max_items_choice.plan_auto(mechanism, budget, self.pre_threshold)
        else:
            plain = mechanism.calibrate(budget)
            self.calibration = pre_threshold_calibrations.with_pre_threshold(
                plain, mechanism, self.pre_threshold)
            if self.calibration.pre_threshold != 1:  # log what the pre-threshold costs
                LOG.info("SelectItems (%s): %s; the weight an item needs to be released with "
                         "probability 1/2 rises from %.6g to %.6g", mechanism.name,
                         pre_threshold_rule.describe_pre_threshold(self.calibration.pre_threshold),
                         plain.weight_threshold(), self.calibration.weight_threshold())
        # Spent once calibration succeeded: a refused construction spends nothing.
        self._spend(accountant, budget, "SelectItems", mechanism.name)
        # The secret key of the sequential policies' user order: fresh per run.
        self._order_key = run_order_key(self.seed)
        # Which SIPS round released an item is more than the set: opt-in, non-private.
        self.non_private_stats = bool(non_private_stats)
        self.non_private_released_by_stage: dict = {}

    @property
    def report(self) -> dict:
        """The privacy parameters of this selection (no data needed)."""
        plan = self.auto_plan
        by_candidate = {} if plan is None else dict(zip(plan.candidates, plan.calibrations))
        report = selection_report(self.mechanism, self.budget, self.calibration, plan,
                                  by_candidate, self.seed, self.privacy_unit)
        report["pre_threshold"] = self.pre_threshold
        return report

    def expand(self, elements):
        require_global_window(elements, "SelectItems")
        elements = read_fields(elements, self.fields, "SelectItems")
        plan = self.auto_plan
        if plan is None:
            return self._select(elements, self.privacy_unit,
                                Chosen.of(self.mechanism.max_items_per_user),
                                Chosen.of(self.calibration))
        # "auto": Δ0 is chosen privately while the records wait packed.
        m = self.mechanism
        is_gw = isinstance(m, GreedyWithoutSampling)
        as_blocks = isinstance(m, ParallelMechanism) or (
            isinstance(m, SequentialMechanism) and not is_gw)
        auto = AutoSelection(plan, occurrences=is_gw, privacy_unit=self.privacy_unit,
                             seed=self.seed, packed=isinstance(m, SIPS), as_blocks=as_blocks)
        records = elements | "AutoMaxItemsPerUser" >> auto  # blocks, or one record per user
        self.chosen_max_items_per_user = auto.chosen_max_items_per_user
        return self._select(records, "blocks" if as_blocks else "element",
                            Chosen(plan.candidates, auto.chosen),
                            Chosen(plan.calibrations, auto.chosen), isinstance(m, SIPS))

    def _select(self, elements, privacy_unit: str, max_items: Chosen, calibration: Chosen,
                packed: bool = False):
        """The selection at ``max_items`` and ``calibration`` (one value, or one per candidate)."""
        mechanism = self.mechanism
        if isinstance(mechanism, SIPS):
            rounds = SIPSRounds(calibration, max_items, self.seed, mechanism.removal,
                                self.hot_key_fanout, privacy_unit, packed)
            released = elements | "SIPSRounds" >> rounds
            if self.non_private_stats:
                self.non_private_released_by_stage = {
                    f"round_{i}": pc for i, pc in enumerate(rounds.released_per_round)}
            return released
        if isinstance(mechanism, SequentialMechanism):
            return elements | "SequentialPolicy" >> _SequentialSelection(
                mechanism, max_items, calibration, self.seed, self._order_key, privacy_unit,
                self.public_counts)
        if isinstance(mechanism, ParallelMechanism):
            return _parallel_selection(elements, mechanism, privacy_unit, max_items, calibration,
                                       self.seed, self.hot_key_fanout, self.pre_threshold)
        raise NotImplementedError(f"no Beam expansion for {type(mechanism).__name__}")


def _parallel_selection(elements, mechanism, privacy_unit: str, max_items: Chosen,
                        calibration: Chosen, seed, hot_key_fanout, pre_threshold: int):
    """BoundContributions and WeightedHistogram in one step (sample and partial sum)."""
    by_element, blocks = privacy_unit == "element", privacy_unit == "blocks"
    user_records = elements if by_element or blocks else (
        elements | "ItemCountsPerUser" >> ItemCountsPerUser(
            occurrences=False, privacy_unit=privacy_unit, seed=seed))
    histogram = user_records | "SampledWeightedHistogram" >> SampledWeightedHistogram(
        mechanism.item_weight, max_items, seed, hot_key_fanout=hot_key_fanout,
        elements=by_element, pre_threshold=pre_threshold, blocks=blocks)
    # The histogram comes as one dict per shard: each is decided whole.
    if isinstance(calibration.first, KeepProbabilityCalibration):  # truncated geometric
        return histogram | "KeepWithProbability" >> KeepWithProbability.per_shard(calibration, seed)
    return histogram | "NoisyThreshold" >> NoisyThreshold.per_shard(calibration, seed)


def _check_public_counts(public_counts, mechanism):
    """None, or a PCollection for a GW-KT config holding no counts."""
    if public_counts is None:
        if getattr(mechanism, "public_order", False) and mechanism.public_counts is None:
            raise ParameterError.worded(
                "public_counts", "GreedyWithoutSampling(public_order=True) ranks items by public "
                "counts: give them as SelectItems(..., public_counts=pcoll), or as a mapping "
                "in GreedyWithoutSampling(public_counts=...)")
        return None
    checks.instance("public_counts", public_counts, beam.pvalue.PCollection,
                    "a PCollection of (item, count) pairs")
    if not getattr(mechanism, "public_order", False) or mechanism.public_counts is not None:
        raise ParameterError(
            "public_counts", "ranks GW-KT's items: give them with GreedyWithoutSampling("
            "public_order=True) holding no mapping of its own")
    return public_counts


class _SequentialSelection(beam.PTransform):
    """Policy Laplace / Policy Gaussian / GW: bound, policy histogram in keyed-hash user
    order, then noise and threshold every key (GW's zero weights too)."""

    def __init__(self, mechanism, max_items: Chosen, calibration: Chosen, seed, order_key,
                 privacy_unit, public_counts=None):
        super().__init__()
        self._mechanism, self._max_items, self._calibration = mechanism, max_items, calibration
        self._seed, self._key, self._privacy_unit = seed, order_key, privacy_unit
        self._public_counts = public_counts

    def expand(self, elements):
        m, unit, seed = self._mechanism, self._privacy_unit, self._seed
        sample_elements = None
        if isinstance(m, GreedyWithoutSampling):  # GW orders a user's items by occurrences
            public = m.public_counts if self._public_counts is None else self._public_counts
            user_items = (elements
                          | "ItemCountsPerUser" >> ItemCountsPerUser(
                              occurrences=True, privacy_unit=unit, seed=seed)
                          | "TopItemsPerUser" >> OrderItemsForGW(self._key, self._max_items,
                                                                 public))
            update = policies.greedy_update
        else:
            update = policies.l1_descent if isinstance(m, PolicyLaplace) else policies.l2_descent
            if unit in ("element", "blocks"):
                # One person's record (or a block of them): checked, sampled and packed at once.
                user_items, sample_elements = elements, self._max_items
            else:
                user_items = (elements
                              | "ItemCountsPerUser" >> ItemCountsPerUser(
                                  occurrences=False, privacy_unit=unit, seed=seed)
                              | "SampleItemsPerUser" >> SampleEachUser(self._max_items, seed))
        # The histogram comes as one dict per shard of the items: each is noised whole.
        return (user_items
                | "PolicyHistogram" >> SequentialPolicyHistogram(
                    update, self._calibration.map(lambda c: c.cutoff), self._key, m.shards,
                    item_shards=HISTOGRAM_SHARDS, sample_elements=sample_elements,
                    seed=None if sample_elements is None else seed,
                    pre_threshold=self._calibration.first.pre_threshold,
                    blocks=unit == "blocks")
                | "NoisyThreshold" >> NoisyThreshold.per_shard(self._calibration, seed))
