"""The packed SIPS rounds, against a neighbouring dataset: users carried between rounds in
blocks of 16-bit item ids (beam_dpsu.core.user_blocks.record_blocks), the side-input removal
per block item (``without_items``), keys only for seeded samples, and under
``max_items_per_user="auto"`` the blocks that waited for Δ0 as round 0's input.

What a neighbouring dataset (D vs D plus one user, or one element) may change:
only that user's own items enter the noised key sets (docs/privacy.md,
invariant 8), each user is bounded once, globally, whatever block or bundle
it lands in (invariants 1 and 7), and a random draw with two consumers is
checkpointed (invariant 11). These tests check each of those on the new code.
"""

import random
from collections import Counter

import apache_beam as beam
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beam_dpsu import SIPS, SelectItems, ZCDPBudget
from beam_dpsu.beam import sips
from beam_dpsu.beam.bounding import distinct_element_id
from beam_dpsu.beam.histograms import _SampleAndSumFn
from beam_dpsu.beam.randomness import random_fanouts
from beam_dpsu.beam.user_blocks import PackRecordsFn
from beam_dpsu.core.user_blocks import record_blocks
from beam_dpsu.core.policies import weighted_gaussian_weight
from beam_dpsu.core.user_blocks.record_blocks import (RecordBlockBuilder, block_users,
                                                      unpack_block, without_items)
from beam_dpsu.core.sampling import sample_block, sample_user_items
from tests.support.one_pipeline import run_cases

pytestmark = pytest.mark.pipeline

# --- helpers -----------------------------------------------------------------------

ITEMS = st.sampled_from(["a", "b", "c", "d", "e", "f", "g", "h", b"a", b"x", "é", "a b"])
USERS = st.lists(st.sets(ITEMS, max_size=7), max_size=12)


def _block(users, keyed=True):
    builder = RecordBlockBuilder(False, keyed=keyed)
    for key, items in users:
        builder.add(dict.fromkeys(items), False, key)
    return builder.packed()


def _in_block_order(records):
    """Each user's items in the order its block first saw them (the order
    ``block_users`` gives them back in: a user's ids ascend)."""
    seen: dict = {}
    for _, items in records:
        for item in items:
            seen.setdefault(item, len(seen))
    return [(key, sorted(items, key=seen.__getitem__)) for key, items in records]


def _run_dofn(fn, records):
    """A DoFn run over ``records`` as one bundle, outside Beam (values only)."""
    if hasattr(fn, "setup"):
        fn.setup()
    fn.start_bundle()
    out = []
    for record in records:
        out.extend(fn.process(record) or ())
    out.extend(fn.finish_bundle() or ())
    return [getattr(o, "value", o) for o in out]


def _histogram(fn, records):
    """The summed histogram {item: weight} (and {item: holders}) a _SampleAndSumFn emits."""
    weights, holders = Counter(), Counter()
    for _, part in _run_dofn(fn, records):
        if isinstance(part, tuple):
            part, held = part
            holders.update(held)
        for item, weight in part.items():
            weights[item] += weight
    return dict(weights), dict(holders)


def _sampler_fn(max_items, seed, salt="", count_holders=False, packed=True):
    return _SampleAndSumFn(weighted_gaussian_weight, 1 << 18, (max_items,), seed, salt, 64,
                           count_holders=count_holders, packed=packed)


# --- without_items: the removal per block item --------------------------------------

