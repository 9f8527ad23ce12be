"""DP-SIPS rounds as Beam PTransforms (dp-sips §4, Algorithm 3), unrolled when the
pipeline is built; ``removal="side_input"`` broadcasts each round's release,
``removal="join"`` co-groups it with the (user, item) pairs (no memory bound).

Design: docs/explanation/proofs.md#sips-in-beam, docs/explanation/transforms.md#sips-rounds.
"""

from __future__ import annotations

from collections import Counter

import apache_beam as beam

from beam_dpsu.core import checks, policies
from beam_dpsu.core.user_blocks import record_blocks
from beam_dpsu.beam.bounding import ItemCountsPerUser, distinct_element_id
from beam_dpsu.beam.max_items_choice.chosen import Chosen
from beam_dpsu.beam.user_blocks import PackRecordsFn, UserItems
from beam_dpsu.core.calibration import RoundsCalibration
from beam_dpsu.beam.histograms import SampledWeightedHistogram
from beam_dpsu.beam.release_guard import ReleaseTransform, seed_announced, warn_if_seeded
from beam_dpsu.beam.noisy_threshold import NoisyThreshold
from beam_dpsu.beam.ngram_levels import released_as_keys
from beam_dpsu.beam.windowing import require_global_window

__all__ = ["REMOVALS", "RemoveReleasedBySideInput", "RemoveReleasedByJoin", "SIPSRounds"]

REMOVALS = ("side_input", "join")


class _RemoveReleased(beam.PTransform):

    def __init__(self, released):
        super().__init__()
        self._released = released


class RemoveReleasedBySideInput(_RemoveReleased):
    """Blocks of users' distinct items minus the ``released`` items, broadcast as a side input."""

    def expand(self, blocks):
        return blocks | "DropReleased" >> beam.FlatMap(
            _drop_released, done=released_as_keys(self._released, "AsKeys")
        ).with_output_types(bytes)


def _drop_released(block: bytes, done):
    """A block minus the items in ``done``; a user (or block) left with nothing is dropped."""
    remaining = record_blocks.without_items(block, done)
    if remaining is not None:
        yield remaining


def _keyed_by_element_ids(block: bytes, seed: int) -> bytes:
    """A block of ``privacy_unit="element"`` users, each keyed by its seeded element id."""
    return record_blocks.with_keys(block, [distinct_element_id(items, seed)
                                           for _, items in record_blocks.block_users(block)])


def _unpack_once_chosen(block: bytes, chosen=0):
    """A block's users, one record each, once the choice of Δ0 (``chosen``) is known."""
    return record_blocks.unpack_block(block)


class RemoveReleasedByJoin(_RemoveReleased):
    """(user, items) minus the ``released`` items, by a join on item (no memory bound)."""

    def expand(self, user_items):
        require_global_window(user_items, "RemoveReleasedByJoin")
        # Keyed by the user id alone (a deterministic shuffle key); equal seeded
        # elements share an id and are split apart after the regroup (``_records_of``).
        by_item = user_items | "ByItem" >> beam.FlatMap(_pairs_by_item)
        released = self._released | "ReleasedKeys" >> beam.Map(lambda item: (item, True))

        def kept_pairs(joined):
            item, groups = joined
            if not groups["released"]:
                for user in groups["users"]:
                    yield user, item

        return ({"users": by_item, "released": released}
                | "JoinOnItem" >> beam.CoGroupByKey()
                | "KeepUnreleased" >> beam.FlatMap(kept_pairs)
                | "RegroupByUser" >> beam.GroupByKey()
                | "AsRecords" >> beam.FlatMapTuple(_records_of).with_output_types(UserItems))


def _pairs_by_item(record):
    user_id, items = record
    return ((item, user_id) for item in items)


def _records_of(user_id, items):
    """A regrouped user's records, one per person (k equal seeded elements share an id:
    the j-th record holds the items seen > j times)."""
    counts = Counter(items)
    for j in range(max(counts.values(), default=0)):
        yield UserItems(user_id, tuple(item for item, c in counts.items() if c > j))


