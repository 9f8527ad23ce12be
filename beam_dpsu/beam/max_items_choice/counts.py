"""``CountReleased``'s ``max_items_per_user="auto"`` in Beam, on each user's number of
distinct *released* items (``beam_dpsu.core.max_items_choice.counts``).

Design and memory: docs/explanation/proofs.md#auto-in-beam.
"""

from __future__ import annotations

import apache_beam as beam

from beam_dpsu.core.max_items_choice import counts as counts_choice
from beam_dpsu.beam.bounding import SampleEachUser, element_distinct_items
from beam_dpsu.beam.max_items_choice.chosen import Chosen
from beam_dpsu.beam.max_items_choice.selection import SizeHistogram, _noisy_choice

__all__ = ["SampleAtChosenMaxItems"]


def _released_size(element, released) -> int:
    return sum(1 for item in element_distinct_items(element) if item in released)


class _ChooseCountsMaxItems(beam.PTransform):
    """Users' numbers of released items (≥ 1 each) → the chosen Δ0's index, checkpointed."""

    def __init__(self, plan: counts_choice.CountsAutoPlan, released, seed: int | None):
        super().__init__()
        self._plan, self._released, self._seed = plan, released, seed

    def expand(self, sizes):
        released_items = (self._released
                          | "DistinctReleased" >> beam.Distinct()
                          | "NumberReleased" >> beam.combiners.Count.Globally())
        return (sizes
                | "SizeHistogram" >> SizeHistogram(self._plan.edges)
                | "AddNoiseAndChoose" >> beam.Map(
                    _noisy_choice, self._plan, self._seed,
                    beam.pvalue.AsSingleton(released_items), label="count-sizes")
                | "Checkpoint" >> beam.Reshuffle())


class SampleAtChosenMaxItems(beam.PTransform):
    """(user, released items held) → (user, ≤ Δ0 of them), Δ0 chosen privately.

    After expansion ``chosen`` is the chosen index (a singleton) and
    ``chosen_max_items_per_user`` its Δ0.

    Args:
      plan: the split and the candidates (``max_items_choice.counts.plan_counts_auto``).
      released: the released items (canonical), a PCollection.
      released_set: the released items as a side input (``AsDict``).
      elements: with privacy_unit="element", the input elements (sizes read there); else None.
      seed: test-only.
    """

    def __init__(self, plan: counts_choice.CountsAutoPlan, released, released_set,
                 elements=None, seed: int | None = None):
        super().__init__()
        self._plan, self._released, self._released_set = plan, released, released_set
        self._elements, self._seed = elements, seed
        self.chosen = self.chosen_max_items_per_user = None

    def expand(self, user_released):
        if self._elements is not None:
            sizes = self._elements | "ReleasedPerUser" >> beam.Map(
                _released_size, self._released_set)
        else:
            sizes = user_released | "ReleasedPerUser" >> beam.Map(lambda r: len(r[1]))
        sizes = sizes | "HoldersOfReleased" >> beam.Filter(lambda n: n > 0)
        self.chosen = sizes | "ChooseMaxItemsPerUser" >> _ChooseCountsMaxItems(
            self._plan, self._released, self._seed)
        candidates = self._plan.candidates
        self.chosen_max_items_per_user = self.chosen | "ChosenMaxItemsPerUser" >> beam.Map(
            lambda index: candidates[index])
        return user_released | "SampleItemsPerUser" >> SampleEachUser(
            Chosen(candidates, self.chosen), self._seed, "counts")