@settings(max_examples=200, deadline=None)
@given(users=USERS, removed=st.sets(ITEMS), again=st.sets(ITEMS), keyed=st.booleans())
def test_removal_from_a_block_is_the_per_user_removal(users, removed, again, keyed):
    # Two rounds of removal from a block (ids renumbered after the first) give
    # every user exactly its own items minus the releases, in the block's order, the
    # users left with nothing dropped, each key still on its own user.
    records = [(f"u{i}" if keyed else None, sorted(items, key=repr))
               for i, items in enumerate(users)]
    block = _block(records, keyed=keyed)
    expected = _in_block_order(records)
    for release in (removed, again):
        expected = [(key, [item for item in items if item not in release])
                    for key, items in expected]
        expected = [(key, items) for key, items in expected if items]
        block = None if block is None else without_items(block, dict.fromkeys(release))
        got = [] if block is None else list(block_users(block))
        # (a user that held nothing from the start may stay while no item of
        # its block is removed: it adds nothing to a histogram, see below)
        assert [(key, items) for key, items in got if items] == expected
        assert all(not items for key, items in got if (key, items) not in expected)


@pytest.mark.parametrize("n_items", [65_535, 65_536, 65_537, 70_001])
def test_removal_across_the_16_bit_boundary_keeps_every_item_right(n_items):
    # Blocks around 2^16 distinct items: 16-bit ids up to 65,536 items, 32-bit
    # beyond; a removal that brings a 32-bit block back to 16 bits renumbers
    # the ids, and every user keeps exactly its items.
    rng = random.Random(n_items)
    vocabulary = [f"w{i}" for i in range(n_items)]
    users = [("big", vocabulary[: n_items - 10])]
    users += [(f"u{j}", rng.sample(vocabulary, 20) + vocabulary[-10:][j % 10:j % 10 + 1])
              for j in range(30)]
    block = _block(users)
    users = _in_block_order(users)
    assert {len(items) for _, items in block_users(block)} >= {n_items - 10}
    assert [items for _, items in block_users(block)] == [items for _, items in users]
    for removed in ({vocabulary[0], vocabulary[-1]}, set(vocabulary[:4000]),
                    set(vocabulary[1::2]), set(vocabulary[: n_items - 10])):
        left = without_items(block, dict.fromkeys(removed))
        expected = [(key, [item for item in items if item not in removed])
                    for key, items in users]
        assert list(block_users(left)) == [(k, items) for k, items in expected if items]
        # and the block keeps working through a second removal
        left2 = without_items(left, {vocabulary[-5]: None})
        assert list(block_users(left2)) == [
            (k, [i for i in items if i != vocabulary[-5]]) for k, items in expected
            if [i for i in items if i != vocabulary[-5]]]


# --- a user is never split over blocks ---------------------------------------------

@pytest.mark.parametrize("elements", [False, True])
@settings(max_examples=60, deadline=None)
@given(users=st.lists(st.sets(st.integers(0, 40).map(str), max_size=12), min_size=1,
                      max_size=40))
def test_packing_never_splits_a_user_over_blocks(elements, users):
    # With tiny blocks (a handful of items or ids) every user still lands whole
    # in exactly one block: the SIPS packing and the auto packing (one
    # PackRecordsFn, keyed or with size bins) both add a user whole, then end the block.
    saved = record_blocks.ITEMS_PER_BLOCK, record_blocks.IDS_PER_BLOCK
    record_blocks.ITEMS_PER_BLOCK, record_blocks.IDS_PER_BLOCK = 5, 7
    try:
        records = ([sorted(items) for items in users] if elements
                   else [(f"u{i}", dict.fromkeys(items, 1)) for i, items in enumerate(users)])
        for fn, unpack in ((PackRecordsFn(elements), unpack_block),
                           (PackRecordsFn(elements, key_seed=3), unpack_block),
                           (PackRecordsFn(elements, edges=(1, 2, 5)),
                            lambda bins_block: unpack_block(bins_block[1]))):
            blocks = _run_dofn(fn, records)
            got = [sorted(user) for block in blocks for user in unpack(block)]
            assert got == [sorted(items) for items in users]  # one record per user, whole
    finally:
        record_blocks.ITEMS_PER_BLOCK, record_blocks.IDS_PER_BLOCK = saved


# --- each user's sample is its own draw, whatever its block ---------------------------