class SIPSRounds(ReleaseTransform):
    """(user_id, item) pairs and/or (user_id, items) records → every round's released items.

    Args:
      calibration: a ``RoundsCalibration`` (``SIPS.calibrate``), or a ``Chosen`` of them.
      max_items_per_user: Δ0, re-sampled in every round (or a ``Chosen``).
      seed: test-only; round 0 draws exactly what Weighted Gaussian would.
      removal: "side_input" or "join" (see the module docstring).
      hot_key_fanout: passed to each round's ``SampledWeightedHistogram``.
      privacy_unit: "user_id" (default) or "element" (``beam_dpsu.beam.bounding``).
      packed: the input is ``AutoSelection(packed=True)``'s blocks, not elements.

    One object is one release. After expansion ``released_per_round`` holds each round's
    PCollection (NOT private: ``SelectItems`` shows it only with ``non_private_stats``).
    """

    def __init__(self, calibration: RoundsCalibration | Chosen,
                 max_items_per_user: int | Chosen, seed: int | None = None,
                 removal: str = "side_input", hot_key_fanout: int | None = None,
                 privacy_unit: str = "user_id", packed: bool = False):
        super().__init__()
        removal = checks.one_name_of("removal", removal, REMOVALS)
        self._calibration = Chosen.of(calibration)
        if len({len(c.rounds) for c in self._calibration.values}) != 1:
            raise ValueError("every candidate calibration must have the same rounds")
        if packed and privacy_unit != "element":
            raise ValueError("packed records are privacy_unit='element' records")
        self._max_items, self._seed = max_items_per_user, seed
        self._removal, self._fanout = removal, hot_key_fanout
        warn_if_seeded(seed, "SIPSRounds")
        with seed_announced():
            self._counts = ItemCountsPerUser(occurrences=False, privacy_unit=privacy_unit,
                                             seed=seed)
        self._privacy_unit, self._packed = privacy_unit, packed
        self.released_per_round: list[beam.PCollection] = []

    def expand(self, elements):
        require_global_window(elements, "SIPSRounds")
        # The records are read by every round, so they must carry no random draw
        # (invariant 11): unseeded elements get an id only when the join regroups by it.
        packed = self._removal == "side_input"
        remove = RemoveReleasedBySideInput if packed else RemoveReleasedByJoin
        self.released_per_round = []
        # Each round removes the previous round's release from what is left.
        remaining = self._blocks(elements) if packed else self._join_records(elements)
        for i in range(len(self._calibration.first.rounds)):
            calibration = self._calibration.map(lambda c, i=i: c.rounds[i])
            salt = "" if i == 0 else f"round{i}"
            if self.released_per_round:
                remaining = remaining | f"Round{i}/RemoveReleased" >> remove(
                    self.released_per_round[-1])
            released = (remaining
                        | f"Round{i}/SampledWeightedHistogram" >> SampledWeightedHistogram(
                            policies.weighted_gaussian_weight, self._max_items, self._seed,
                            salt, self._fanout, pre_threshold=calibration.first.pre_threshold,
                            packed=packed)
                        | f"Round{i}/NoisyThreshold" >> NoisyThreshold.per_shard(
                            calibration, self._seed, salt))
            self.released_per_round.append(released)
        # The rounds' releases are disjoint by construction.
        return self.released_per_round | "UnionOfRounds" >> beam.Flatten()

    def _blocks(self, elements):
        """The users' records packed in blocks, a user keyed by its id in a seeded run."""
        if self._packed:
            if self._seed is None:
                return elements
            return elements | "KeyByElementIds" >> beam.Map(
                _keyed_by_element_ids, self._seed).with_output_types(bytes)
        by_element = self._privacy_unit == "element"
        records = elements if by_element else elements | "ItemCountsPerUser" >> self._counts
        return records | "PackUserRecords" >> beam.ParDo(
            PackRecordsFn(by_element, key_seed=self._seed)).with_output_types(bytes)

    def _join_records(self, elements):
        if self._packed:
            # the blocks wait for the choice of Δ0 packed (AutoSelection(packed=True))
            elements = elements | "UnpackUserRecords" >> beam.FlatMap(
                _unpack_once_chosen, **Chosen.of(self._max_items).side_inputs())
        user_items = (elements
                      | "ItemCountsPerUser" >> self._counts
                      | "DistinctItems" >> beam.MapTuple(
                          lambda user, counts: UserItems(user, tuple(counts))
                      ).with_output_types(UserItems))
        if self._privacy_unit == "element" and self._seed is None:
            # The random ids are drawn once; this moves every record once more
            # (the join itself moves every pair twice per round).
            user_items = user_items | "CheckpointElementIds" >> beam.Reshuffle()
        return user_items
