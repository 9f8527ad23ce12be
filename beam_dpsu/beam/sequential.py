"""Sequential policy histograms in Beam, one ordered pass per shard (dpsu Algorithm 2; gw §3).

Users are visited in the order of a keyed hash of the user id (HMAC-SHA256, a fresh
key per run), packed into one block per shard, gathered by a ``GroupByKey`` and
visited in order (``shard_policy_histogram``); the shard histograms are summed per
item, every listed item noised, weight 0 included. An extra user changes one shard.

Design, shards and memory: docs/explanation/proofs.md#sequential-policies-in-beam.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import typing
from collections import defaultdict
from typing import Iterable, Mapping

import apache_beam as beam
import numpy as np

from beam_dpsu.beam.bounding import distinct_element_id, element_distinct_items
from beam_dpsu.beam.max_items_choice.chosen import Chosen, per_candidate
from beam_dpsu.core.sampling import CandidateSamplers
from beam_dpsu.core.user_blocks import UserBlockBuilder, record_blocks, shard_policy_histogram
from beam_dpsu.beam.histograms import split_by_shard, split_with_holders, summed_per_shard
from beam_dpsu.core import checks
from beam_dpsu.core.checks import ParameterError, a_type
from beam_dpsu.core.hashing import canonical_bytes, random_id128, stable_hash64
from beam_dpsu.beam.release_guard import warn_if_seeded
from beam_dpsu.core.policies import gw_item_order
from beam_dpsu.beam.randomness import draws_randomness
from beam_dpsu.beam.windowing import in_global_window, require_global_window
from beam_dpsu.beam.output_types import opaque_output

__all__ = ["run_order_key", "user_order_key", "shard_of", "USER_BLOCK_ITEMS", "UserBlockBuilder",
           "shard_policy_histogram", "SequentialPolicyHistogram", "OrderItemsForGW"]

# The most listed items (plus one per user) a worker packs into blocks before
# it sends them on: ~8 bytes each, plus the blocks' distinct items.
USER_BLOCK_ITEMS = 1 << 20
# Blocks are also sent once one holds this many distinct items, so that its ids
# fit 16 bits (``shard_blocks.SMALL_IDS``) unless its last user brought more.
USER_BLOCK_DISTINCT = 60_000


def run_order_key(seed: int | None = None) -> bytes:
    """The secret key of one run's user order: OS randomness, or from a test-only seed."""
    if seed is None:
        return secrets.token_bytes(32)
    return hashlib.sha256(b"beam_dpsu/order/%d" % seed).digest()


class _KeyedMac:
    """HMAC-SHA256 of user ids under one key, its keyed state copied per user (~5× faster)."""

    def __init__(self, key: bytes):
        self._key, self._keyed = key, hmac.new(key, digestmod=hashlib.sha256)

    def __reduce__(self):  # an HMAC object cannot be pickled: rebuilt from the key
        return _KeyedMac, (self._key,)

    def __call__(self, user_id) -> bytes:
        mac = self._keyed.copy()
        mac.update(canonical_bytes(user_id))
        return mac.digest()


def user_order_key(user_id, key: bytes) -> bytes:
    """The user's position in the visiting order: HMAC-SHA256 of its id (16 bytes)."""
    return _KeyedMac(key)(user_id)[:16]


def shard_of(user_id, shards: int, key: bytes) -> int:
    """The shard of a user, from bytes of the keyed hash not used for the order."""
    return _shard_of_mac(_KeyedMac(key)(user_id), shards)


def _shard_of_mac(mac: bytes, shards: int) -> int:
    return int.from_bytes(mac[16:24], "big") % shards


class _PolicyUserBlocksFn(beam.DoFn):
    """(user_id, items) → (shard, encoded block of its users), sent at ``max_items`` or the end."""

    def __init__(self, shards: int, order_key: bytes, max_items: int | None = None):
        self._shards, self._mac = shards, _KeyedMac(order_key)
        self._max_items = USER_BLOCK_ITEMS if max_items is None else max_items
        self._blocks: dict = {}
        self._held = 0

    def start_bundle(self):
        self._blocks, self._held = defaultdict(UserBlockBuilder), 0

    def process(self, record):
        user_id, items = record
        if not isinstance(items, (list, tuple, set, frozenset)):
            items = list(items)  # its length is needed too
        if not items:  # a user holding nothing contributes nothing
            return
        if self._add(self._mac(user_id), items):
            yield from self._flush()

    def _add(self, mac: bytes, items) -> bool:
        """Adds one user by its keyed hash (order key, then shard); True when full."""
        block = self._blocks[_shard_of_mac(mac, self._shards)]
        block.add(mac[:16], items)
        self._held += len(items) + 1
        return self._held >= self._max_items or block.distinct >= USER_BLOCK_DISTINCT

    def finish_bundle(self):
        yield from self._flush()

    def _flush(self) -> list:
        # Global window only (the transform refuses others): one window and
        # timestamp for every block, whenever it was sent.
        return [in_global_window(shard_block) for shard_block in self._full_blocks()]

    def _full_blocks(self) -> list:
        """The blocks held, as (shard, encoded block) pairs; none is held after."""
        blocks, self._blocks, self._held = self._blocks, defaultdict(UserBlockBuilder), 0
        return [(shard, block.encode()) for shard, block in blocks.items()]


