"""Weighted histograms as Beam PTransforms.

Each bundle's users are summed into a bounded partial histogram, flushed per item
(``WeightedHistogram``) or as one dict per item shard (``shard_of_item``), summed per
shard and noised whole; with a pre-threshold k, ``HeldByAtLeast`` keeps the items of
≥ k holders.

Details: docs/explanation/beam-pipeline.md#weighted-histograms.
"""

from __future__ import annotations

import zlib
from typing import Callable

import apache_beam as beam

from beam_dpsu.core import checks, policies
from beam_dpsu.core.user_blocks import record_blocks
from beam_dpsu.beam.release_guard import warn_if_seeded
from beam_dpsu.beam.bounding import (_MergeItemCountsFn, distinct_element_id,
                                     element_distinct_items)
from beam_dpsu.beam.max_items_choice.chosen import Chosen
from beam_dpsu.core.sampling import CandidateSamplers
from beam_dpsu.beam.input_types import KEYED, ReadsContainers
from beam_dpsu.beam.randomness import draws_randomness
from beam_dpsu.beam.windowing import in_global_window, require_global_window
from beam_dpsu.beam.output_types import opaque_output

# SampledWeightedHistogram is internal (it trusts its input's items to be
# distinct), so it is not exported.
__all__ = ["PARTIAL_HISTOGRAM_KEYS", "HISTOGRAM_SHARDS", "PartialHistogramFn", "WeightedHistogram",
           "shard_of_item", "split_by_shard", "merge_histograms", "split_with_holders",
           "merge_histograms_with_holders", "summed_per_shard", "HeldByAtLeast"]

# The most entries (~100 bytes each) a bundle's partial histogram holds before a flush.
PARTIAL_HISTOGRAM_KEYS = 1 << 18

# Partial histograms move as this many dicts per flush, not one element per item:
# the runner's per-element work was most of the cost after the sums.
HISTOGRAM_SHARDS = 64


def shard_of_item(item, shards: int) -> int:
    """The shard of a str or bytes item: CRC-32 of its (UTF-8) bytes modulo ``shards``."""
    data = item.encode("utf-8", "surrogatepass") if isinstance(item, str) else item
    return zlib.crc32(data) % shards


def split_by_shard(histogram: dict, shards: int) -> dict:
    """{item: weight} → {shard: {item: weight}}, only the shards that hold items."""
    by_shard: dict = {}
    for item, weight in histogram.items():
        by_shard.setdefault(shard_of_item(item, shards), {})[item] = weight
    return by_shard


def merge_histograms(shard_histograms) -> tuple:
    """(shard, {item: weight} dicts) → (shard, their sum per item); no input is changed."""
    shard, histograms = shard_histograms
    return shard, _MergeItemCountsFn().merge_accumulators(histograms)


def split_with_holders(histogram: dict, holders: dict, shards: int) -> dict:
    """{item: weight} and {item: holders} → {shard: ({item: weight}, {item: holders})}."""
    return {shard: (part, {item: holders[item] for item in part})
            for shard, part in split_by_shard(histogram, shards).items()}


def merge_histograms_with_holders(shard_parts) -> tuple:
    """(shard, (weights, holders) pairs) → (shard, (Σ weights, Σ holders) per item)."""
    shard, parts = shard_parts
    merge = _MergeItemCountsFn().add_input
    weights: dict = {}
    holders: dict = {}
    for part_weights, part_holders in parts:
        weights, holders = merge(weights, part_weights), merge(holders, part_holders)
    return shard, (weights, holders)


def _held_by_at_least(shard_parts, pre_threshold: int) -> tuple:
    shard, (weights, holders) = shard_parts
    return shard, {item: weight for item, weight in weights.items()
                   if holders[item] >= pre_threshold}


def summed_per_shard(shard_groups, label: str, pre_threshold: int):
    """(shard, parts) groups → (shard, Σ per item), then (k > 1) ``HeldByAtLeast(k)``."""
    if pre_threshold == 1:
        return shard_groups | label >> beam.Map(merge_histograms)
    return (shard_groups
            | label >> beam.Map(merge_histograms_with_holders)
            | "PreThreshold" >> HeldByAtLeast(pre_threshold))


