"""The unseeded block sampling of max_items_per_user="auto", against a neighbouring dataset.

``sampling.sample_block`` samples a whole packed block of users in numpy, and
``_BlockSampleAndSumFn`` / ``_PolicyRecordBlocksFn`` feed it blocks. These tests check
what docs/privacy.md asks of it: each user's Δ0-sample is a uniform subset of
min(Δ0, |W|) of its own items, drawn independently per user and independently of the
block it was packed in (invariant 1, "Bounding"); for D plus one user the noised key
set grows only by that user's items and the histogram moves by ≤ 1 in its norm
(invariant 8); a draw is read once (invariant 11).

Statistical tests: each chi-square is compared with its upper 1e-8 quantile
(``scipy.stats.chi2.isf(1e-8, df)``); the expected count of every cell is ≥ 1,000,
where the chi-square approximation is accurate. There are 10 such comparisons in this
file, so a correct sampler fails one with probability at most 1e-7.
"""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter

import apache_beam as beam
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from beam_dpsu import Budget, SelectItems, ZCDPBudget
from beam_dpsu.beam.histograms import _BlockSampleAndSumFn
from beam_dpsu.beam.randomness import random_fanouts
from beam_dpsu.beam.sequential import _PolicyRecordBlocksFn
from beam_dpsu.core.user_blocks import decode_user_block
from beam_dpsu.core import mechanisms, policies, sampling
from beam_dpsu.core.user_blocks import record_blocks
from beam_dpsu.core.user_blocks.record_blocks import RecordBlockBuilder
from beam_dpsu.core.sampling import sample_block

pytestmark = pytest.mark.pipeline

EDGES = np.asarray((1, 2, 5, 10), dtype=np.int64)
# Each statistical comparison fails by chance with probability 1e-8 (see the docstring).
P_FAIL = 1e-8


def _chi_square(counts, expected) -> tuple[float, float]:
    counts = np.asarray(counts, dtype=float)
    expected = np.broadcast_to(np.asarray(expected, dtype=float), counts.shape)
    assert expected.min() >= 1000  # the chi-square approximation holds
    statistic = float(((counts - expected) ** 2 / expected).sum())
    return statistic, float(stats.chi2.isf(P_FAIL, counts.size - 1))


def _subset_index(kept_rows: np.ndarray, n: int) -> np.ndarray:
    """Each row's kept ids (a subset of range(n)) → the subset as a bit mask."""
    return (np.left_shift(1, kept_rows.astype(np.int64))).sum(axis=1)


# --- sample_block: uniform, exactly Δ0, independent of its neighbours ---------------

def test_each_user_keeps_a_uniform_subset_independent_of_its_neighbours():
    """Probe users of 4 items (ids 0..3) at Δ0 = 2, each after a filler user of random
    size (0..8: within Δ0 or above). Each probe's pair is uniform over the 6 pairs,
    whatever the filler before it (3 classes), and consecutive probes' pairs are
    independent (36 cells)."""
    rng = np.random.default_rng()  # OS entropy: the test checks the sampler, not a seed
    probes, d0 = 60_000, 2
    filler_sizes = rng.integers(0, 9, size=probes)
    sizes = np.empty(2 * probes, dtype=np.int64)
    sizes[0::2], sizes[1::2] = filler_sizes, 4
    ids = np.concatenate([np.arange(s) + (4 if i % 2 == 0 else 0)
                          for i, s in enumerate(sizes.tolist())])
    kept, kept_sizes = sample_block(ids, sizes, d0, np.random.default_rng())
    assert kept_sizes.tolist() == np.minimum(sizes, d0).tolist()
    starts = np.cumsum(kept_sizes) - kept_sizes
    probe_rows = kept[starts[1::2, None] + np.arange(d0)]
    assert (probe_rows < 4).all() and (probe_rows[:, 0] != probe_rows[:, 1]).all()
    masks = _subset_index(probe_rows, 4)
    pairs = sorted({a | b for a, b in itertools.combinations([1, 2, 4, 8], 2)})
    cell = np.searchsorted(pairs, masks)
    assert (np.asarray(pairs)[cell] == masks).all()
    for cls in (filler_sizes == 0, (filler_sizes >= 1) & (filler_sizes <= d0),
                filler_sizes > d0):
        counts = np.bincount(cell[cls], minlength=6)
        statistic, limit = _chi_square(counts, cls.sum() / 6)
        assert statistic < limit, (counts.tolist(), statistic, limit)
    joint = np.bincount(6 * cell[:-1] + cell[1:], minlength=36)
    statistic, limit = _chi_square(joint, (probes - 1) / 36)
    assert statistic < limit, (joint.tolist(), statistic, limit)


