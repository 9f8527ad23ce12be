"""Sequential policy histograms as a stateful Beam DoFn (dpsu Algorithm 2; gw §3).

A policy histogram visits users one at a time, each update depending on the
histogram so far. The visiting order must be the same for the users common
to neighbouring datasets, so it is the order of a keyed hash of the user id
(HMAC-SHA256, a fresh random key per run), never arrival order or the id.

The pipeline: first each user record is keyed by its shard (another part of
the keyed hash) and encoded as one compact value; then a stateful DoFn per
shard buffers its users in bag state and, when the window closes (the end of
a batch input), sorts them by keyed hash and applies the policy in that
order; finally the shard histograms are summed per item. The output has one
(item, weight) per item of any user's list, weight 0 included (GW), and every
one of them is noised: see ``beam_dpsu.policies`` for why.

Shards. With ``shards=P`` the users are split over P keys, one ordered policy
per shard. An extra user lands in exactly one shard, so only that shard's
histogram changes, by at most 1 in the policy's norm: the sum keeps
sensitivity 1 (``tests/test_sequential_policies.py`` checks it). P = 1 is
the papers' algorithm; P > 1 lets the runner work on P shards in parallel.

Memory. A shard holds its users in state as (16-byte order key, pickled
tuple of its ≤ Δ0 items): about Σ_users (60 + Σ_items (len(item) + 2)) bytes,
e.g. ~100 MB for the 50,000 IMDb reviews at Δ0 = 100, all on one worker when
P = 1.
Sorting and the histogram (a dict over the shard's distinct items) come on
top when the window closes. Raise P when a shard would not fit a worker.
"""

from __future__ import annotations

import hashlib
import hmac
import pickle
import secrets
import typing
from typing import Hashable, Iterable, Mapping, Sequence

import apache_beam as beam
from apache_beam.coders import BytesCoder, TupleCoder
from apache_beam.transforms.timeutil import TimeDomain
from apache_beam.transforms.userstate import BagStateSpec, TimerSpec, on_timer

from beam_dpsu.noise import canonical_bytes, stable_hash64
from beam_dpsu.policies import apply_policy, check_public_count, gw_item_order, policy_histogram
from beam_dpsu.thresholds import check_max_items
from beam_dpsu.windowing import require_global_window

__all__ = ["run_order_key", "user_order_key", "shard_of", "sharded_policy_histogram",
           "SequentialPolicyHistogram", "OrderItemsForGW"]


def run_order_key(seed: int | None = None) -> bytes:
    """The secret key of one run's user order: fresh OS randomness, or derived
    from the seed in seeded (test-only) runs."""
    if seed is None:
        return secrets.token_bytes(32)
    return hashlib.sha256(b"beam_dpsu/order/%d" % seed).digest()


def _mac(user_id, key: bytes) -> bytes:
    return hmac.new(key, canonical_bytes(user_id), hashlib.sha256).digest()


def user_order_key(user_id, key: bytes) -> bytes:
    """The user's position in the visiting order: HMAC-SHA256 of its id (16 bytes)."""
    return _mac(user_id, key)[:16]


def shard_of(user_id, shards: int, key: bytes) -> int:
    """The shard of a user, from bytes of the keyed hash not used for the order."""
    return int.from_bytes(_mac(user_id, key)[16:24], "big") % shards


def sharded_policy_histogram(named_users: Iterable[tuple[Hashable, Sequence]], update,
                             cutoff: float, shards: int, key: bytes) -> dict:
    """Pure reference of what the Beam transform computes (used by the tests).

    Users are split into shards, visited in keyed-hash order within each
    shard, and the shard histograms are summed.
    """
    by_shard: dict = {}
    for user_id, items in named_users:
        by_shard.setdefault(shard_of(user_id, shards, key), []).append(
            (user_order_key(user_id, key), list(items)))
    total: dict = {}
    for users in by_shard.values():
        hist: dict = {}
        for _, items in sorted(users, key=lambda u: u[0]):
            apply_policy(hist, items, update, cutoff)
        for item, w in hist.items():
            total[item] = total.get(item, 0.0) + w
    return total


class _PolicyHistogramFn(beam.DoFn):
    """Buffers a shard's users; when the window closes applies the policy in order."""

    USERS = BagStateSpec("users", TupleCoder((BytesCoder(), BytesCoder())))
    WINDOW_END = TimerSpec("window_end", TimeDomain.WATERMARK)

    def __init__(self, update, cutoff: float):
        self._update = update
        self._cutoff = cutoff

    def process(self, element, window=beam.DoFn.WindowParam,
                users=beam.DoFn.StateParam(USERS),
                window_end=beam.DoFn.TimerParam(WINDOW_END)):
        _, user = element
        users.add(user)
        window_end.set(window.max_timestamp())

    @on_timer(WINDOW_END)
    def emit_histogram(self, users=beam.DoFn.StateParam(USERS)):
        histogram = policy_histogram(
            (pickle.loads(encoded_items) for _, encoded_items in sorted(users.read())),
            self._update, self._cutoff)
        users.clear()
        yield from histogram.items()