@draws_randomness
class _PolicyElementBlocksFn(_PolicyUserBlocksFn):
    """``privacy_unit="element"`` elements → blocks, checked, sampled to the ``chosen`` Δ0
    and packed (docs/explanation/beam-pipeline.md#sequential-policies)."""

    def __init__(self, shards: int, order_key: bytes, max_items_per_user: tuple,
                 seed: int | None, max_items: int | None = None):
        super().__init__(shards, order_key, max_items)
        self._samples = CandidateSamplers(max_items_per_user, seed, "")

    def process(self, element, chosen=0):
        if self._add_element(element, self._samples[chosen]):
            yield from self._flush()

    def _add_element(self, element, sample):
        """Adds one element (checked, sampled); True when the blocks are full."""
        items = element_distinct_items(element)
        if not items:  # a person holding nothing contributes nothing
            return False
        if sample.seed is None:
            mac = random_id128().to_bytes(16, "big") + random_id128().to_bytes(16, "big")
            if len(items) > sample.max_items:  # within Δ0 the sample is every item
                items = sample(None, items)
        else:
            id_ = distinct_element_id(items, sample.seed)
            items = sample(id_, items)
            mac = self._mac(id_)
        return self._add(mac, items)


@draws_randomness
class _PolicyRecordBlocksFn(_PolicyElementBlocksFn):
    """``_PolicyElementBlocksFn`` on ``AutoSelection(as_blocks=True)``'s record blocks."""

    def process(self, bins_block, chosen=0):
        for shard_block in self._packed(bins_block[1], self._samples[chosen]):
            yield in_global_window(shard_block)

    def packed_users(self, blocks: Iterable[bytes], chosen: int) -> list:
        """The encoded user blocks of the record ``blocks`` (one shard: shards dropped)."""
        self.start_bundle()
        sample = self._samples[chosen]
        packed = [user_block for block in blocks for _, user_block in self._packed(block, sample)]
        return packed + [user_block for _, user_block in self._full_blocks()]

    def _packed(self, block: bytes, sample):
        """Adds a record block's users, sampled; yields (shard, block) pairs as blocks fill."""
        if sample.seed is not None:
            full = False
            for element in record_blocks.unpack_block(block):
                full = self._add_element(element, sample) or full
            if full:
                yield from self._full_blocks()
        else:
            items, runs = record_blocks.block_runs(block)
            for run_ids, run_sizes in runs:
                if self._add_sampled_run(items, run_ids, run_sizes, sample):
                    yield from self._full_blocks()

    def _add_sampled_run(self, items: list, run_ids, run_sizes, sample) -> bool:
        """Adds a run of users, each sampled; True when the blocks are full."""
        ids, lengths = sample.sample_block(run_ids, run_sizes)
        holders = lengths > 0  # a person holding nothing contributes nothing
        lengths = lengths[holders]
        macs = np.frombuffer(secrets.token_bytes(32 * len(lengths)), np.uint8).reshape(-1, 32)
        # _shard_of_mac on every user at once: bytes 16-24 of the 32, big-endian.
        shards = macs[:, 16:24].copy().view(">u8")[:, 0] % self._shards
        full = False
        for shard in np.unique(shards).tolist():
            users = shards == shard
            builder = self._blocks[shard]
            builder.add_block(macs[users, :16].tobytes(), items,
                              ids[np.repeat(users, lengths)], lengths[users])
            full = full or builder.distinct >= USER_BLOCK_DISTINCT
        self._held += len(ids) + len(lengths)
        return full or self._held >= self._max_items


