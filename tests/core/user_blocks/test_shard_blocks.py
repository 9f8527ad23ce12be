"""A sequential policy's users packed a block at a time
(beam_dpsu.core.user_blocks.shard_blocks)."""

import numpy as np
import pytest

from beam_dpsu.core.user_blocks import shard_blocks
from beam_dpsu.core.user_blocks.shard_blocks import SMALL_IDS, UserBlockBuilder, decode_user_block


def test_users_added_as_a_block_encode_as_users_added_one_by_one():
    rng = np.random.default_rng(3)
    items = [f"w{i}" for i in range(50)]
    lengths = rng.integers(1, 12, size=30)
    ids = np.concatenate([rng.choice(50, size=n, replace=False) for n in lengths])
    keys = rng.bytes(16 * len(lengths))
    one_by_one, at_once = UserBlockBuilder(), UserBlockBuilder()
    start = 0
    for user, n in enumerate(lengths.tolist()):
        one_by_one.add(keys[16 * user:16 * user + 16], [items[i] for i in ids[start:start + n]])
        start += n
    at_once.add_block(keys, items, ids, lengths)
    # The same block, byte for byte, but for the ids: at once, items are numbered
    # by their position in ``items``; one by one, in order of first sight.
    a_keys, a_items, a_listed, a_lengths = _decoded(one_by_one)
    b_keys, b_items, b_listed, b_lengths = _decoded(at_once)
    assert a_keys == b_keys and a_lengths.tolist() == b_lengths.tolist()
    assert [a_items[i] for i in a_listed] == [b_items[i] for i in b_listed]
    assert set(b_items) == {items[i] for i in ids.tolist()}  # only listed items


def _decoded(builder):
    return decode_user_block(builder.encode())


def test_a_block_needs_one_order_key_per_user():
    with pytest.raises(ValueError, match="order keys"):
        UserBlockBuilder().add_block(b"k" * 16, ["a", "b"], np.array([0, 1]), np.array([1, 1]))


def test_a_block_refuses_lengths_that_do_not_fit_or_do_not_add_up_to_its_ids():
    # 2**32 + 2 as int32 is 2: cast silently, one user's list would take in the next's.
    with pytest.raises(OverflowError, match="2\\*\\*31"):
        UserBlockBuilder().add_block(b"k" * 16, ["a", "b"], np.array([0, 1]),
                                     np.array([2 ** 32 + 2], dtype=np.int64))
    with pytest.raises(ValueError, match="3 ids.*lengths add up to 2"):
        UserBlockBuilder().add_block(b"k" * 32, ["a", "b"], np.array([0, 1, 0]), np.array([1, 1]))


def test_users_added_one_by_one_and_as_blocks_keep_their_order():
    mixed, one_by_one = UserBlockBuilder(), UserBlockBuilder()
    keys = [bytes([k]) * 16 for k in range(4)]
    mixed.add(keys[0], ["a", "b"])
    mixed.add_block(keys[1] + keys[2], ["b", "c", "d"], np.array([2, 0, 1]), np.array([1, 2]))
    mixed.add(keys[3], ["d"])
    for key, items in zip(keys, (["a", "b"], ["d"], ["b", "c"], ["d"])):
        one_by_one.add(key, items)
    a, b = _decoded(mixed), _decoded(one_by_one)
    assert a[0] == b[0] and a[3].tolist() == b[3].tolist() == [2, 1, 2, 1]
    assert [a[1][i] for i in a[2]] == [b[1][i] for i in b[2]] == ["a", "b", "d", "b", "c", "d"]


@pytest.mark.parametrize("distinct, id_bytes", [(SMALL_IDS, 2), (SMALL_IDS + 1, 4)])
def test_a_block_lists_16_bit_ids_up_to_small_ids_distinct_items_else_32_bit(distinct, id_bytes):
    items = [f"w{i}" for i in range(distinct)]
    builder = UserBlockBuilder()
    builder.add(b"a" * 16, items[:distinct // 2])
    builder.add_block(b"b" * 16 + b"c" * 16, items, np.arange(distinct)[::-1],
                      np.array([distinct - distinct // 2 - 1, distinct // 2 + 1]))
    assert builder.distinct == distinct
    keys, block_items, listed, lengths = decode_user_block(builder.encode())
    assert listed.itemsize == id_bytes and not listed.flags.writeable  # a view of the bytes
    assert keys == b"a" * 16 + b"b" * 16 + b"c" * 16
    assert lengths.tolist() == [distinct // 2, distinct - distinct // 2 - 1, distinct // 2 + 1]
    assert [block_items[i] for i in listed.tolist()] == items[:distinct // 2] + items[::-1]


def test_an_empty_block_decodes_to_no_users():
    keys, items, listed, lengths = decode_user_block(UserBlockBuilder().encode())
    assert (keys, items, listed.tolist(), lengths.tolist()) == (b"", [], [], [])


def test_shard_ids_take_four_bytes_unless_the_shard_outgrows_int32():
    assert shard_blocks._as_ids([0, 5], 6).dtype == np.int32
    assert shard_blocks._as_ids([0, 2 ** 31 - 1], 2 ** 31).dtype == np.int32
    wide = shard_blocks._as_ids([0, 2 ** 31], 2 ** 31 + 1)
    assert wide.dtype == np.int64 and wide[1] == 2 ** 31


def test_a_shard_puts_lists_in_its_numbering_without_an_array_of_its_listed_ids():
    # The shard must not write every listed id once more in its own numbering (4 bytes
    # each, 28 MB for IMDb at the Δ0 that auto chose) on top of the blocks it reads in
    # place. 2^20 listed ids over 200 items: the traced peak is 4.9 MiB with that array
    # (4 MiB of it); without it, the users' order and per-block arrays (0.9 MiB).
    import tracemalloc

    from beam_dpsu.core.policies import l2_descent, policy_histogram

    rng = np.random.default_rng(5)
    items = [f"w{i}" for i in range(200)]
    blocks, users = [], []
    for _ in range(8):
        builder = UserBlockBuilder()
        for _ in range(1024):
            listed = [items[i] for i in rng.choice(200, size=128, replace=False).tolist()]
            key = rng.bytes(16)
            builder.add(key, listed)
            users.append((key, listed))
        blocks.append(builder.encode())
    tracemalloc.start()
    try:
        got = shard_blocks.shard_policy_histogram(blocks, l2_descent, 3.0)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 << 20, peak
    assert got == policy_histogram([listed for _, listed in sorted(users)], l2_descent, 3.0)
