"""Users' records packed for max_items_per_user="auto"
(beam_dpsu.core.user_blocks.record_blocks)."""

from collections import Counter

import numpy as np
import pytest

from beam_dpsu.core import max_items_choice, policies
from beam_dpsu.core.user_blocks.record_blocks import (_HEADER, _JOINED, RecordBlockBuilder,
                                                      _fields, ascending_per_user, block_runs,
                                                      block_users, decode_block, decode_ids,
                                                      encode_ids, unpack_block, with_keys,
                                                      without_items)
from beam_dpsu.core.sampling import sample_block
from beam_dpsu.core.tokenizer import Tokens

EDGES = np.asarray((1, 2, 5, 10), dtype=np.int64)


def _pack(users, occurrences, plain_str=True):
    builder = RecordBlockBuilder(occurrences)
    for items in users:
        builder.add(items, plain_str)
    return builder.build(EDGES)


def test_users_come_back_with_their_distinct_items_and_their_sizes_binned():
    users = [{"cat", "dog"}, set(), {"dog", "x"}, {f"w{i}" for i in range(12)}, {"cat"}]
    bins, block = _pack(users, occurrences=False)
    back = list(unpack_block(block))
    assert [set(u) for u in back] == users
    assert all(type(u) is Tokens and len(u) == len(set(u)) for u in back)
    # the empty user is in no bin, as max_items_choice.size_counts has it
    assert bins.tolist() == max_items_choice.size_counts(map(len, users), EDGES).tolist()
    assert bins.tolist() == [1, 2, 0, 1]


def test_occurrences_come_back_as_repeats():
    users = [{"cat": 3, "dog": 1}, {b"x": 2}, {}]
    bins, block = _pack(users, occurrences=True, plain_str=False)
    back = list(unpack_block(block))
    assert [dict(Counter(u)) for u in back] == users
    # bytes items: plain lists, never Tokens (which promise non-empty plain str)
    assert all(type(u) is list for u in back)
    assert bins.tolist() == [1, 1, 0, 0]  # sizes are distinct items: 2 and 1


def test_an_empty_block_has_no_users():
    bins, block = RecordBlockBuilder(False).build(EDGES)
    assert list(unpack_block(block)) == [] and bins.tolist() == [0, 0, 0, 0]


def test_a_block_of_more_than_65536_items_keeps_32_bit_ids():
    users = [{f"a{i}" for i in range(40_000)}, {f"b{i}" for i in range(40_000)}, {"a7", "b7"}]
    bins, block = _pack(users, occurrences=False)
    assert [set(u) for u in unpack_block(block)] == users
    assert bins.tolist() == [0, 1, 0, 2]


def _keyed(users):
    builder = RecordBlockBuilder(False, keyed=True)
    for key, items in users:
        builder.add(dict.fromkeys(items), True, key)
    return builder.packed()


def test_a_keyed_block_gives_each_user_back_with_its_key_and_its_items_in_block_order():
    users = [("u1", ["b", "a", "c"]), (7, ["a"]), (("t", 1), []), ("u4", ["d", "c"])]
    block = _keyed(users)
    # each user's items in the order the block first saw them (b, a, c, d): the
    # ids ascend within a user (record_blocks.encode_ids)
    back = [("u1", ["b", "a", "c"]), (7, ["a"]), (("t", 1), []), ("u4", ["c", "d"])]
    assert list(block_users(block)) == back
    assert [list(u) for u in unpack_block(block)] == [items for _, items in back]
    assert list(block_users(with_keys(block, [1, 2, 3, 4]))) == [
        (k, items) for k, (_, items) in zip([1, 2, 3, 4], back)]
    builder = RecordBlockBuilder(False)
    builder.add({"x"}, True)
    assert list(block_users(builder.packed())) == [(None, ["x"])]


def test_removal_drops_the_items_the_emptied_users_and_renumbers_what_is_left():
    users = [("u1", ["b", "a", "c"]), ("u2", ["a"]), ("u3", []), ("u4", ["d", "c"])]
    block = _keyed(users)
    left = without_items(block, {"a": None, "x": None})
    # u2 holds nothing left and u3 held nothing: both go (a user with no items
    # adds nothing to later rounds); the others keep their order.
    assert list(block_users(left)) == [("u1", ["b", "c"]), ("u4", ["c", "d"])]
    assert without_items(block, set()) == block
    assert without_items(block, {"a", "b", "c", "d"}) is None
    # the removed item is gone from the block's own item list (ids renumbered)
    assert without_items(left, {"d"}) is not None
    assert list(block_users(without_items(left, {"d"}))) == [("u1", ["b", "c"]), ("u4", ["c"])]