@opaque_output
class _PolicyHistogramFn(beam.DoFn):
    """(shard, its user blocks) → its policy histogram; the cutoff Γ is the ``chosen`` one's."""

    def __init__(self, update, cutoffs: tuple, item_shards: int | None,
                 count_holders: bool = False):
        self._update, self._cutoffs = update, cutoffs
        self._item_shards, self._count_holders = item_shards, count_holders

    def process(self, shard_blocks, chosen=0):
        histogram = shard_policy_histogram(shard_blocks[1], self._update, self._cutoffs[chosen],
                                           count_holders=self._count_holders)
        if self._count_holders:  # (weights, holders), with item shards only
            yield from split_with_holders(*histogram, self._item_shards).items()
        elif self._item_shards is None:
            yield from histogram.items()
        else:
            yield from split_by_shard(histogram, self._item_shards).items()


@draws_randomness
class _PolicyRecordShardFn(_PolicyHistogramFn):
    """One shard's record blocks → its policy histogram, users packed here (one stage fewer)."""

    def __init__(self, packer: _PolicyRecordBlocksFn, sample_is_chosen: bool, update,
                 cutoffs: tuple, item_shards: int | None, count_holders: bool = False):
        super().__init__(update, cutoffs, item_shards, count_holders)
        # Δ0 is chosen by the cutoff's index, or is one value (its index 0).
        self._packer, self._sample_is_chosen = packer, sample_is_chosen

    def process(self, shard_blocks, chosen=0):
        user_blocks = self._packer.packed_users(shard_blocks[1],
                                                chosen if self._sample_is_chosen else 0)
        yield from super().process((shard_blocks[0], user_blocks), chosen)


class SequentialPolicyHistogram(beam.PTransform):
    """(user_id, items in the user's priority order) → (item, weight).

    Its input must be one bounded record per user (e.g. the output of
    ``SampleItemsPerUser``): each record is visited as one user.

    Args:
      update: the policy, e.g. ``policies.l2_descent``.
      cutoff: Γ, or a ``Chosen`` of them (by ``sample_elements``'s index if it is one).
      order_key: the run's secret key for the user order and shards.
      shards: P ≥ 1 (see [beam_dpsu.beam.sequential][]'s module notes).
      item_shards: None (default) for (item, weight) pairs; else (shard, {item: weight})
        dicts of this many ``shard_of_item`` shards, for ``NoisyThreshold.per_shard``.
      sample_elements: None, or Δ0: the input is elements, checked and sampled here.
      seed: with ``sample_elements``: test-only, seeds the elements' ids and samples.
      blocks: with ``sample_elements``: the input is ``AutoSelection(as_blocks=True)``'s.
      pre_threshold: k ≥ 1; from 2 on (with ``item_shards``), only the items listed by
        at least k users are in the histogram.
    """

    def __init__(self, update, cutoff: float | Chosen, order_key: bytes, shards: int = 1,
                 item_shards: int | None = None, sample_elements: int | Chosen | None = None,
                 seed: int | None = None, pre_threshold: int = 1, blocks: bool = False):
        super().__init__()
        self._pre_threshold = checks.integer("pre_threshold", pre_threshold, 1)
        if self._pre_threshold > 1 and item_shards is None:
            raise ParameterError("pre_threshold", "needs item_shards (holders travel with "
                                                  "the shard dicts)")
        checks.integer("shards", shards, types=(int,))
        if item_shards is not None:
            checks.integer("item_shards", item_shards, types=(int,))
        seed = checks.seed(seed)
        warn_if_seeded(seed, "SequentialPolicyHistogram")
        if sample_elements is None:
            if seed is not None:  # records come sampled: nothing here would use it
                raise ParameterError.worded(
                    "seed", "SequentialPolicyHistogram takes a seed only with "
                            "sample_elements (it seeds the elements' ids and samples)")
            self._pack = _PolicyUserBlocksFn(shards, order_key)
            self._pack_chosen = Chosen.of(None)
        else:
            self._pack_chosen = Chosen.of(sample_elements)
            self._pack = (_PolicyRecordBlocksFn if blocks else _PolicyElementBlocksFn)(
                shards, order_key, tuple(checks.max_items(m, "sample_elements")
                                         for m in self._pack_chosen.values), seed)
        self._shards, self._update, self._cutoff = shards, update, Chosen.of(cutoff)
        if (self._pack_chosen.index is not None
                and self._pack_chosen.index is not self._cutoff.index):
            raise ValueError("sample_elements and cutoff must be chosen by the same index")
        self._item_shards = item_shards

    def expand(self, user_items):
        # In any window but the global one, each window would be its own policy.
        require_global_window(user_items, "SequentialPolicyHistogram")
        args = (self._update, self._cutoff.values, self._item_shards, self._pre_threshold > 1)
        if isinstance(self._pack, _PolicyRecordBlocksFn) and self._shards == 1:
            # One shard: its record blocks are gathered as they are, and its users
            # sampled and packed where they are visited (``_PolicyRecordShardFn``).
            keyed = user_items | "ToTheShard" >> beam.Map(
                lambda bins_block: (0, bins_block[1])).with_output_types(typing.Tuple[int, bytes])
            policy = _PolicyRecordShardFn(self._pack, self._pack_chosen.index is not None, *args)
        else:
            keyed = user_items | "PackUserBlocks" >> beam.ParDo(
                self._pack, **self._pack_chosen.side_inputs()).with_output_types(
                    typing.Tuple[int, bytes])
            policy = _PolicyHistogramFn(*args)
        # Each shard's blocks in one place, once every user is packed (the global
        # window closes): a GroupByKey, one stage boundary, no per-key state.
        shard_blocks = keyed | "GroupShardBlocks" >> beam.GroupByKey()
        shard_histograms = shard_blocks | "ApplyPolicyInOrder" >> beam.ParDo(
            policy, **self._cutoff.side_inputs())
        if self._item_shards is None:
            return shard_histograms | "SumShards" >> beam.CombinePerKey(sum)
        item_shards = shard_histograms | "GroupItemShards" >> beam.GroupByKey()
        return summed_per_shard(item_shards, "SumPerItemShard", self._pre_threshold)