class HeldByAtLeast(beam.PTransform):
    """(shard, ({item: weight}, {item: holders})) → (shard, {item: weight}) of the items
    held by at least k users, weights untouched."""

    def __init__(self, pre_threshold: int):
        super().__init__()
        self._pre_threshold = checks.integer("pre_threshold", pre_threshold, 2)

    def expand(self, shard_parts):
        return shard_parts | "KeepHeldByAtLeastK" >> beam.Map(_held_by_at_least,
                                                               self._pre_threshold)


@opaque_output
class PartialHistogramFn(beam.DoFn):
    """Sums a bundle's users into a partial histogram, emitted per item (or per shard)."""

    def __init__(self, item_weight: Callable[[int], float], max_keys: int,
                 shards: int | None = None, count_holders: bool = False):
        self._item_weight, self._max_keys = item_weight, max_keys
        self._shards, self._count_holders = shards, count_holders
        self._partial = None

    def start_bundle(self):
        self._partial = policies.WeightedHistogramBuilder(self._item_weight)

    def process(self, user_record):
        self._partial.add(user_record[1])
        yield from self._flush_if_full()

    def finish_bundle(self):
        yield from self._flush()

    def _flush_if_full(self):
        return self._flush() if self._partial.entries >= self._max_keys else ()

    def _flush(self):
        # Bounding is global (the transform refuses other windows), so every
        # partial sum belongs to the global window; all get one timestamp.
        partial = self._partial
        self.start_bundle()
        if self._shards is None:
            parts = partial.histogram()
        elif self._count_holders:
            parts = split_with_holders(partial.histogram(), partial.holders(), self._shards)
        else:
            parts = split_by_shard(partial.histogram(), self._shards)
        return map(in_global_window, parts.items())


@beam.typehints.with_input_types(KEYED)
class WeightedHistogram(ReadsContainers, beam.PTransform):
    """(user_id, distinct items) → (item, Σ_users item_weight(|W_user|)).

    Its input must be one bounded record per user (e.g. ``BoundContributions``'s): a
    user given in two records would count twice.

    Args:
      item_weight: the per-item weight of a user holding n items.
      hot_key_fanout: if set, spreads each item's partial sums over this many keys.
      max_partial_keys: the most entries a bundle's partial histogram holds before a flush.
    """

    def __init__(self, item_weight: Callable[[int], float], *,
                 hot_key_fanout: int | None = None,
                 max_partial_keys: int = PARTIAL_HISTOGRAM_KEYS):
        super().__init__()
        checks.optional_integer("hot_key_fanout", hot_key_fanout)
        checks.integer("max_partial_keys", max_partial_keys, types=(int,))
        self._item_weight, self._fanout, self._max_keys = (item_weight, hot_key_fanout,
                                                           max_partial_keys)

    def sum_per_item(self):
        """The per-item sum of partial histograms (with the hot-key fan-out, if any)."""
        sum_per_item = beam.CombinePerKey(sum)
        return sum_per_item.with_hot_key_fanout(self._fanout) if self._fanout else sum_per_item

    def expand(self, user_items):
        require_global_window(user_items, "WeightedHistogram")
        return (user_items
                | "SumUsersPerBundle" >> beam.ParDo(
                    PartialHistogramFn(self._item_weight, self._max_keys))
                | "SumPerItem" >> self.sum_per_item())


