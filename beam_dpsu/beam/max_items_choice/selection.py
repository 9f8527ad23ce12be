"""A selection's ``max_items_per_user="auto"`` in Beam: the size histogram, the choice, the records.

Design and memory: docs/explanation/proofs.md#auto-in-beam and
docs/explanation/transforms.md#candidate-parameters-in-beam.
"""

from __future__ import annotations

import functools
import random

import apache_beam as beam
import numpy as np

from beam_dpsu.core import hashing, max_items_choice
from beam_dpsu.core.user_blocks import record_blocks
from beam_dpsu.beam.bounding import ItemCountsPerUser
from beam_dpsu.beam.user_blocks import PackRecordsFn
from beam_dpsu.beam.randomness import draws_randomness

__all__ = ["SizeHistogram", "ChooseFromSizeCounts", "AutoSelection"]


class _SizeBinCountsFn(beam.CombineFn):
    """Users' distinct-item counts → users per size bin (a numpy vector)."""

    def __init__(self, edges: tuple):
        self._edges = np.asarray(edges, dtype=np.int64)

    def create_accumulator(self):
        return np.zeros(len(self._edges), dtype=np.int64)

    def add_input(self, counts, size):
        if size > 0:  # a user holding nothing is in no bin (max_items_choice.size_counts)
            counts[int(np.searchsorted(self._edges, size, side="right")) - 1] += 1
        return counts

    def merge_accumulators(self, accumulators):
        return functools.reduce(np.add, accumulators, self.create_accumulator())

    def extract_output(self, counts):
        return counts


class SizeHistogram(beam.PTransform):
    """Users' distinct-item counts → the users per size bin (raw: not private)."""

    def __init__(self, edges: tuple):
        super().__init__()
        self._edges = tuple(edges)

    def expand(self, sizes):
        return sizes | "UsersPerSizeBin" >> beam.CombineGlobally(_SizeBinCountsFn(self._edges))


@draws_randomness
def _noisy_choice(counts, plan, seed: int | None, *choose_args, label: str = "sizes") -> int:
    """The index in plan.candidates of ``plan.choose(noisy counts, *choose_args)``."""
    rng = None if seed is None else random.Random(hashing.stable_hash64((label, seed)))
    noisy = max_items_choice.noisy_size_histogram(counts, plan.size_budget, rng)
    return plan.candidates.index(plan.choose(noisy, *choose_args))


class ChooseFromSizeCounts(beam.PTransform):
    """The raw users per size bin → the chosen Δ0's index, noised and chosen in one step;
    a checkpointed singleton."""

    def __init__(self, plan: max_items_choice.AutoPlan, seed: int | None = None):
        super().__init__()
        self._plan, self._seed = plan, seed

    def expand(self, size_counts):
        return (size_counts
                | "AddNoiseAndChoose" >> beam.Map(_noisy_choice, self._plan, self._seed)
                | "Checkpoint" >> beam.Reshuffle())


def _sum_bin_counts(n_bins: int, counts) -> np.ndarray:
    return functools.reduce(np.add, counts, np.zeros(n_bins, dtype=np.int64))


class AutoSelection(beam.PTransform):
    """Input elements → one record per user, once Δ0 is chosen privately.

    After expansion ``chosen`` is the chosen index in ``plan.candidates`` (a singleton,
    drawn once) and ``chosen_max_items_per_user`` its Δ0.

    Args:
      plan: the budget split and the candidates (``max_items_choice.plan_auto``).
      occurrences: whether the mechanism uses item frequencies (GW).
      privacy_unit: the caller's privacy unit.
      seed: test-only.
      packed: the output is the blocks alone, for steps that each read the choice first.
      as_blocks: the output is (users per size bin, block) pairs, for a step reading the choice.
    """

    def __init__(self, plan: max_items_choice.AutoPlan, occurrences: bool,
                 privacy_unit: str, seed: int | None, packed: bool = False,
                 as_blocks: bool = False):
        super().__init__()
        if packed and as_blocks:
            raise ValueError("AutoSelection gives blocks either packed or as_blocks, not both")
        self._plan, self._occurrences, self._seed = plan, occurrences, seed
        self._privacy_unit, self._packed, self._as_blocks = privacy_unit, packed, as_blocks
        self.chosen = self.chosen_max_items_per_user = None

    def expand(self, elements):
        # One record per user, packed in blocks that count the users' sizes as they go.
        by_element = self._privacy_unit == "element"
        records = elements if by_element else (
            elements | "ItemCountsPerUser" >> ItemCountsPerUser(
                occurrences=self._occurrences, privacy_unit=self._privacy_unit))
        n_bins = len(self._plan.edges)
        blocks = records | "PackUserRecords" >> beam.ParDo(
            PackRecordsFn(by_element, self._occurrences, edges=self._plan.edges))
        self.chosen = chosen = (blocks
            | "UsersPerSizeBin" >> beam.Map(lambda bins_block: bins_block[0])
            | "SumSizeBins" >> beam.CombineGlobally(functools.partial(_sum_bin_counts, n_bins))
            | "ChooseMaxItemsPerUser" >> ChooseFromSizeCounts(self._plan, self._seed))
        candidates = self._plan.candidates
        self.chosen_max_items_per_user = chosen | "ChosenMaxItemsPerUser" >> beam.Map(
            lambda index: candidates[index])
        if self._as_blocks:  # the next step reads the choice: the blocks wait there
            return blocks
        if self._packed:
            # Each reader (SIPS's rounds) reads the choice first, so the blocks wait
            # there, in one buffer its readers share, not in a copy of their own.
            return blocks | "Blocks" >> beam.Map(lambda bins_block: bins_block[1]
                                                 ).with_output_types(bytes)
        # Every block waits for the choice packed, then goes out as its users' records.
        return (blocks
                | "WaitForTheChoice" >> beam.Map(lambda bins_block, chosen: bins_block,
                                                 chosen=beam.pvalue.AsSingleton(chosen))
                | "UnpackUserRecords" >> beam.FlatMap(
                    lambda bins_block: record_blocks.unpack_block(bins_block[1])))