class OrderItemsForGW(beam.PTransform):
    """(user_id, {item: count}) → (user_id, the user's top-Δ0 items in GW priority order).

    Most frequent first, by the user's own counts (GW) or by public counts (GW-KT: a
    mapping, or a PCollection of (item, count) pairs), ties by a keyed hash of the item
    (gw Algorithm 2, line 8). Proof: docs/explanation/proofs.md#gw-and-gw-kt.
    """

    def __init__(self, order_key: bytes, max_items_per_user: int | Chosen, public_counts=None):
        super().__init__()
        self._key, self._public = order_key, public_counts
        self._max_items = Chosen.of(max_items_per_user).map(checks.max_items)

    def expand(self, user_counts):
        order = _TopItemsFn(self._key, self._max_items.values)
        chosen = self._max_items.side_inputs()
        if self._public is None or isinstance(self._public, Mapping):
            return user_counts | "TopItemsByCounts" >> beam.ParDo(order, self._public, **chosen)
        # The public side input is global too, and an item listed twice (e.g. in
        # two public files) counts once with the sum, whatever the file split.
        require_global_window(self._public, "OrderItemsForGW (public_counts)")
        public = (self._public
                  | "ValidatePublicCounts" >> beam.Map(_check_public_count)
                  | "SumPublicCounts" >> beam.CombinePerKey(sum))
        return user_counts | "TopItemsByPublicCounts" >> beam.ParDo(
            order, beam.pvalue.AsDict(public), **chosen)


# The most items whose tie keys a worker keeps (~150 bytes each).
TIE_KEY_CACHE = 1 << 20


class _TopItemsFn(beam.DoFn):
    """(user_id, {item: count}) → (user_id, top-Δ0 list); tie keys (of the item alone) cached."""

    def __init__(self, order_key: bytes, max_items: tuple):
        self._key = order_key
        self._max_items = per_candidate(max_items)  # Δ0 per candidate; ``chosen`` says which
        self._ties: dict = {}

    def _tie_key(self, item) -> int:
        # Only plain str/bytes are cached: for them equality is identity of
        # the canonical bytes, while 1, 1.0 and True are one dict key with
        # three tie keys (a user's list would depend on who came first).
        if type(item) is not str and type(item) is not bytes:
            return stable_hash64(item, key=self._key)
        tie = self._ties.get(item)
        if tie is None:
            if len(self._ties) >= TIE_KEY_CACHE:
                self._ties.clear()
            tie = self._ties[item] = stable_hash64(item, key=self._key)
        return tie

    def process(self, record, public=None, chosen=0):
        user_id, counts = record
        yield user_id, gw_item_order(counts, self._tie_key, self._max_items[chosen], public)


def _check_public_count(record):
    # Public data, but the message still names only the shape and the field.
    if not isinstance(record, tuple) or len(record) != 2:
        raise ValueError(f"public counts must be (item, count) pairs, got {a_type(record)}")
    checks.public_count(record[1])
    return record