@draws_randomness
class _SampleAndSumFn(PartialHistogramFn):
    """``SampleEachUser`` then ``PartialHistogramFn`` in one step, the same draws."""

    def __init__(self, item_weight, max_keys: int, max_items: tuple, seed, salt: str,
                 shards: int, elements: bool = False, count_holders: bool = False,
                 packed: bool = False):
        super().__init__(item_weight, max_keys, shards, count_holders)
        self._samples = CandidateSamplers(max_items, seed, salt)
        self._elements, self._packed = elements, packed

    def process(self, record, chosen=0):
        sample = self._samples[chosen]
        if self._packed and sample.seed is None:  # sampled and summed in numpy
            self._add_runs(*record_blocks.block_runs(record), sample)
        elif self._packed:  # seeded: user by user, each keyed by its id
            for user_id, items in record_blocks.block_users(record):
                self._add(user_id, items, sample)
                yield from self._flush_if_full()
            return
        elif self._elements:
            self._add_element(record, sample)
        else:
            self._add(*record, sample)
        yield from self._flush_if_full()

    def _add_element(self, element, sample):
        # privacy_unit="element": the element is the user's record. Its id
        # only seeds a seeded sample, so an unseeded run draws none.
        items = element_distinct_items(element)
        self._add(None if sample.seed is None else distinct_element_id(items, sample.seed),
                  items, sample)

    def _add_runs(self, items, runs, sample):
        for run_ids, run_sizes in runs:
            self._partial.add_block(items, *sample.sample_block(run_ids, run_sizes))

    def _add(self, user_id, items, sample):
        if not items:  # a user holding nothing contributes nothing
            return
        # A user within Δ0 keeps every item: no sample (nor copy) to draw.
        self._partial.add_distinct(items if len(items) <= sample.max_items
                                   else sample(user_id, items))


@draws_randomness
class _BlockSampleAndSumFn(_SampleAndSumFn):
    """``_SampleAndSumFn`` on ``AutoSelection(as_blocks=True)``'s record blocks."""

    def process(self, bins_block, chosen=0):
        sample = self._samples[chosen]
        if sample.seed is None:
            self._add_runs(*record_blocks.block_runs(bins_block[1]), sample)
        else:
            for element in record_blocks.unpack_block(bins_block[1]):
                self._add_element(element, sample)
        yield from self._flush_if_full()


class SampledWeightedHistogram(beam.PTransform):
    """(user_id, distinct items) → (shard, {item: Σ_users item_weight(|sample|)}), each
    user's items sampled uniformly to ≤ Δ0: ``SampleEachUser`` then ``WeightedHistogram``,
    fused; internal (docs/explanation/beam-pipeline.md#weighted-histograms)."""

    def __init__(self, item_weight: Callable[[int], float],
                 max_items_per_user: int | Chosen, seed: int | None = None, salt: str = "",
                 hot_key_fanout: int | None = None, elements: bool = False,
                 pre_threshold: int = 1, blocks: bool = False, packed: bool = False):
        super().__init__()
        self._max_items = Chosen.of(max_items_per_user).map(
            lambda m: checks.at_least("max_items_per_user", m, 1))
        checks.optional_integer("hot_key_fanout", hot_key_fanout)
        self._pre_threshold = checks.integer("pre_threshold", pre_threshold, 1)
        seed = checks.seed(seed)
        warn_if_seeded(seed, "SampledWeightedHistogram")
        # The fan-out spreads the sum over more shards (fewer items each).
        self._fn = (_BlockSampleAndSumFn if blocks else _SampleAndSumFn)(
            item_weight, PARTIAL_HISTOGRAM_KEYS, self._max_items.values, seed, salt,
            HISTOGRAM_SHARDS * (hot_key_fanout or 1), elements,
            count_holders=self._pre_threshold > 1, packed=packed)

    def expand(self, user_items):
        require_global_window(user_items, "SampledWeightedHistogram")
        # A GroupByKey, not a CombinePerKey, whose pre-combine would hold every distinct
        # item of a bundle (docs/explanation/beam-pipeline.md#weighted-histograms).
        partial_sums = (user_items
                        | "SampleAndSumPerBundle" >> beam.ParDo(
                            self._fn, **self._max_items.side_inputs())
                        | "GroupShards" >> beam.GroupByKey())
        return summed_per_shard(partial_sums, "SumPerShard", self._pre_threshold)