def test_an_unseeded_user_is_sampled_once_from_its_own_items_whatever_its_block(monkeypatch):
    # An unseeded packed block is sampled in numpy (``sampling.sample_block``), a
    # run of users at a time, with no key (no id is drawn or read): every user
    # goes into exactly one sample call, and keeps min(Δ0, |W|) of its own
    # remaining items, nothing of the other users of its block.
    kept_by_user = []

    def recording(ids, sizes, max_items, rng):
        kept, kept_sizes = sample_block(ids, sizes, max_items, rng)
        starts, kept_starts = np.cumsum(sizes) - sizes, np.cumsum(kept_sizes) - kept_sizes
        for start, size, kept_start, kept_size in zip(starts, sizes, kept_starts, kept_sizes):
            own = ids[start:start + size].tolist()
            mine = kept[kept_start:kept_start + kept_size].tolist()
            assert set(mine) <= set(own) and len(set(mine)) == len(mine) == min(size, 3)
            kept_by_user.append((size, len(mine)))
        return kept, kept_sizes

    monkeypatch.setattr("beam_dpsu.core.sampling.sample_block", recording)
    users = [set("abcde"), set("a"), set("cdefgh"), set(), set("xyz"), set("bcdx")]
    for packing in ([users], [users[:2], users[2:]], [[u] for u in users],
                    [list(reversed(users))]):
        kept_by_user.clear()
        fn = _sampler_fn(3, None)
        histogram = _histogram(fn, [_block([(None, sorted(u)) for u in group], keyed=False)
                                    for group in packing])
        assert Counter(kept_by_user) == Counter((len(u), min(len(u), 3)) for u in users)
        # every item some user kept is a key, and only those: here every item
        # held by a user within Δ0, and at most the items of the others
        assert {"a", "x", "y", "z"} <= set(histogram[0]) <= set().union(*users)


@settings(max_examples=40, deadline=None)
@given(users=st.lists(st.sets(ITEMS, min_size=1, max_size=8), min_size=1, max_size=10),
       split=st.integers(0, 10), seed=st.integers(0, 2**32), count_holders=st.booleans())
def test_a_seeded_histogram_does_not_depend_on_the_packing(users, split, seed, count_holders):
    # Seeded: every user's sample is derived from (seed, salt, its key) alone, so
    # one block, two blocks in another order, or one unpacked record per user
    # give the same histogram (the holders of a pre-threshold too).
    keyed = [(f"u{i}", sorted(items, key=repr)) for i, items in enumerate(users)]
    one = _histogram(_sampler_fn(3, seed, "round1", count_holders),
                     [_block(keyed)])
    two = _histogram(_sampler_fn(3, seed, "round1", count_holders),
                     [_block(keyed[split:][::-1]), _block(keyed[:split])])
    unpacked = _histogram(_sampler_fn(3, seed, "round1", count_holders, packed=False),
                          [(key, items) for key, items in keyed])
    for other in (two, unpacked):
        assert other[0].keys() == one[0].keys()
        assert all(abs(other[0][k] - one[0][k]) < 1e-9 for k in one[0])
        assert other[1] == one[1]


# --- D vs D plus one user: keys grow only by the user's own items ------------------

@settings(max_examples=100, deadline=None)
@given(users=st.lists(st.sets(ITEMS, max_size=8), max_size=10),
       extra=st.sets(ITEMS, min_size=1, max_size=8), where=st.integers(0, 10),
       releases=st.lists(st.sets(ITEMS, max_size=4), min_size=3, max_size=3),
       seed=st.integers(0, 2**32), max_items=st.integers(1, 4))