def test_a_larger_user_keeps_a_uniform_subset_of_exactly_delta0():
    """Users of 7 items at Δ0 = 3: each keeps exactly 3 distinct own items, each of the
    35 subsets with probability 1/35."""
    users, n, d0 = 70_000, 7, 3
    ids = np.tile(np.arange(n), users)
    kept, kept_sizes = sample_block(ids, np.full(users, n), d0, np.random.default_rng())
    assert (kept_sizes == d0).all() and len(kept) == users * d0
    rows = kept.reshape(-1, d0)
    assert (np.sort(rows, axis=1)[:, 1:] != np.sort(rows, axis=1)[:, :-1]).all()
    counts = Counter(_subset_index(rows, n).tolist())
    assert len(counts) == 35
    statistic, limit = _chi_square(list(counts.values()), users / 35)
    assert statistic < limit, (statistic, limit)


def test_users_within_delta0_keep_every_item_in_place():
    sizes = np.array([3, 0, 5, 1, 3])
    ids = np.arange(sizes.sum())
    kept, kept_sizes = sample_block(ids, sizes, 3, np.random.default_rng())
    starts = np.cumsum(sizes) - sizes
    kstarts = np.cumsum(kept_sizes) - kept_sizes
    for user in (0, 3, 4):
        assert kept[kstarts[user]:kstarts[user] + sizes[user]].tolist() == \
            ids[starts[user]:starts[user] + sizes[user]].tolist()
    assert set(kept[kstarts[2]:kstarts[2] + 3].tolist()) <= set(range(3, 8))


class _FixedKeys:
    """A generator whose ``permutation`` orders the pairs by preset keys (equal keys by
    their position), in place of a uniform permutation: a user's items come in the
    order of its own keys."""

    def __init__(self, keys):
        self._keys = np.asarray(keys, dtype=np.int64)

    def permutation(self, n):
        assert n == len(self._keys)
        places = np.empty(n, dtype=np.int64)
        places[np.argsort(self._keys, kind="stable")] = np.arange(n)
        return places


class _TyingDraws:
    """A real generator, except that its bounded integers are 0 or 1: draws that tie
    often (independent 40-bit keys tie with probability ~|W|·2^-40 at a user's Δ0
    boundary; here about half the time)."""

    def __init__(self, rng):
        self._rng = rng

    def integers(self, low, high=None, size=None, dtype=np.int64, endpoint=False):
        return self._rng.integers(0, 2, size=size, dtype=dtype)

    def __getattr__(self, name):
        return getattr(self._rng, name)


def test_a_users_sample_is_uniform_whichever_order_its_block_numbered_its_items():
    """A record block lists each user's ids ascending, numbered as the block first saw
    its items, so a user packed before y decides the order y's items are listed in; a
    sample breaking ties of its 40-bit keys by that order would make y's sample depend
    on the users packed with it. Each packing's 3 cells are compared with a
    chi-square at 1e-8 (2 comparisons; expected 2,000 a cell)."""
    y, x = ["a", "b", "c"], ["c", "b"]
    copies = 6_000
    rng = _TyingDraws(np.random.default_rng())
    for packed in ([y], [x, y]):
        builder = RecordBlockBuilder(False)
        for items in packed:
            builder.add(items, True)
        decoded = record_blocks.decode_block(builder.build(EDGES)[1])
        y_ids = decoded.ids[decoded.ends[-2] if len(packed) == 2 else 0:]
        kept, _ = sample_block(np.tile(y_ids, copies), np.full(copies, 3), 1, rng)
        counts = Counter(decoded.items[i] for i in kept.tolist())
        statistic, limit = _chi_square([counts[item] for item in y], copies / 3)
        assert statistic < limit, (packed, dict(counts), statistic, limit)


def test_a_users_sample_never_depends_on_the_users_packed_with_it():
    """With its own keys fixed, a user's sample must be the same whoever shares its run
    (an unstable argsort would order a user's tied keys by the whole run's layout; the
    sort is stable).
    Equal keys are what a tie (probability ~2^-40 a pair, ~|W|/2^40 at a user's Δ0
    boundary) gives: here the user's keys are 0 or 1 so that ties are common."""
    d0, n = 3, 40
    own = np.random.default_rng(0).integers(0, 2, n)  # fixed keys with many ties
    y = np.arange(1000, 1000 + n)
    alone = sample_block(y, np.array([n]), d0, _FixedKeys(own))[0].tolist()
    others = np.random.default_rng(1)
    samples = set()
    for nx in (5, 40, 1000, 5000):
        x_keys = others.integers(0, 2, nx)
        x = np.arange(nx)
        before = sample_block(np.concatenate([x, y]), np.array([nx, n]), d0,
                              _FixedKeys(np.concatenate([x_keys, own])))[0]
        after = sample_block(np.concatenate([y, x]), np.array([n, nx]), d0,
                             _FixedKeys(np.concatenate([own, x_keys])))[0]
        samples.add(tuple(sorted(before[-d0:].tolist())))
        samples.add(tuple(sorted(after[:d0].tolist())))
    assert samples == {tuple(sorted(alone))}


