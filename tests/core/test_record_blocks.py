"""Users' records packed for max_items_per_user="auto" (beam_dpsu.core.record_blocks)."""

import pickle
from collections import Counter

import numpy as np

from beam_dpsu.core import max_items_choice
from beam_dpsu.core.record_blocks import (RecordBlockBuilder, block_users, unpack_block,
                                          with_keys, without_items)
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


def test_a_keyed_block_gives_each_user_back_with_its_key_and_its_items_in_order():
    users = [("u1", ["b", "a", "c"]), (7, ["a"]), (("t", 1), []), ("u4", ["d", "c"])]
    block = _keyed(users)
    assert list(block_users(block)) == users
    assert [list(u) for u in unpack_block(block)] == [items for _, items in users]
    assert list(block_users(with_keys(block, [1, 2, 3, 4]))) == [
        (k, items) for k, (_, items) in zip([1, 2, 3, 4], users)]
    builder = RecordBlockBuilder(False)
    builder.add({"x"}, True)
    assert list(block_users(builder.packed())) == [(None, ["x"])]


def test_removal_drops_the_items_the_emptied_users_and_renumbers_what_is_left():
    users = [("u1", ["b", "a", "c"]), ("u2", ["a"]), ("u3", []), ("u4", ["d", "c"])]
    block = _keyed(users)
    left = without_items(block, {"a": None, "x": None})
    # u2 holds nothing left and u3 held nothing: both go (a user with no items
    # adds nothing to later rounds); the others keep their order.
    assert list(block_users(left)) == [("u1", ["b", "c"]), ("u4", ["d", "c"])]
    assert without_items(block, set()) == block
    assert without_items(block, {"a", "b", "c", "d"}) is None
    # the removed item is gone from the block's own item list (ids renumbered)
    assert without_items(left, {"d"}) is not None
    assert list(block_users(without_items(left, {"d"}))) == [("u1", ["b", "c"]), ("u4", ["c"])]


def test_removal_from_a_32_bit_block_can_bring_it_back_to_16_bits():
    users = [("a", [f"a{i}" for i in range(40_000)]), ("b", [f"b{i}" for i in range(40_000)]),
             ("c", ["a7", "b7"])]
    block = _keyed(users)
    left = without_items(block, {f"b{i}" for i in range(40_000)})
    assert list(block_users(left)) == [("a", users[0][1]), ("c", ["a7"])]
    # (fields: items, ids, the ids' numpy type, …)
    assert pickle.loads(block)[2] == "i" and pickle.loads(left)[2] == "H"


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