def test_one_more_user_moves_only_its_own_sampled_items_in_every_round(
        users, extra, where, releases, seed, max_items):
    # Rounds of the packed path on D and on D plus one user x, x anywhere in a
    # block, sharing its block with others, given the same earlier releases:
    # each round's histogram of D ∪ {x} differs from D's only on x's sample
    # (its remaining items sampled to Δ0), by exactly x's weight 1/√m; the
    # removal leaves D's users untouched by x.
    records = [(f"u{i}", sorted(items, key=repr)) for i, items in enumerate(users)]
    x = ("x", sorted(extra, key=repr))
    with_x = records[:where] + [x] + records[where:]
    block_d, block_dx = _block(records), _block(with_x)
    remaining_x = x[1]
    for i, release in enumerate(releases):
        salt = "" if i == 0 else f"round{i}"
        h_d = {} if block_d is None else _histogram(_sampler_fn(max_items, seed, salt),
                                                    [block_d])[0]
        h_dx = {} if block_dx is None else _histogram(_sampler_fn(max_items, seed, salt),
                                                      [block_dx])[0]
        sample_x = (set(sample_user_items("x", remaining_x, max_items, None, seed, salt))
                    if remaining_x else set())
        assert set(h_dx) - set(h_d) <= sample_x
        assert set(h_d) <= set(h_dx)
        for item in set(h_dx) | set(h_d):
            diff = h_dx.get(item, 0.0) - h_d.get(item, 0.0)
            expected = weighted_gaussian_weight(len(sample_x)) if item in sample_x else 0.0
            assert abs(diff - expected) < 1e-9
        # the round's release is removed from both
        done = dict.fromkeys(release)
        block_d = None if block_d is None else without_items(block_d, done)
        block_dx = None if block_dx is None else without_items(block_dx, done)
        remaining_x = [item for item in remaining_x if item not in release]
        # (users that held nothing from the start may stay: they add nothing)
        users_d = [] if block_d is None else [u for u in block_users(block_d) if u[1]]
        users_dx = [] if block_dx is None else [u for u in block_users(block_dx) if u[1]]
        # (x's items may come first in its block: the others' items come back in
        # another order, the same items)
        assert [(k, set(items)) for k, items in users_dx if k != "x"] == [
            (k, set(items)) for k, items in users_d]
        assert [set(u[1]) for u in users_dx if u[0] == "x"] == ([set(remaining_x)]
                                                                if remaining_x else [])


# --- end to end: the packed path releases what the join releases --------------------

BUDGET = ZCDPBudget(2.0, 1e-5)


def _dataset(unit, n_users=120, seed=11):
    rng = random.Random(seed)
    vocabulary = [f"w{i}" for i in range(60)]
    weights = [1.0 / (i + 1) for i in range(60)]
    users = []
    for u in range(n_users):
        size = rng.choice([0, 1, 2, 3, 5, 8, 13])
        users.append((f"user{u}", sorted(set(rng.choices(vocabulary, weights, k=size)))))
    if unit == "element":
        return [items for _, items in users]
    return [(user, item) for user, items in users for item in items]


ROUNDS_CASES = [(unit, max_items) for max_items in (3, "auto") for unit in ("user_id", "element")]


def _select(removal, unit, max_items):
    return SelectItems(SIPS(max_items_per_user=max_items, rounds=3, removal=removal),
                       BUDGET, seed=7, privacy_unit=unit)


def _data(unit, shuffle=None):
    data = _dataset(unit)
    if shuffle is not None:
        random.Random(shuffle).shuffle(data)
    return data


def _releases(p, runs):
    """{(run, unit, max_items): the release}: each run of ``runs`` ({run: (removal,
    shuffle)}) of every ROUNDS_CASES case, on one Create per input order and unit."""
    created = {}
    cases = {}
    for run, (removal, shuffle) in runs.items():
        for unit, max_items in ROUNDS_CASES:
            if (unit, shuffle) not in created:
                created[unit, shuffle] = p | f"Create {unit} shuffle={shuffle}" >> beam.Create(
                    _data(unit, shuffle), reshuffle=False)
            cases[run, unit, max_items] = (
                created[unit, shuffle] | f"Select {run} {unit} {max_items}"
                >> _select(removal, unit, max_items))
    return cases