class SequentialPolicyHistogram(beam.PTransform):
    """(user_id, items in the user's priority order) → (item, weight).

    Its input must be one bounded record per user (e.g. the output of
    ``SampleItemsPerUser``): each record is visited as one user.

    Args:
      update: the policy, e.g. ``policies.l1_descent``.
      cutoff: Γ.
      order_key: the run's secret key for the user order and shards.
      shards: P ≥ 1 (see the module docstring).
    """

    def __init__(self, update, cutoff: float, order_key: bytes, shards: int = 1):
        super().__init__()
        if isinstance(shards, bool) or not isinstance(shards, int) or shards < 1:
            raise ValueError(f"shards must be an int >= 1, got {shards!r}")
        self._update = update
        self._cutoff = cutoff
        self._key = order_key
        self._shards = shards

    def expand(self, user_items):
        # The timer fires at the end of the window: in any window but the
        # global one, each window would be its own policy over its own users.
        require_global_window(user_items, "SequentialPolicyHistogram")
        key, shards = self._key, self._shards

        def keyed_by_shard(record):
            user_id, items = record
            encoded = pickle.dumps(tuple(items), protocol=pickle.HIGHEST_PROTOCOL)
            return shard_of(user_id, shards, key), (user_order_key(user_id, key), encoded)

        return (user_items
                | "KeyByShard" >> beam.Map(keyed_by_shard).with_output_types(
                    typing.Tuple[int, typing.Tuple[bytes, bytes]])
                | "ApplyPolicyInOrder" >> beam.ParDo(_PolicyHistogramFn(self._update,
                                                                        self._cutoff))
                | "SumShards" >> beam.CombinePerKey(sum))


class OrderItemsForGW(beam.PTransform):
    """(user_id, {item: count}) → (user_id, the user's top-Δ0 items in GW priority order).

    Most frequent first, by the user's own counts (GW) or by public counts
    (GW-KT: a mapping, or a PCollection of (item, count) read as a dict side
    input); ties broken by a keyed hash of the item (gw Algorithm 2, line 8);
    only the first Δ0 are kept (``policies.gw_item_order``). Every item of
    these lists becomes a noised key of the policy histogram, weight 0
    included (the proof in ``beam_dpsu.policies``).
    """

    def __init__(self, order_key: bytes, max_items_per_user: int, public_counts=None):
        super().__init__()
        self._key = order_key
        self._max_items = check_max_items(max_items_per_user)
        self._public = public_counts

    def expand(self, user_counts):
        order = _TopItemsFn(self._key, self._max_items)
        if self._public is None or isinstance(self._public, Mapping):
            return user_counts | "TopItemsByCounts" >> beam.ParDo(order, self._public)
        # The public side input is global too, and an item listed twice (e.g. in
        # two public files) counts once with the sum, whatever the file split.
        require_global_window(self._public, "OrderItemsForGW (public_counts)")
        public = (self._public
                  | "ValidatePublicCounts" >> beam.Map(_check_public_count)
                  | "SumPublicCounts" >> beam.CombinePerKey(sum))
        return user_counts | "TopItemsByPublicCounts" >> beam.ParDo(
            order, beam.pvalue.AsDict(public))


# The most items whose tie keys a worker keeps (~150 bytes each).
TIE_KEY_CACHE = 1 << 20


class _TopItemsFn(beam.DoFn):
    """(user_id, {item: count}) → (user_id, top-Δ0 list); tie keys cached per worker.

    The tie key is a keyed hash of the item alone (the same in every worker
    for one run key), so caching it changes nothing but the time: a keyed
    BLAKE2b per (user, item) was most of GW's cost, while items repeat across
    users (a Zipf vocabulary).
    """

    def __init__(self, order_key: bytes, max_items: int):
        self._key = order_key
        self._max_items = max_items
        self._ties: dict = {}

    def setup(self):
        self._ties = {}

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

    def process(self, record, public=None):
        user_id, counts = record
        yield user_id, gw_item_order(counts, self._tie_key, self._max_items, public)


def _check_public_count(record):
    # Public data, but the message still names only the shape and the field.
    if not isinstance(record, tuple) or len(record) != 2:
        raise ValueError("public counts must be (item, count) pairs, got a "
                         f"{type(record).__name__}")
    check_public_count(record[1])
    return record
