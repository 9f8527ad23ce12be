"""Users' records packed for max_items_per_user="auto" (beam_dpsu.core.record_blocks)."""

from collections import Counter

import numpy as np

from beam_dpsu.core import max_items_choice
from beam_dpsu.core.record_blocks import RecordBlockBuilder, unpack_block
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
