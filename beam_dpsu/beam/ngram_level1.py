"""DPNE's level 1 in Beam: the users' tokens → the released unigrams, at a fixed Δ_1 or
one chosen privately as SelectItems chooses Δ0; σ_1 and ρ_1 are dpne Theorem 2.1's.

How: docs/explanation/transforms.md#the-n-gram-levels.
"""

from __future__ import annotations

import functools
import pickle
import typing

import apache_beam as beam
import numpy as np

from beam_dpsu.core.user_blocks import document_blocks
from beam_dpsu.core import max_items_choice, policies
from beam_dpsu.core.ngram_calibration import DPNECalibration
from beam_dpsu.beam.bounding import SampleEachUser
from beam_dpsu.beam.max_items_choice.chosen import Chosen
from beam_dpsu.beam.user_blocks import BlockHistogramFn, distinct_tokens, element_as_user
from beam_dpsu.beam.histograms import HISTOGRAM_SHARDS
from beam_dpsu.beam.max_items_choice.selection import ChooseFromSizeCounts, _sum_bin_counts
from beam_dpsu.beam.noisy_threshold import NoisyThreshold
from beam_dpsu.beam.sequential import SequentialPolicyHistogram, run_order_key

__all__ = ["Level1", "ChooseLevel1MaxItems", "Level1AtChosenMaxItems", "block_size_counts"]


class Level1(beam.PTransform):
    """Users → the unigrams (token,) level 1 releases at Δ_1 = ``calibration.max_items_1``.

    Its input is blocks of users or, with ``policy``, user records; with ``check_elements``
    unseeded elements, given their random ids here, on the one branch that reads them.
    """

    def __init__(self, calibration: DPNECalibration | Chosen, policy: bool, seed: int | None,
                 check_elements: bool = False):
        super().__init__()
        self._calibration, self._policy, self._seed = Chosen.of(calibration), policy, seed
        self._check_elements = check_elements

    def expand(self, users):
        max_items = self._calibration.map(lambda c: c.max_items_1)
        level1, seed = self._calibration.map(lambda c: c.level1), self._seed
        if self._check_elements:
            users = users | "CheckElements" >> beam.Map(element_as_user, seed)
        if self._policy:
            # A sequential policy visits users one by one, in keyed-hash order.
            key = run_order_key(seed)
            assert all(c.cutoff is not None for c in level1.values)  # (calibrate sets it)
            released = (users
                        | "DistinctTokens" >> beam.MapTuple(
                            lambda user, docs: (user, tuple(distinct_tokens(docs))))
                        | "SampleItemsPerUser" >> SampleEachUser(max_items, seed, "level1")
                        | "PolicyHistogram" >> SequentialPolicyHistogram(
                            policies.l2_descent, level1.map(lambda c: c.cutoff), key,
                            item_shards=HISTOGRAM_SHARDS,
                            pre_threshold=level1.first.pre_threshold)
                        | "NoisyThreshold" >> NoisyThreshold.per_shard(level1, seed, "level1"))
        else:
            k = level1.first.pre_threshold
            sums_of_block = functools.partial(
                _level1_sums_at_chosen, max_items=max_items.values,
                item_weight=policies.weighted_gaussian_weight, seed=seed, salt="level1",
                count_holders=k > 1)
            sums = users | "SumUsersPerBundle" >> beam.ParDo(
                BlockHistogramFn(sums_of_block, count_holders=k > 1),
                *max_items.side_input_args())
            if k == 1:
                histogram = sums | "SumPerItem" >> beam.CombinePerKey(sum)  # (token, Σ weights)
            else:
                # A pre-threshold: only tokens held by ≥ k sampled users are noised.
                histogram = (sums
                             | "SumPerItem" >> beam.CombinePerKey(_sum_weights_and_holders)
                             | "PreThreshold" >> beam.FlatMap(_held_by_at_least, k)
                             )  # (token, Σ weights) of tokens with ≥ k holders
            released = histogram | "NoisyThreshold" >> NoisyThreshold(level1, seed=seed,
                                                                      salt="level1")
        return released | "AsUnigrams" >> beam.Map(lambda t: (t,)).with_output_types(typing.Any)


def _level1_sums_at_chosen(block, chosen: int = 0, *, max_items: tuple, **level1_sums):
    return document_blocks.level1_sums(block, max_items=max_items[chosen], **level1_sums)


def _sum_weights_and_holders(parts) -> tuple:
    """(weight, holders) pairs → their sums (a combiner: its output is one of its inputs)."""
    weight, holders = 0.0, 0
    for part_weight, part_holders in parts:
        weight += part_weight
        holders += part_holders
    return weight, holders


def _held_by_at_least(token_sums, pre_threshold: int):
    token, (weight, holders) = token_sums
    if holders >= pre_threshold:
        yield token, weight


def block_size_counts(block: bytes, edges: tuple) -> np.ndarray:
    """A pickled block → its users per size bin by number of distinct tokens (raw)."""
    sizes = document_blocks.distinct_items_per_user(pickle.loads(block))
    return max_items_choice.size_counts(sizes[sizes > 0], np.asarray(edges, dtype=np.int64))


class ChooseLevel1MaxItems(beam.PTransform):
    """Blocks of users → the index, in ``plan.candidates``, of Δ_1 chosen privately from
    the noisy users per size bin (sensitivity 1); a checkpointed singleton."""

    def __init__(self, plan: max_items_choice.AutoPlan, seed: int | None):
        super().__init__()
        self._plan, self._seed = plan, seed

    def expand(self, user_blocks):
        edges = self._plan.edges
        return (user_blocks
                | "UsersPerSizeBin" >> beam.Map(block_size_counts, edges)
                | "SumSizeBins" >> beam.CombineGlobally(
                    functools.partial(_sum_bin_counts, len(edges)))
                | "Choose" >> ChooseFromSizeCounts(self._plan, self._seed))


class Level1AtChosenMaxItems(beam.PTransform):
    """(users, blocks of the same users) → the unigrams level 1 releases at the Δ_1
    chosen privately; after expansion ``chosen`` and ``chosen_max_items_per_user`` hold
    the chosen index and Δ_1 (singletons; DP outputs)."""

    def __init__(self, plan: max_items_choice.AutoPlan, calibrations: list, policy: bool,
                 seed: int | None, check_elements: bool = False):
        super().__init__()
        self._plan, self._calibrations = plan, calibrations
        self._policy, self._seed, self._check_elements = policy, seed, check_elements
        self.chosen = self.chosen_max_items_per_user = None

    def expand(self, users_and_blocks):
        users, user_blocks = users_and_blocks
        candidates = self._plan.candidates
        self.chosen = user_blocks | "ChooseLevel1MaxItems" >> ChooseLevel1MaxItems(
            self._plan, self._seed)  # index in candidates
        self.chosen_max_items_per_user = self.chosen | "ChosenMaxItemsPerUser" >> beam.Map(
            lambda index: candidates[index])
        return (users
                | "Level1AtChosen" >> Level1(Chosen(self._calibrations, self.chosen),
                                             self._policy, self._seed,
                                             self._check_elements))  # (token,)