def test_removal_can_bring_32_bit_id_differences_back_to_16_bits():
    users = [("a", [f"a{i}" for i in range(70_000)]), ("b", ["a0", "a69999"]),
             ("c", ["a7", "b7"])]
    block = _keyed(users)
    assert list(block_users(block)) == users
    left = without_items(block, {f"a{i}" for i in range(1, 69_999)})
    assert list(block_users(left)) == [("a", ["a0", "a69999"]), ("b", ["a0", "a69999"]),
                                       ("c", ["b7"])]
    # 69,999 needs 32 bits, the renumbered 1 (a69999 after a0) one byte
    assert _fields(block).large.dtype == np.uint32 and _fields(left).large.dtype == np.uint16


def test_blocks_of_occurrences_refuse_the_distinct_readers():
    builder = RecordBlockBuilder(True)
    builder.add({"x": 2}, True)
    block = builder.packed()
    for read in (lambda: list(block_users(block)), lambda: without_items(block, {"x"})):
        try:
            read()
        except ValueError as error:
            assert "distinct" in str(error)
        else:
            raise AssertionError("a block of occurrences was read as distinct items")
def test_a_decoded_block_holds_the_users_as_arrays():
    users = [{"cat", "dog"}, set(), {"dog", "x"}]
    _, block = _pack(users, occurrences=False)
    decoded = decode_block(block)
    sizes = np.diff(decoded.ends, prepend=0)
    assert sizes.tolist() == [2, 0, 2] and decoded.counts is None
    starts = decoded.ends - sizes
    assert [{decoded.items[i] for i in decoded.ids[s:e]}
            for s, e in zip(starts.tolist(), decoded.ends.tolist())] == users


def _histogram_user_by_user(items, ids, sizes):
    builder = policies.WeightedHistogramBuilder(policies.weighted_gaussian_weight)
    start = 0
    for size in sizes:
        builder.add_distinct([items[i] for i in ids[start:start + size]])
        start += size
    return builder


@pytest.mark.parametrize("fold", [False, True])
def test_a_block_adds_to_the_histogram_what_its_users_add_one_by_one(fold, monkeypatch):
    if fold:  # every size's ids folded into counts at once
        monkeypatch.setattr(policies.WeightedHistogramBuilder, "FOLD_IDS", 1)
    rng = np.random.default_rng(5)
    items = [f"w{i}" for i in range(300)]
    sizes = rng.integers(0, 40, size=200)
    ids = np.concatenate([rng.choice(300, size=s, replace=False) for s in sizes])
    one_by_one = _histogram_user_by_user(items, ids, sizes)
    at_once = policies.WeightedHistogramBuilder(policies.weighted_gaussian_weight)
    at_once.add_block(items, ids, sizes)
    at_once.add_block(items, ids[:0], sizes[:0])  # an empty block adds nothing
    # the same sums bit for bit, and only held items get a key
    assert at_once.histogram() == one_by_one.histogram()
    assert at_once.holders() == one_by_one.holders()
    assert set(at_once.histogram()) == {items[i] for i in ids.tolist()}
    assert at_once.entries == one_by_one.entries


def test_a_block_sample_keeps_delta0_of_each_users_own_items():
    rng = np.random.default_rng(1)
    sizes = np.array([0, 3, 10, 1, 7])
    ids = np.concatenate([rng.choice(50, size=s, replace=False) for s in sizes])
    kept, kept_sizes = sample_block(ids, sizes, 4, rng)
    assert kept_sizes.tolist() == [0, 3, 4, 1, 4] and len(kept) == kept_sizes.sum()
    starts, kept_starts = np.cumsum(sizes) - sizes, np.cumsum(kept_sizes) - kept_sizes
    for s, n, ks, kn in zip(starts, sizes, kept_starts, kept_sizes):
        assert len(set(kept[ks:ks + kn])) == kn and set(kept[ks:ks + kn]) <= set(ids[s:s + n])
    # within Δ0, every user keeps every item (no draw)
    assert sample_block(ids, sizes, 10, rng)[0] is ids


