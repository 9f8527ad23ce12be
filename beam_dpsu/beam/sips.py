"""DP-SIPS rounds as Beam PTransforms (dp-sips §4, Algorithm 3).

The rounds are unrolled when the pipeline is built. Each user's records become
one record of distinct items; then, for each round, the items released by all
earlier rounds are removed from every user's set, the rest is re-sampled to
Δ0, weighted 1/√|W|, summed, noised and thresholded with that round's
calibration; finally the rounds' releases are flattened. With a pre-threshold
k a round releases only items that at least k of that round's users hold.

``removal="side_input"`` (default) broadcasts a round's release to every
worker as a dict side input (no extra shuffle; every worker holds the released
set), the records travelling between rounds packed
(``beam_dpsu.core.user_blocks.record_blocks``). ``removal="join"`` co-groups the
(user, item) pairs with the release instead: two extra shuffles per round, no
per-worker memory bound; use it when a round may release more than a few
million items. A round's release is checkpointed (``NoisyThreshold.per_shard``
ends in a ``Reshuffle``), so the output and the next round's removal read one
draw (docs/privacy.md, invariant 11).

Design and memory: docs/explanation/proofs.md#sips-in-beam.
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
from beam_dpsu.beam.windowing import require_global_window

__all__ = ["REMOVALS", "RemoveReleasedBySideInput", "RemoveReleasedByJoin", "SIPSRounds"]

REMOVALS = ("side_input", "join")


class RemoveReleasedBySideInput(beam.PTransform):
    """Blocks of users' distinct items (``beam_dpsu.core.user_blocks.record_blocks``) minus the
    ``released`` items, broadcast as a side input."""

    def __init__(self, released):
        super().__init__()
        self._released = released

    def expand(self, blocks):
        released = (self._released
                    | "AsKeys" >> beam.Map(lambda item: (item, None)))
        return blocks | "DropReleased" >> beam.FlatMap(
            _drop_released, done=beam.pvalue.AsDict(released)).with_output_types(bytes)


def _distinct_items(user_id, counts) -> UserItems:
    """A user's {item: count} as its record of distinct items (``UserItemsCoder``
    writes these compactly between the join's stages)."""
    return UserItems(user_id, tuple(counts))


def _drop_released(block: bytes, done):
    """A block minus the items in ``done``, the users' items in their order; a user
    left with nothing is dropped (it adds nothing to later rounds), and so is a block."""
    remaining = record_blocks.without_items(block, done)
    if remaining is not None:
        yield remaining


def _keyed_by_element_ids(block: bytes, seed: int) -> bytes:
    """A block of ``privacy_unit="element"`` users, each keyed by its seeded element id
    (``distinct_element_id``, as ``ItemCountsPerUser`` gives it)."""
    return record_blocks.with_keys(block, [distinct_element_id(items, seed)
                                           for _, items in record_blocks.block_users(block)])


def _unpack_once_chosen(block: bytes, chosen=0):
    """A block's users, one record each, read once the choice of Δ0 (``chosen``, a
    side input read only to wait for it) is known."""
    return record_blocks.unpack_block(block)


class RemoveReleasedByJoin(beam.PTransform):
    """(user, items) minus the ``released`` items, by a join on item (no memory bound)."""

    def __init__(self, released):
        super().__init__()
        self._released = released

    def expand(self, user_items):
        require_global_window(user_items, "RemoveReleasedByJoin")
        # Keyed by the user id alone (a deterministic shuffle key); equal
        # seeded elements share an id and are split apart again after the
        # regroup (``_records_of``).
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
    """(user, distinct items) → (item, user) per item."""
    user_id = record[0]
    return ((item, user_id) for item in record[1])


def _records_of(user_id, items):
    """A regrouped user's records: one per person behind the id.

    Records are one per user id, except seeded ``privacy_unit="element"``
    runs, where k equal elements share an id (a hash of their items): each
    remaining item then arrives k times, and k records are rebuilt, the
    j-th holding the items seen more than j times.
    """
    counts = Counter(items)
    for j in range(max(counts.values(), default=0)):
        yield UserItems(user_id, tuple(item for item, c in counts.items() if c > j))


class SIPSRounds(ReleaseTransform):
    """(user_id, item) pairs and/or (user_id, items) records → released items of every
    round, flattened.

    Args:
      calibration: a ``RoundsCalibration`` (from ``SIPS.calibrate``), or a ``Chosen``
        of them (one per candidate Δ0, with the same number of rounds).
      max_items_per_user: Δ0, re-sampled in every round (or a ``Chosen``, as
        ``calibration``; ``beam_dpsu.beam.max_items_choice.chosen``).
      seed: test-only; round 0 draws exactly what Weighted Gaussian would, so
        one round at ratio 1 reproduces it.
      removal: "side_input" or "join" (see the module docstring).
      privacy_unit: "user_id" (default) or "element" (``beam_dpsu.beam.bounding``).
      packed: the input is blocks of ``privacy_unit="element"`` users' checked
        distinct items, unkeyed (``record_blocks``; ``AutoSelection(packed=True)``),
        not elements.

    After expansion, ``released_per_round`` holds each round's PCollection:
    which round released an item is NOT a function of the released set
    (``SelectItems`` exposes it only with ``non_private_stats=True``). Like
    ``SelectItems``, one object is one release: a second application is
    refused when the pipeline is built.
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
        self._max_items = max_items_per_user
        self._seed = seed
        self._removal = removal
        self._fanout = hot_key_fanout
        warn_if_seeded(seed, "SIPSRounds")
        with seed_announced():
            self._counts = ItemCountsPerUser(occurrences=False, privacy_unit=privacy_unit,
                                             seed=seed)
        self._privacy_unit = privacy_unit
        self._packed = packed
        self.released_per_round: list[beam.PCollection] = []

    def expand(self, elements):
        require_global_window(elements, "SIPSRounds")
        # First the users' records of distinct items: packed in blocks for the
        # side-input removal, one record per user for the join. The records are
        # read by every round, so they must carry no random draw (invariant 11):
        # unseeded elements get an id only when the join regroups by it.
        packed = self._removal == "side_input"
        records = (self._blocks(elements) if packed else self._join_records(elements))
        remove = RemoveReleasedBySideInput if packed else RemoveReleasedByJoin
        self.released_per_round = []
        # Then one Weighted Gaussian selection per round on what is left: each
        # round's users less the previous round's release, so the users less
        # every earlier release. The most frequent items go first, so later
        # rounds read and move much smaller records than the first.
        remaining = records
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
        # Finally the union of all rounds (disjoint by construction).
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
        """One record of distinct items per user, for the join."""
        if self._packed:
            # the blocks wait for the choice of Δ0 packed (AutoSelection(packed=True))
            elements = elements | "UnpackUserRecords" >> beam.FlatMap(
                _unpack_once_chosen, **Chosen.of(self._max_items).side_inputs())
        user_items = (elements
                      | "ItemCountsPerUser" >> self._counts
                      | "DistinctItems" >> beam.MapTuple(_distinct_items).with_output_types(
                          UserItems))
        if self._privacy_unit == "element" and self._seed is None:
            # The random ids are drawn once; this moves every record once more
            # (the join itself moves every pair twice per round).
            user_items = user_items | "CheckpointElementIds" >> beam.Reshuffle()
        return user_items
