"""Weighted histograms as Beam PTransforms.

The parallel mechanisms' histogram is a sum of independent per-user
contributions (``policies.user_contribution``): first the users' bounded
records are summed into a partial histogram per bundle (a dict in the
worker, flushed at the end of the bundle or when it grows past
``PARTIAL_HISTOGRAM_KEYS`` entries, so memory stays bounded), then the
partial sums are summed per item with ``CombinePerKey``. This moves one
element per (bundle, item) instead of one per (user, item). Inside
``SelectItems`` (``SampledWeightedHistogram``) a flush is instead one dict per
shard of the items (``shard_of_item``, ``HISTOGRAM_SHARDS``), grouped and
summed per shard (``merge_histograms``) and noised whole: one element per
(bundle flush, shard). A worker then holds one flush, and one shard's sum:
1/64 of the distinct items.
Only items some user holds ever get a key.

With a pre-threshold k (``beam_dpsu.core.pre_threshold``) each shard's dict
travels with a second dict, the number of users holding each item
(``count_holders``): (shard, ({item: weight}, {item: holders})), merged per
shard by ``merge_histograms_with_holders``; ``HeldByAtLeast`` then keeps the
items with ≥ k holders, as (shard, {item: weight}) again, for the noise.
"""

from __future__ import annotations

import zlib
from typing import Callable

import apache_beam as beam

from beam_dpsu.core import checks

from beam_dpsu.core import policies
from beam_dpsu.core.user_blocks import record_blocks
from beam_dpsu.beam.release_guard import warn_if_seeded
from beam_dpsu.beam.bounding import _MergeItemCountsFn, distinct_element_id, \
    element_distinct_items
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
           "merge_histograms_with_holders", "HeldByAtLeast"]

# The most entries a bundle's partial histogram holds before it is flushed
# (``WeightedHistogramBuilder.entries``, about 100 bytes each: ~25 MB per
# worker thread).
PARTIAL_HISTOGRAM_KEYS = 1 << 18

# The parallel mechanisms move their partial histograms as this many dicts
# per flush, keyed by a stable hash shard of the item, instead of one element
# per item: the runner's per-element work (encoding, pre-combining,
# shuffling, one DoFn call per item) was most of the cost after the sums.
# Each shard is merged, noised and thresholded as a whole; 64 shards leave
# the runner that many keys to spread over workers.
HISTOGRAM_SHARDS = 64


def shard_of_item(item, shards: int) -> int:
    """The shard of a str or bytes item: CRC-32 of its bytes, the same in every
    process (str as UTF-8, lone surrogates passed through), modulo ``shards``."""
    data = item.encode("utf-8", "surrogatepass") if isinstance(item, str) else item
    return zlib.crc32(data) % shards


def split_by_shard(histogram: dict, shards: int) -> dict:
    """{item: weight} → {shard: {item: weight}}, only the shards that hold items."""
    by_shard: dict = {}
    for item, weight in histogram.items():
        shard = shard_of_item(item, shards)
        part = by_shard.get(shard)
        if part is None:
            part = by_shard[shard] = {}
        part[item] = weight
    return by_shard


def merge_histograms(shard_histograms) -> tuple:
    """(shard, {item: weight} dicts) → (shard, their sum per item), in one pass over
    the dicts (the first copied; no input is changed)."""
    shard, histograms = shard_histograms
    return shard, _MergeItemCountsFn().merge_accumulators(histograms)


def split_with_holders(histogram: dict, holders: dict, shards: int) -> dict:
    """{item: weight} and {item: holders} → {shard: ({item: weight}, {item: holders})}."""
    return {shard: (part, {item: holders[item] for item in part})
            for shard, part in split_by_shard(histogram, shards).items()}