def test_a_block_sample_is_uniform():
    """Each of the 6 pairs of 4 items is a user's sample with probability 1/6. Over
    60,000 users a pair's count is off by more than 6 standard deviations (~548) with
    probability < 2e-9 each, < 1.2e-8 for the six."""
    users = 60_000
    ids = np.tile(np.arange(4), users)
    kept, _ = sample_block(ids, np.full(users, 4), 2, np.random.default_rng())
    pairs = Counter(map(tuple, np.sort(kept.reshape(-1, 2), axis=1).tolist()))
    assert len(pairs) == 6
    sd = (users * (1 / 6) * (5 / 6)) ** 0.5
    assert all(abs(n - users / 6) < 6 * sd for n in pairs.values())


def test_a_block_splits_into_runs_of_whole_users():
    users = [{f"w{i}" for i in range(n)} for n in (3, 0, 4, 9, 2, 2, 1)]
    block = _pack(users, occurrences=False)[1]
    decoded = decode_block(block)
    runs = list(block_runs(block, max_ids=5)[1])
    # at most 5 ids a run, but a user of 9 alone; every user once, in order
    assert [sizes.tolist() for _, sizes in runs] == [[3, 0], [4], [9], [2, 2, 1]]
    assert np.concatenate([ids for ids, _ in runs]).tolist() == decoded.ids.tolist()


@pytest.mark.parametrize("max_ids", [1, 5, 40, 1 << 16])
def test_runs_decoded_from_the_bytes_are_the_decoded_blocks_users(max_ids):
    # ids past one byte, two and 16 bits (second bytes and large differences in
    # several runs)
    users = [{f"w{i}" for i in range(n)} for n in (3, 0, 300, 9, 2, 70_000, 1, 0, 260)]
    users[3] |= {"w299", "w69999"}
    block = _pack(users, occurrences=False)[1]
    decoded = decode_block(block)
    items, runs = block_runs(block, max_ids)
    assert items == decoded.items
    runs = list(runs)
    # every user once, in order, with its ids; runs of whole users, ≤ max_ids ids but
    # a larger user alone, each as long as the next user allows
    assert np.concatenate([ids for ids, _ in runs]).tolist() == decoded.ids.tolist()
    sizes = [sizes.tolist() for _, sizes in runs]
    assert sum(sizes, []) == np.diff(decoded.ends, prepend=0).tolist()
    assert all(sum(run) <= max_ids or len(run) == 1 for run in sizes)
    assert all(sum(run) + after[0] > max_ids for run, after in zip(sizes, sizes[1:]))


# --- the ids' encoding ---------------------------------------------------------------


def _round_trip(users, items):
    sizes = np.array([len(u) for u in users], dtype=np.int64)
    ends = np.cumsum(sizes)
    ids = np.array([i for u in users for i in u], dtype=np.int32)
    ordered, _ = ascending_per_user(ids, ends)
    small, low, large = encode_ids(ordered, ends)
    return small, low, large, decode_ids(small, low, large, ends, items)


def test_ids_come_back_ascending_per_user_across_the_byte_and_16_bit_boundaries():
    # differences of 223 (one byte), 224 and 8,159 (two), 8,160 (the first written
    # whole), 65,535 (16 bits) and 65,536 (32 bits), at a user's first id and after
    # it, empty users between
    users = [[0, 223], [], [224], [3, 2, 1], [8_159, 0], [], [8_160], [65_535, 0], [65_536],
             [7, 7 + 8_160], [5, 5 + 224, 5 + 224 + 8_159]]
    small, low, large, back = _round_trip(users, 70_000)
    starts = np.cumsum([0] + [len(u) for u in users])
    assert [back[a:b].tolist() for a, b in zip(starts[:-1], starts[1:])] == [
        sorted(u) for u in users]
    assert small.dtype == np.uint8 and len(small) == sum(map(len, users))
    assert small.tolist() == [0, 223, 224, 1, 1, 1, 0, 254, 255, 0, 255, 255, 7, 255,
                              5, 224, 254]
    assert low.tolist() == [0, 0xFF, 0, 0xFF] and low.dtype == np.uint8
    assert large.tolist() == [8_160, 65_535, 65_536, 8_160] and large.dtype == np.uint32
    _, _, large16, _ = _round_trip([[0, 223], [8_160, 65_535 + 8_160]], 70_000)
    assert large16.dtype == np.uint16 and large16.tolist() == [8_160, 65_535]