# --- D vs D plus one user, through _BlockSampleAndSumFn ------------------------------

def _key40(user: tuple, item: str) -> int:
    digest = hashlib.blake2b(repr((user, item)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") & ((1 << 40) - 1)


def _coupled(monkeypatch, max_ids: int):
    """Couples the draws of D and D + x: every (user, item) pair's 40-bit key is a hash of
    the user's own items and the item, whatever block or run the user is in; runs hold at
    most ``max_ids`` ids (to cross run boundaries on small inputs)."""
    seen = {}
    real_runs = record_blocks.block_runs

    def runs(block):
        items, block_runs = real_runs(block, max_ids)
        seen["items"] = items
        return items, block_runs

    def sample(self, ids, sizes):
        items = seen["items"]
        keys, start = [], 0
        for size in np.asarray(sizes).tolist():
            user_ids = ids[start:start + size].tolist()
            start += size
            if size > self.max_items:
                user = tuple(sorted(items[i] for i in user_ids))
                keys.extend(_key40(user, items[i]) for i in user_ids)
        return sampling.sample_block(ids, sizes, self.max_items, _FixedKeys(keys))

    monkeypatch.setattr(record_blocks, "block_runs", runs)
    monkeypatch.setattr(sampling.UserSampler, "sample_block", sample)


def _block_outputs(users, d0, users_per_block, item_weight, holders=False) -> list:
    """What ``_BlockSampleAndSumFn`` emits for ``users`` packed in blocks of
    ``users_per_block`` users (unseeded)."""
    fn = _BlockSampleAndSumFn(item_weight, 1 << 30, (d0,), None, "", 1,
                              count_holders=holders)
    fn.setup()
    fn.start_bundle()
    out = []
    for first in range(0, len(users), users_per_block):
        builder = RecordBlockBuilder(False)
        for items in users[first:first + users_per_block]:
            builder.add(set(items), True)
        out.extend(fn.process(builder.build(EDGES)))
    out.extend(fn.finish_bundle())
    return out


def _block_histogram(users, d0, users_per_block, item_weight, holders=False) -> dict:
    """The partial sums ``_BlockSampleAndSumFn`` gives for ``users`` packed in blocks of
    ``users_per_block`` users (unseeded)."""
    histogram: dict = {}
    for windowed in _block_outputs(users, d0, users_per_block, item_weight, holders):
        shard_dict = windowed.value[1]
        if holders:
            shard_dict = shard_dict[0]
        for item, weight in shard_dict.items():
            assert item not in histogram
            histogram[item] = weight
    return histogram


users_strategy = st.lists(st.sets(st.sampled_from([f"w{i}" for i in range(30)]),
                                  max_size=12), max_size=14)


@settings(deadline=None)
@given(users=users_strategy, x=st.sets(st.sampled_from([f"w{i}" for i in range(40)]),
                                       min_size=1, max_size=15),
       where=st.integers(0, 14), d0=st.integers(1, 6), per_block=st.integers(1, 6),
       max_ids=st.integers(1, 30), weighted=st.booleans())
def test_one_more_user_adds_only_its_own_keys_and_moves_the_histogram_by_at_most_one(
        users, x, where, d0, per_block, max_ids, weighted):
    with pytest.MonkeyPatch.context() as patch:
        _coupled(patch, max_ids)
        weight = policies.weighted_gaussian_weight if weighted else policies.count_weight
        with_x = users[:where] + [x] + users[where:]
        before = _block_histogram(users, d0, per_block, weight)
        after = _block_histogram(with_x, d0, per_block, weight)
    new = set(after) - set(before)
    assert set(before) <= set(after)  # no key of D is lost
    assert new <= x and len(new) <= d0  # invariant 8
    diff = np.array([after[k] - before.get(k, 0.0) for k in after])
    if weighted:  # 1/√m on each of the m ≤ Δ0 kept items: ℓ2 norm 1
        assert abs(np.sqrt((diff ** 2).sum()) - 1) < 1e-9
    else:  # +1 on each kept item: ℓ1 = min(Δ0, |x|)
        assert abs(np.abs(diff).sum() - min(d0, len(x))) < 1e-9
    # the other users' sums do not move: x's contribution is on min(Δ0, |x|) keys
    assert (np.abs(diff) > 1e-9).sum() == min(d0, len(x))


@settings(deadline=None)
@given(users=users_strategy, d0=st.integers(1, 6), per_block=st.integers(1, 6))
def test_holders_count_each_users_sample_once(users, d0, per_block):
    with pytest.MonkeyPatch.context() as patch:
        _coupled(patch, 7)
        out = _block_outputs(users, d0, per_block, policies.count_weight, holders=True)
    sums, held = {}, {}
    for windowed in out:
        part_sums, part_held = windowed.value[1]
        sums.update(part_sums)
        held.update(part_held)
    # count weights: each kept item counts 1 per user, so sums equal holders
    assert sums == {k: float(v) for k, v in held.items()}
    assert sum(held.values()) == sum(min(d0, len(u)) for u in users)


# --- Policy Gaussian/Laplace: _PolicyRecordBlocksFn ---------------------------------

def _policy_blocks(users, d0, shards):
    fn = _PolicyRecordBlocksFn(shards, b"k" * 32, (d0,), None)
    fn.setup()
    fn.start_bundle()
    builder = RecordBlockBuilder(False)
    for items in users:
        builder.add(set(items), True)
    out = list(fn.process(builder.build(EDGES))) + list(fn.finish_bundle())
    decoded = []
    for windowed in out:
        shard, block = windowed.value
        keys, items, listed, lengths = decode_user_block(block)
        starts = np.cumsum(lengths) - lengths
        for user, (start, length) in enumerate(zip(starts.tolist(), lengths.tolist())):
            decoded.append((shard, keys[16 * user:16 * user + 16],
                            [items[i] for i in listed[start:start + length].tolist()]))
    return decoded


def test_policy_users_keep_their_own_delta0_sample_each_once():
    rng = np.random.default_rng()
    sizes = rng.integers(0, 12, size=300)
    users = [{f"u{u}:{j}" for j in range(n)} for u, n in enumerate(sizes.tolist())]
    decoded = _policy_blocks(users, 4, 3)
    assert len(decoded) == sum(1 for u in users if u)  # the empty users are not added
    assert len({key for _, key, _ in decoded}) == len(decoded)
    owners = Counter()
    for _, _, listed in decoded:
        owner = {item.split(":")[0] for item in listed}
        assert len(owner) == 1 and len(set(listed)) == len(listed)
        (name,) = owner
        owners[name] += 1
        assert len(listed) == min(4, len(users[int(name[1:])]))
    assert set(owners.values()) == {1}


def test_policy_samples_are_uniform_and_order_and_shard_are_independent_draws():
    """One block of 60,000 users of 4 items at Δ0 = 2 and 3 shards: each user's pair is
    uniform over 6; users spread uniformly over the 3 shards; and the visiting order of
    each packed triple of users (by order key) is uniform over its 6 permutations."""
    users_n, d0 = 60_000, 2
    users = [{f"u{u}:{j}" for j in range(4)} for u in range(users_n)]
    decoded = _policy_blocks(users, d0, 3)
    assert len(decoded) == users_n
    pair_counts = Counter(tuple(sorted(int(i.split(":")[1]) for i in listed))
                          for _, _, listed in decoded)
    assert len(pair_counts) == 6
    statistic, limit = _chi_square(list(pair_counts.values()), users_n / 6)
    assert statistic < limit, (pair_counts, statistic, limit)
    shard_counts = Counter(shard for shard, _, _ in decoded)
    statistic, limit = _chi_square([shard_counts[s] for s in range(3)], users_n / 3)
    assert statistic < limit, (shard_counts, statistic, limit)
    key_of = {int(listed[0].split(":")[0][1:]): key for _, key, listed in decoded}
    patterns = Counter(tuple(np.argsort([key_of[3 * t + i] for i in range(3)]).tolist())
                       for t in range(users_n // 3))
    statistic, limit = _chi_square([patterns[p] for p in itertools.permutations(range(3))],
                                      users_n / 3 / 6)
    assert statistic < limit, (patterns, statistic, limit)


# --- invariant 11: under "auto", no random draw is read twice -----------------------

@pytest.mark.parametrize("name", ["weighted-gaussian", "count-laplace", "truncated-geometric",
                                  "policy-gaussian", "policy-laplace"])
@pytest.mark.parametrize("unit", ["user_id", "element"])
def test_auto_selections_on_blocks_checkpoint_their_draws(name, unit):
    m = mechanisms.mechanism_from_name(name, max_items_per_user="auto")
    p = beam.Pipeline()
    data = p | beam.Create([("u1", "a"), ("u2", "b")] if unit == "user_id"
                           else [["a", "b"], ["a"]])
    budget = Budget(1.0, 1e-5) if name == "truncated-geometric" else ZCDPBudget(0.5, 1e-5)
    released = data | "Select" >> SelectItems(m, budget, privacy_unit=unit)
    _ = released | "Write" >> beam.Map(lambda x: x)
    _ = released | "UseAgain" >> beam.combiners.Count.Globally()
    assert random_fanouts(p) == []