def merge_histograms_with_holders(shard_parts) -> tuple:
    """(shard, (weights, holders) pairs) → (shard, (Σ weights, Σ holders) per item)."""
    shard, parts = shard_parts
    weights, holders = _MergeItemCountsFn(), _MergeItemCountsFn()
    merged_weights: dict = {}
    merged_holders: dict = {}
    for part_weights, part_holders in parts:
        merged_weights = weights.add_input(merged_weights, part_weights)
        merged_holders = holders.add_input(merged_holders, part_holders)
    return shard, (merged_weights, merged_holders)


def _held_by_at_least(shard_parts, pre_threshold: int) -> tuple:
    shard, (weights, holders) = shard_parts
    return shard, {item: weight for item, weight in weights.items()
                   if holders[item] >= pre_threshold}


class HeldByAtLeast(beam.PTransform):
    """(shard, ({item: weight}, {item: holders})) → (shard, {item: weight}) of the items
    held by at least k users: the eligibility of a pre-threshold k
    (``beam_dpsu.core.pre_threshold``). Their weights are untouched: the noise and
    the raised threshold ρ_k decide next."""

    def __init__(self, pre_threshold: int):
        super().__init__()
        self._pre_threshold = checks.integer("pre_threshold", pre_threshold, 2)

    def expand(self, shard_parts):
        return shard_parts | "KeepHeldByAtLeastK" >> beam.Map(_held_by_at_least,
                                                               self._pre_threshold)


@opaque_output
class PartialHistogramFn(beam.DoFn):
    """Sums the users of a bundle into one partial histogram, emitted per item
    (or, with ``shards``, as one dict per shard of the items).

    Internal: ``WeightedHistogram``'s step, and the base of DPNE's block sums.
    """

    def __init__(self, item_weight: Callable[[int], float], max_keys: int,
                 shards: int | None = None, count_holders: bool = False):
        self._item_weight = item_weight
        self._max_keys = max_keys
        self._shards = shards
        self._count_holders = count_holders
        self._partial = None

    def start_bundle(self):
        self._partial = policies.WeightedHistogramBuilder(self._item_weight)

    def process(self, user_record):
        self._partial.add(user_record[1])
        if self._partial.entries >= self._max_keys:
            yield from self._flush()

    def finish_bundle(self):
        yield from self._flush()

    def _flush(self):
        # Bounding is global (the transform refuses other windows), so every
        # partial sum belongs to the global window; all get one timestamp.
        partial = self._partial
        self._partial = policies.WeightedHistogramBuilder(self._item_weight)
        if self._shards is None:
            return map(in_global_window, partial.histogram().items())
        if self._count_holders:
            return map(in_global_window, split_with_holders(
                partial.histogram(), partial.holders(), self._shards).items())
        return map(in_global_window, split_by_shard(partial.histogram(), self._shards).items())


@beam.typehints.with_input_types(KEYED)
class WeightedHistogram(ReadsContainers, beam.PTransform):
    """(user_id, distinct items) → (item, Σ_users item_weight(|W_user|)).

    Its input must be one bounded record per user, e.g. the output of
    ``BoundContributions`` or ``SampleItemsPerUser``: it sums records as they
    come, so a user given in two records would count twice.

    Args:
      item_weight: the per-item weight of a user holding n items
        (e.g. ``policies.weighted_gaussian_weight``).
      hot_key_fanout: if set, spreads each item's partial sums over this many
        intermediate keys before the final sum, which balances the Zipf head
        (a few items held by most users) across workers on large runners.
      max_partial_keys: the most entries (``WeightedHistogramBuilder.entries``) a
        bundle's partial histogram holds before it is flushed downstream
        (bounds a worker's memory).
    """

    def __init__(self, item_weight: Callable[[int], float], *,
                 hot_key_fanout: int | None = None,
                 max_partial_keys: int = PARTIAL_HISTOGRAM_KEYS):
        super().__init__()
        checks.optional_integer("hot_key_fanout", hot_key_fanout)
        checks.integer("max_partial_keys", max_partial_keys, types=(int,))
        self._item_weight = item_weight
        self._fanout = hot_key_fanout
        self._max_keys = max_partial_keys

    def sum_per_item(self):
        """The per-item sum of partial histograms (with the hot-key fan-out, if any)."""
        sum_per_item = beam.CombinePerKey(sum)
        if self._fanout:
            sum_per_item = sum_per_item.with_hot_key_fanout(self._fanout)
        return sum_per_item

    def expand(self, user_items):
        require_global_window(user_items, "WeightedHistogram")
        return (user_items
                | "SumUsersPerBundle" >> beam.ParDo(
                    PartialHistogramFn(self._item_weight, self._max_keys))
                | "SumPerItem" >> self.sum_per_item())