def test_random_users_round_trip_and_most_differences_take_one_byte():
    rng = np.random.default_rng(5)
    items = 60_000
    # a Zipf vocabulary: users hold mostly the frequent (first) ids
    users = [np.unique(rng.zipf(1.3, size=rng.integers(0, 200)) % items).tolist()
             for _ in range(2_000)]
    order = [rng.permutation(u).tolist() for u in users]
    small, low, large, back = _round_trip(order, items)
    assert back.tolist() == [i for u in users for i in u]
    assert len(low) + len(large) < 0.3 * len(small)


def test_counts_follow_their_ids_into_ascending_order():
    ids = np.array([5, 1, 3, 2, 0], dtype=np.int32)
    counts = np.array([50, 10, 30, 20, 1], dtype=np.int32)
    ordered, moved = ascending_per_user(ids, np.array([3, 3, 5]), counts)
    assert ordered.tolist() == [1, 3, 5, 0, 2] and moved.tolist() == [10, 30, 50, 1, 20]


@pytest.mark.parametrize("items", [1, 255, 256, 65_535, 65_536, 65_537])
def test_ids_come_back_in_16_bits_up_to_65536_items_and_32_above(items):
    # one user holding the last item and the first, one holding the last only:
    # the largest difference a block of that many items can hold, at a user's
    # first id and after it
    last = items - 1
    users = [[0, last], [last], [], [0]]
    *_, back = _round_trip(users, items)
    assert back.tolist() == [0, last, last, 0]
    assert back.dtype == (np.uint16 if items <= 1 << 16 else np.int32)


@pytest.mark.parametrize("items, plain_str, joined", [
    (["a", "b"], True, True),
    (["é", "\ud800", "x y", "𝔘"], False, True),  # any str: UTF-8, lone surrogates kept
    (["a\0b", "c"], True, False),  # a NUL in an item: pickled
    (["a", b"b", 3, ("t", 1)], False, False),  # not all str: pickled
    ([""], False, True),
    (["", "a"], False, True),
])
def test_the_item_list_comes_back_exactly_joined_or_pickled(items, plain_str, joined):
    builder = RecordBlockBuilder(False, keyed=True)
    builder.add(dict.fromkeys(items), plain_str, key=("k", 1))
    builder.add({}, plain_str, key=None)
    block = builder.packed()
    fields = _fields(block)
    assert fields.items == items and [type(i) for i in fields.items] == list(map(type, items))
    assert fields.plain_str is plain_str and fields.keys == [("k", 1), None]
    assert bool(_HEADER.unpack_from(block)[0] & _JOINED) is joined
    assert list(block_users(block)) == [(("k", 1), items), (None, [])]


def test_an_empty_block_and_a_block_of_empty_users_read_back():
    for users in ([], [set(), set()]):
        block = _pack(users, occurrences=True)[1]
        decoded = decode_block(block)
        assert decoded.items == [] and decoded.ids.tolist() == [] and (
            np.diff(decoded.ends, prepend=0).tolist() == [0] * len(users))
        assert list(unpack_block(block)) == [[]] * len(users)
        assert [sizes.tolist() for _, sizes in block_runs(block)[1]] == (
            [[0, 0]] if users else [])


def test_counts_come_back_read_in_place():
    _, block = _pack([{"a": 3, "b": 1}, {"b": 2}], occurrences=True)
    decoded = decode_block(block)
    assert decoded.counts.tolist() == [3, 1, 2] and decoded.counts.dtype == np.int32


def test_a_block_is_about_one_byte_per_user_and_item_of_a_zipf_vocabulary():
    rng = np.random.default_rng(6)
    words = [f"w{i}" for i in range(20_000)]
    builder = RecordBlockBuilder(False)
    pairs = 0
    for _ in range(3_000):
        user = {words[i % len(words)] for i in rng.zipf(1.2, size=150)}
        pairs += len(user)
        builder.add(user, True)
    block = builder.packed()
    decoded = decode_block(block)
    fields = _fields(block)
    # the ids cost less than 1.5 bytes per pair (2 as 16-bit ids)
    assert fields.small.nbytes + fields.low.nbytes + fields.large.nbytes < 1.5 * pairs
    assert len(fields.small) == pairs
    assert [set(u) for u in unpack_block(block)][:3] == [
        {decoded.items[i] for i in decoded.ids[a:b]}
        for a, b in zip([0] + decoded.ends[:2].tolist(), decoded.ends[:3].tolist())]