@pytest.fixture(scope="module")
def rounds(tmp_path_factory):
    """The releases of the test below in TWO pipelines (a TestPipeline each cost
    seconds): the join and the side-input removal with the blocks' default sizes in one,
    the side-input removal with tiny blocks (read when the pipeline runs) in the other."""
    released = run_cases(tmp_path_factory.mktemp("rounds"), lambda p: _releases(
        p, {"join": ("join", None), "side": ("side_input", None)}))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(record_blocks, "ITEMS_PER_BLOCK", 7)
        patch.setattr(record_blocks, "IDS_PER_BLOCK", 11)
        released.update(run_cases(tmp_path_factory.mktemp("tiny"), lambda p: _releases(
            p, {"tiny": ("side_input", 3)})))
    return released


@pytest.mark.parametrize("unit", ["user_id", "element"])
@pytest.mark.parametrize("max_items", [3, "auto"])
def test_seeded_side_input_rounds_release_what_the_join_releases(unit, max_items, rounds):
    # The same seeded run with the packed side-input removal (blocks; under
    # auto the blocks that waited for Δ0) and with the join (one record per
    # user): the same samples, the same removals, the same release. With tiny
    # blocks, and with the input in another order, too (invariant 6).
    join = sorted(rounds["join", unit, max_items])
    assert join, "the test needs a non-empty release"
    assert sorted(rounds["side", unit, max_items]) == join
    assert sorted(rounds["tiny", unit, max_items]) == join


def test_seeded_packed_element_keys_are_the_element_ids():
    # Under auto the blocks come unkeyed; a seeded run keys each user by the
    # element id ItemCountsPerUser gives it (a hash of its distinct items).
    block = _block([(None, ["b", "a"]), (None, ["c"]), (None, [])], keyed=False)
    keyed = sips._keyed_by_element_ids(block, 5)
    assert [k for k, _ in block_users(keyed)] == [
        distinct_element_id(["a", "b"], 5), distinct_element_id(["c"], 5),
        distinct_element_id([], 5)]


# --- invariant 11 under auto ---------------------------------------------------------

@pytest.mark.parametrize("removal,seed", [("side_input", None), ("join", None),
                                          ("side_input", 3)])
@pytest.mark.parametrize("unit", ["user_id", "element"])
def test_auto_sips_checkpoints_its_draws(removal, unit, seed):
    # The chosen Δ0 (a side input of the blocks' wait and every round) and each
    # round's release (the output and the next round's removal) are read by
    # several steps: each must be checkpointed before it fans out.
    p = beam.Pipeline()
    data = p | beam.Create([("u1", "a"), ("u2", "a")] if unit == "user_id" else [["a"], ["b"]])
    select = SelectItems(SIPS(max_items_per_user="auto", rounds=3, removal=removal),
                         BUDGET, seed=seed, privacy_unit=unit, non_private_stats=True)
    released = data | select
    _ = released | "Write" >> beam.Map(lambda x: x)
    _ = released | "Count" >> beam.combiners.Count.Globally()
    _ = select.chosen_max_items_per_user | "ChosenOut" >> beam.Map(lambda x: x)
    assert random_fanouts(p) == []


def test_the_packed_blocks_carry_no_draw_and_no_id_unseeded():
    # Unseeded, a block carries no key (nothing random, nothing identifying):
    # the records every round reads are the same whoever re-reads them.
    for fn in (PackRecordsFn(True), PackRecordsFn(False)):
        records = ([["a", "b"], ["c"]] if fn._elements
                   else [("u1", {"a": 1, "b": 1}), ("u2", {"c": 1})])
        (block,) = _run_dofn(fn, records)
        assert [k for k, _ in block_users(block)] == [None, None]
        (again,) = _run_dofn(PackRecordsFn(fn._elements), records)
        assert again == block