@draws_randomness
class _SampleAndSumFn(PartialHistogramFn):
    """(user_id, distinct items) → partial sums of the users' weights, each user sampled to Δ0.

    ``SampleEachUser`` and ``PartialHistogramFn`` in one step: the same draws
    (``sample_user_items``), and the sample goes straight into the bundle's
    partial histogram, without a tuple per user, a step between, or a second
    deduplication (a sample of distinct items is distinct). Δ0 is one per
    candidate (``beam_dpsu.beam.max_items_choice.chosen``): ``chosen``, a side input, says which.
    """

    def __init__(self, item_weight, max_keys: int, max_items: tuple, seed, salt: str,
                 shards: int, elements: bool = False, count_holders: bool = False,
                 packed: bool = False):
        super().__init__(item_weight, max_keys, shards, count_holders)
        self._samples = CandidateSamplers(max_items, seed, salt)
        self._elements = elements
        self._packed = packed

    def setup(self):
        self._samples.setup()

    def process(self, record, chosen=0):
        sample = self._samples[chosen]
        if self._packed and sample.seed is None:
            # a block of users (record_blocks), sampled and summed in numpy, as
            # _BlockSampleAndSumFn does: no list of str per user
            self._add_runs(*record_blocks.block_runs(record), sample)
            if self._partial.entries >= self._max_keys:
                yield from self._flush()
            return
        if self._packed:
            # a seeded block, each user keyed by its id: user by user as records are,
            # the fold checked after each user
            for user_id, items in record_blocks.block_users(record):
                self._add(user_id, items, sample)
                if self._partial.entries >= self._max_keys:
                    yield from self._flush()
            return
        if self._elements:
            self._add_element(record, sample)
        else:
            self._add(*record, sample)
        if self._partial.entries >= self._max_keys:
            yield from self._flush()

    def _add_element(self, element, sample):
        # privacy_unit="element": the element is the user's record. Its id
        # only seeds a seeded sample, so an unseeded run draws none.
        items = element_distinct_items(element)
        self._add(None if sample.seed is None else distinct_element_id(items, sample.seed),
                  items, sample)

    def _add_runs(self, items, runs, sample):
        # Unseeded: every user of the block sampled (``sampling.sample_block``) and
        # counted by ids, a run of users at a time, each decoded as it comes
        # (``record_blocks.block_runs``: small temporary arrays only).
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
    """``_SampleAndSumFn`` on the packed blocks of ``max_items_per_user="auto"``
    (``AutoSelection(as_blocks=True)``): (users per size bin, packed block) → partial sums.

    A block's users are checked, distinct records of ``privacy_unit="element"``
    (``record_blocks``). Unseeded, the whole block is sampled and counted in
    numpy (``sampling.sample_block``, ``WeightedHistogramBuilder.add_block``):
    no list of str per user, one dict probe per distinct item of the block.
    Seeded (tests only), each user is unpacked and added as its element would
    be, the same id and sample.
    """

    def process(self, bins_block, chosen=0):
        sample = self._samples[chosen]
        if sample.seed is None:
            self._add_runs(*record_blocks.block_runs(bins_block[1]), sample)
        else:
            for element in record_blocks.unpack_block(bins_block[1]):
                self._add_element(element, sample)
        if self._partial.entries >= self._max_keys:
            yield from self._flush()


class SampledWeightedHistogram(beam.PTransform):
    """(user_id, distinct items) → (shard, {item: Σ_users item_weight(|sample|)}), each
    user's items first sampled uniformly to ≤ Δ0; one dict per shard that holds items.

    ``SampleEachUser`` followed by ``WeightedHistogram``, fused. Internal:
    its input must be one record per user whose items are distinct (a dict
    of item counts, or a tuple of its keys), as ``ItemCountsPerUser`` makes
    them: a user given twice would be bounded twice, a repeated item counted
    twice. With ``elements=True`` its input is instead the elements of
    ``privacy_unit="element"`` input, each checked and deduplicated here
    (``element_distinct_items``): the same histogram as after
    ``ItemCountsPerUser``, seeded samples included, one step and no id fewer.
    ``salt`` separates seeded samples of several rounds. Its output is
    a histogram split by ``shard_of_item`` into ``HISTOGRAM_SHARDS`` dicts
    (times ``hot_key_fanout``, if set; noise it with ``NoisyThreshold.per_shard``
    or ``KeepWithProbability.per_shard``). With ``pre_threshold`` k ≥ 2 only the
    items held by at least k sampled users are in it (``HeldByAtLeast``).
    ``max_items_per_user`` may be a ``Chosen`` (one Δ0 per candidate, picked
    when the pipeline runs; ``beam_dpsu.beam.max_items_choice.chosen``). With ``blocks=True``
    its input is instead the packed blocks of ``AutoSelection(as_blocks=True)``
    (``_BlockSampleAndSumFn``): the same histogram, seeded samples included.
    With ``packed=True`` its input is blocks of users' distinct items
    (``beam_dpsu.core.user_blocks.record_blocks``; SIPS's rounds), each user keyed by its id
    in a seeded run: the same users, read in the same order, as records.
    """

    def __init__(self, item_weight: Callable[[int], float],
                 max_items_per_user: int | Chosen, seed: int | None = None, salt: str = "",
                 hot_key_fanout: int | None = None, elements: bool = False,
                 pre_threshold: int = 1, blocks: bool = False, packed: bool = False):
        super().__init__()
        self._max_items = Chosen.of(max_items_per_user).map(
            lambda m: checks.at_least("max_items_per_user", m, 1))
        checks.optional_integer("hot_key_fanout", hot_key_fanout)
        self._pre_threshold = checks.integer("pre_threshold", pre_threshold, 1)
        warn_if_seeded(checks.seed(seed), "SampledWeightedHistogram")
        # The fan-out spreads the sum over more shards (fewer items each).
        fn = _BlockSampleAndSumFn if blocks else _SampleAndSumFn
        self._fn = fn(item_weight, PARTIAL_HISTOGRAM_KEYS, self._max_items.values,
                      checks.seed(seed), salt, HISTOGRAM_SHARDS * (hot_key_fanout or 1),
                      elements, count_holders=self._pre_threshold > 1, packed=packed)

    def expand(self, user_items):
        require_global_window(user_items, "SampledWeightedHistogram")
        # A GroupByKey, not a CombinePerKey: a combiner's pre-combine keeps
        # its 64 keys' sums until the bundle ends (it evicts by key count),
        # so a worker would hold every distinct item of its bundle; this way
        # each flush leaves the worker, and a shard's sum is built once.
        partial_sums = (user_items
                        | "SampleAndSumPerBundle" >> beam.ParDo(
                            self._fn, **self._max_items.side_inputs())
                        | "GroupShards" >> beam.GroupByKey())
        if self._pre_threshold == 1:
            return partial_sums | "SumPerShard" >> beam.Map(merge_histograms)
        return (partial_sums
                | "SumPerShard" >> beam.Map(merge_histograms_with_holders)
                | "PreThreshold" >> HeldByAtLeast(self._pre_threshold))
