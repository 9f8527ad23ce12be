"""The per-user blocks in Beam (beam_dpsu.beam.user_blocks, and the blocks of
beam_dpsu.beam.sequential).

The sequential policies' user blocks: a shard's histogram from its users packed
into blocks is the policy histogram of its users in keyed-hash order, bit for
bit, however the users fell into blocks and whatever order the blocks came in.

``PackRecordsFn``: users' records packed into blocks, for SIPS's rounds and for the
records that wait for the choice of Δ0 (the packing itself is tested with the rounds
and the choice, in test_packed_sips_rounds.py and test_max_items_choice.py).

``UserItemsCoder`` gives back every record it writes, whatever its ids and items, and
the SIPS rounds' records between stages are coded with it."""

import hashlib
import hmac

import apache_beam as beam
import numpy as np
import pytest
from tests.support.runner import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import beam_dpsu.beam.user_blocks
from beam_dpsu.beam import bounding, sequential
from beam_dpsu.beam.histograms import shard_of_item
from beam_dpsu.beam.user_blocks import PackRecordsFn, UserItems, UserItemsCoder
from beam_dpsu.beam.windowing import in_global_window
from beam_dpsu.core.hashing import canonical_bytes
from beam_dpsu.core.policies import greedy_update, l1_descent, l2_descent, policy_histogram
from beam_dpsu.core.tokenizer import tokenize
from beam_dpsu.core.user_blocks import decode_user_block, record_blocks
from beam_dpsu.beam.sequential import (SequentialPolicyHistogram, UserBlockBuilder,
                                  shard_policy_histogram, user_order_key)
from tests.support.byte_cases import blob, item_list, ordered_user
from tests.support.histograms import sharded_policy_histogram
from tests.support.hypothesis_profiles import examples

pytestmark = pytest.mark.pipeline

KEY = b"k" * 32
POLICIES = [l1_descent, l2_descent, greedy_update]
ITEMS = ["a", "b", "c", "dd", "é", "f", "g", b"a", b"\x00", "a\x00"]
LIST_BYTES = 4  # 2^32 / 7 sizes > 10! orders


@st.composite
def user_lists(draw, min_users, max_users):
    """min_users..max_users users' lists, decoded from one blob (tests/support/byte_cases.py).

    Case space: each list 0..6 distinct items of ITEMS in any order. Zero
    bytes: empty lists.
    """
    n = draw(st.integers(min_users, max_users))
    data = draw(blob(max_users * LIST_BYTES))
    return [ordered_user(data[i * LIST_BYTES:(i + 1) * LIST_BYTES], ITEMS, 6, min_size=0)
            for i in range(n)]


def cut_list(max_cuts, max_cut):
    """0..max_cuts cuts, each 0..max_cut: one blob."""
    return blob(1 + max_cuts).map(
        lambda chunk: item_list(chunk, range(max_cut + 1), max_cuts, min_size=0))


def packed(users, cuts):
    """(order key, list) users packed into blocks cut at ``cuts``."""
    bounds = sorted({0, len(users), *[c % (len(users) + 1) for c in cuts]})
    blocks = []
    for lo, hi in zip(bounds, bounds[1:]):
        builder = UserBlockBuilder()
        for order_key, items in users[lo:hi]:
            if items:
                builder.add(order_key, items)
        blocks.append(builder.encode())
    return blocks


def permuted(blocks, seed):
    return [blocks[i] for i in np.random.default_rng(seed).permutation(len(blocks))]


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(user_lists(0, 30), cut_list(5, 40),
       st.integers(0, 2), st.floats(0.5, 4.0), st.integers(0, 2 ** 32 - 1))
def test_blocks_give_the_policy_histogram_in_key_order_bit_for_bit(lists, cuts, policy, cutoff,
                                                                    seed):
    update = POLICIES[policy]
    users = [(user_order_key(f"user{i}", KEY), items) for i, items in enumerate(lists)]
    expected = policy_histogram([items for _, items in sorted(users, key=lambda u: u[0])],
                                update, cutoff)
    got = shard_policy_histogram(permuted(packed(users, cuts), seed), update, cutoff)
    # Equal as dicts: the same keys (every listed item, zero weights included) and
    # the same floats exactly.
    assert got == expected
    assert set(got) == {item for items in lists for item in items}


def test_order_keys_sort_as_bytes_across_both_words():
    # Keys that tie on the first 8 bytes, differ only in trailing zero bytes or in
    # the high bit: the visiting order is the bytes' lexicographic order.
    keys = [b"\x00" * 16, b"\x00" * 15 + b"\x01", b"\x80" + b"\x00" * 15,
            b"a" * 8 + b"\x00" * 8, b"a" * 8 + b"\xff" * 8, b"a" * 8 + b"\x7f" + b"\x00" * 7,
            b"\x7f" + b"\xff" * 15, b"a" * 16]
    lists = [["x", f"u{i}"] for i in range(len(keys))]  # "x" shared: order matters
    users = list(zip(keys, lists))
    expected = policy_histogram([items for _, items in sorted(users)], l1_descent, 1.5)
    for seed in range(5):
        got = shard_policy_histogram(permuted(packed(users, [3, 5]), seed), l1_descent,
                                     1.5)
        assert got == expected


@given(user_lists(2, 8), cut_list(3, 10), st.integers(0, 2 ** 32 - 1))
@settings(max_examples=examples(200), deadline=None)
def test_equal_order_keys_are_visited_by_their_lists_whatever_the_blocks(lists, cuts, seed):
    # One user id in two records breaks the input's contract, but the result
    # still depends only on the records: ties go by the lists' canonical bytes.
    tied = b"t" * 16
    users = [(tied, items) for items in lists] + [(b"a" * 16, ["a", "b"])]
    by_content = sorted(lists, key=lambda items: tuple(map(canonical_bytes, items)))
    expected = policy_histogram([["a", "b"]] + by_content, greedy_update, 2.5)
    assert shard_policy_histogram(permuted(packed(users, cuts), seed), greedy_update,
                                  2.5) == expected


def test_no_blocks_and_empty_blocks_give_an_empty_histogram():
    assert shard_policy_histogram([], l2_descent, 2.0) == {}
    assert shard_policy_histogram([UserBlockBuilder().encode()] * 3, l2_descent, 2.0) == {}


def test_a_block_stores_each_distinct_item_once_and_lists_as_16_bit_ids():
    builder = UserBlockBuilder()
    builder.add(b"a" * 16, ["x", "y", "z"])
    builder.add(b"b" * 16, ["y", "x"])
    keys, items, listed, lengths = decode_user_block(builder.encode())
    assert keys == b"a" * 16 + b"b" * 16 and items == ["x", "y", "z"]
    assert listed.dtype == np.uint16 and listed.tolist() == [0, 1, 2, 1, 0]
    assert lengths.tolist() == [3, 2]


def test_an_order_key_of_another_length_is_refused():
    with pytest.raises(ValueError, match="16 bytes, got 8"):
        UserBlockBuilder().add(b"k" * 8, ["x"])


# -- the Beam transform -----------------------------------------------------------------------

def users(n=300):
    rng = np.random.default_rng(5)
    return [(f"user{u}", [f"w{int(w)}" for w in
                          dict.fromkeys(rng.zipf(1.5, size=int(rng.integers(0, 9))) % 50)])
            for u in range(n)]


@pytest.mark.parametrize("limit", ["USER_BLOCK_ITEMS", "USER_BLOCK_DISTINCT"])
@pytest.mark.parametrize("shards", [1, 3])
def test_blocks_sent_mid_bundle_give_the_reference_histogram(monkeypatch, shards, limit):
    # A worker sends its blocks once it holds USER_BLOCK_ITEMS listed items, or
    # once a block holds USER_BLOCK_DISTINCT distinct items: with a limit of 7, a
    # bundle sends dozens of blocks per shard, and the histogram is still the
    # pure reference's, bit for bit.
    monkeypatch.setattr(sequential, limit, 7)
    named = users()
    expected = sharded_policy_histogram(named, l2_descent, 2.0, shards, KEY)
    with TestPipeline() as p:
        hist = (p | beam.Create(named)
                | SequentialPolicyHistogram(l2_descent, 2.0, KEY, shards))

        def same(pairs):
            got = dict(pairs)
            assert len(got) == len(pairs) and set(got) == set(expected)
            if shards == 1:
                assert got == expected
            assert all(got[k] == pytest.approx(w, abs=1e-12) for k, w in expected.items())

        assert_that(hist, same)


def test_item_shards_split_the_same_histogram_into_one_dict_per_item_shard():
    named = users()
    expected = sharded_policy_histogram(named, l1_descent, 1.5, 2, KEY)
    with TestPipeline() as p:
        shards = (p | beam.Create(named)
                  | SequentialPolicyHistogram(l1_descent, 1.5, KEY, 2, item_shards=8))

        def one_dict_per_shard(elements):
            assert len({shard for shard, _ in elements}) == len(elements) <= 8
            got = {}
            for shard, histogram in elements:
                assert all(shard_of_item(item, 8) == shard for item in histogram)
                got.update(histogram)
            assert set(got) == set(expected)
            assert all(got[k] == pytest.approx(w, abs=1e-12) for k, w in expected.items())

        assert_that(shards, one_dict_per_shard)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "8"])
def test_item_shards_must_be_a_positive_int(bad):
    with pytest.raises(ValueError, match="item_shards must be an int >= 1"):
        SequentialPolicyHistogram(l1_descent, 1.5, KEY, 1, item_shards=bad)


def test_bad_sample_elements_and_seed_are_named():
    # A bad sample_elements is named as such (not as max_items_per_user), and a seed
    # without sample_elements is refused rather than taken unchecked and never used.
    with pytest.raises(ValueError, match="sample_elements must be >= 1, got 0"):
        SequentialPolicyHistogram(l1_descent, 1.5, KEY, sample_elements=0)
    with pytest.raises(TypeError, match="sample_elements must be an int"):
        SequentialPolicyHistogram(l1_descent, 1.5, KEY, sample_elements=2.5)
    with pytest.raises(ValueError, match="seed must be None or a non-negative int"):
        SequentialPolicyHistogram(l1_descent, 1.5, KEY, sample_elements=3, seed=-1)
    with pytest.raises(ValueError, match="takes a seed only with sample_elements"):
        SequentialPolicyHistogram(l1_descent, 1.5, KEY, seed=7)


def test_tied_lists_with_lone_surrogates_are_ordered_without_an_error():
    # A tie key that encoded items strictly would raise, on a lone surrogate, an
    # error quoting the item's character.
    users = [(b"t" * 16, ["\ud800", "x"]), (b"t" * 16, ["x"])]
    for blocks in (packed(users, []), packed(users[::-1], [])):
        got = shard_policy_histogram(blocks, l2_descent, 2.0)
        assert set(got) == {"\ud800", "x"}
    assert shard_policy_histogram(packed(users, []), l2_descent, 2.0) == \
        shard_policy_histogram(packed(users[::-1], []), l2_descent, 2.0)


def test_user_ids_with_lone_surrogates_get_order_keys_without_an_error():
    # A keyed hash that encoded ids strictly would raise an error quoting the id.
    assert user_order_key("\ud800", KEY) != user_order_key("\ud801", KEY)
    assert user_order_key("é", KEY) == user_order_key("é", KEY)


USER_ID = st.one_of(st.text(max_size=12), st.binary(max_size=12), st.integers(0, 1 << 130),
                    st.tuples(st.text(max_size=3), st.integers()))


@settings(max_examples=examples(300), deadline=None)
@given(key=st.binary(max_size=100), user_ids=st.lists(USER_ID, max_size=8))
def test_the_keyed_mac_made_once_gives_every_user_its_hmac(key, user_ids):
    # The packing step copies one keyed HMAC state per user instead of keying a
    # fresh one: the order keys and shards must be those of the HMAC itself,
    # for keys shorter and longer than SHA-256's block, user after user.
    mac = sequential._KeyedMac(key)
    for user_id in user_ids + user_ids:
        assert mac(user_id) == hmac.new(key, canonical_bytes(user_id), hashlib.sha256).digest()


def _record_blocks(users_items, cuts):
    """Users' item sets packed into record blocks (auto's waiting form), cut at ``cuts``."""
    from beam_dpsu.core.user_blocks.record_blocks import RecordBlockBuilder
    edges = np.asarray((1, 2, 5), dtype=np.int64)
    bounds = sorted({0, len(users_items), *cuts})
    blocks = []
    for lo, hi in zip(bounds, bounds[1:]):
        builder = RecordBlockBuilder(False)
        for items in users_items[lo:hi]:
            builder.add(set(items), True)
        blocks.append(builder.build(edges))
    return blocks


def _users_of(user_blocks):
    users = []
    for block in user_blocks:
        keys, items, listed, lengths = decode_user_block(block)
        starts = np.cumsum(lengths) - lengths
        users += [(keys[16 * u:16 * u + 16], [items[i] for i in listed[s:s + n].tolist()])
                  for u, (s, n) in enumerate(zip(starts.tolist(), lengths.tolist()))]
    return sorted(users)


@pytest.mark.parametrize("seed", [None, 11])
def test_one_shard_samples_and_packs_its_record_blocks_as_the_packing_step_does(seed):
    # With one shard, auto's record blocks cross the shuffle as they are and
    # the shard samples and packs their users itself. It must visit the users the
    # packing step would have sent: each its own Δ0-sample, once (seeded: the same
    # users, keys and lists, and so the same histogram bit for bit).
    rng = np.random.default_rng(4)
    users = [[f"u{u}:{j}" for j in range(n)] + ["a", "b"][: n % 3]
             for u, n in enumerate(rng.integers(0, 9, size=200).tolist())]
    blocks = _record_blocks(users, [70, 150])
    d0 = (3, 5)
    sent = sequential._PolicyRecordBlocksFn(1, KEY, d0, seed)
    sent.setup()
    sent.start_bundle()
    out = [w.value for block in blocks for w in sent.process(block, 1)]
    out += [w.value for w in sent.finish_bundle()]
    assert {shard for shard, _ in out} == {0}
    packer = sequential._PolicyRecordBlocksFn(1, KEY, d0, seed)
    packer.setup()
    here = _users_of(packer.packed_users([block for _, block in blocks], 1))
    assert len(here) == sum(1 for items in users if items)
    by_owner = {}
    for _, listed in here:
        owners = {item.split(":")[0] for item in listed if ":" in item}
        (owner,) = owners
        assert owner not in by_owner and len(set(listed)) == len(listed)
        by_owner[owner] = listed
        held = users[int(owner[1:])]
        assert set(listed) <= set(held) and len(listed) == min(5, len(held))
    if seed is None:
        return
    assert here == _users_of([block for _, block in out])
    for holders in (False, True):
        fn = sequential._PolicyRecordShardFn(
            sequential._PolicyRecordBlocksFn(1, KEY, d0, seed), True, l2_descent, (1.0, 2.5), 4,
            holders)
        fn.setup()
        two_steps = sequential._PolicyHistogramFn(l2_descent, (1.0, 2.5), 4, holders)
        assert list(fn.process((0, [block for _, block in blocks]), 1)) == list(
            two_steps.process((0, [block for _, block in out]), 1))


@pytest.mark.parametrize("shards", [1, 2])
def test_auto_record_blocks_reach_one_shard_unpacked(shards):
    # One shard: the record blocks are gathered as they are (no packing step, whose
    # user blocks crossed the shuffle); P > 1: each user's shard is drawn first.
    pipeline = beam.Pipeline()
    _ = (pipeline
         | beam.Create(_record_blocks([["a", "b"], ["c"]], []))
         | SequentialPolicyHistogram(l2_descent, 2.0, KEY, shards, item_shards=4,
                                     sample_elements=3, blocks=True))
    labels = {t.unique_name.split("/")[-1]
              for t in pipeline.to_runner_api().components.transforms.values()}
    assert ("PackUserBlocks" in labels) == (shards > 1)
    assert ("ToTheShard" in labels) == (shards == 1)


@pytest.mark.parametrize("shards", [1, 2])
def test_a_fixed_sample_with_a_chosen_cutoff_runs_on_one_shard_as_on_two(shards):
    # With one shard, _PolicyRecordShardFn must sample by the sample's own index (0
    # when sample_elements is one fixed Δ0, as the packing step reads it), not by the
    # cutoff's chosen index (self._samples[chosen]): a fixed sample_elements with a
    # cutoff chosen when the pipeline runs would run with P = 2 but, with P = 1, raise
    # IndexError (a traceback) in ApplyPolicyInOrder at a chosen index of 1. Either
    # passes: the pair refused when the transform is built (naming the index), or
    # the sample taken by Δ0's own index.
    from beam_dpsu.beam.max_items_choice.chosen import Chosen
    users = [["a", "b"], ["c"]]  # disjoint lists: the histogram is the same in any order
    pipeline = TestPipeline()
    index = pipeline | "Index" >> beam.Create([1])
    try:
        transform = SequentialPolicyHistogram(l2_descent, Chosen((1.0, 2.0), index), KEY,
                                              shards, sample_elements=3, blocks=True)
    except ValueError as error:  # refused when built: the same for every P
        assert "index" in str(error)
        return
    out = pipeline | beam.Create(_record_blocks(users, [])) | transform
    expected = policy_histogram(users, l2_descent, 2.0)
    assert_that(out, lambda got: _same_histogram(got, expected))
    pipeline.run().wait_until_finish()


def _same_histogram(got, expected):
    assert dict(got) == pytest.approx(expected) and len(got) == len(expected), got


# --- PackRecordsFn: users' records packed into blocks ------------------------------------

def test_a_tokens_element_is_checked_once_and_every_block_is_stamped_alike(monkeypatch):
    # SIPS's packing checks a Tokens element's items for plain str once (in
    # element_distinct_items, not again before packing), and sends every block, full
    # or last, stamped alike: the timestamp of the element that filled a block would
    # tell when that user came.
    checked = []
    check = bounding.plain_str_items
    monkeypatch.setattr(bounding, "plain_str_items",
                        lambda distinct: checked.append(1) or check(distinct))
    monkeypatch.setattr(record_blocks, "IDS_PER_BLOCK", 3)
    records = [tokenize("a b c"), tokenize("d e"), tokenize("f")]
    for fn in (PackRecordsFn(True), PackRecordsFn(True, key_seed=3),
               PackRecordsFn(True, edges=(1, 2, 5))):
        checked.clear()
        fn.start_bundle()
        sent = [out for record in records for out in fn.process(record) or ()]
        sent += list(fn.finish_bundle() or ())
        assert len(checked) == len(records)
        assert len(sent) == 2  # one block full after the first user, one at the end
        reference = in_global_window(None)
        assert all((out.timestamp, out.windows) == (reference.timestamp, reference.windows)
                   for out in sent)


def test_keyed_blocks_hold_no_occurrences():
    with pytest.raises(ValueError, match="no occurrences"):
        PackRecordsFn(True, occurrences=True, key_seed=3)


# --- UserItemsCoder: the records between stages ------------------------------------------

TEXT = st.text(alphabet=st.characters(blacklist_categories=()), min_size=0, max_size=6)
CODED_USER_ID = st.one_of(st.integers(-2 ** 130, 2 ** 130), TEXT, st.binary(max_size=8),
                    st.tuples(TEXT, st.integers(0, 9)), st.booleans())
CODED_ITEMS = st.one_of(st.lists(TEXT, max_size=8, unique=True),  # NULs and lone surrogates
                  st.lists(st.one_of(TEXT, st.binary(max_size=5)), max_size=8, unique=True))


@settings(max_examples=examples(500), deadline=None)
@given(CODED_USER_ID, CODED_ITEMS)
def test_every_record_comes_back_equal_with_its_types(user_id, items):
    coder = UserItemsCoder()
    record = UserItems(user_id, tuple(items))
    back = coder.decode(coder.encode(record))
    assert isinstance(back, UserItems)
    assert back == record
    assert type(back[0]) is type(user_id)
    assert [type(i) for i in back[1]] == [type(i) for i in items]


def test_plain_str_items_are_one_joined_string_and_random_ids_16_bytes():
    coder = UserItemsCoder()
    data = coder.encode(UserItems((1 << 127) + 5, ("ab", "é", "\ud800")))
    assert data == b"\x00" + ((1 << 127) + 5).to_bytes(16, "big") + b"j" + \
        "ab\x00é\x00\ud800".encode("utf-8", "surrogatepass")
    # An item holding NUL, a bytes item, no items: pickled.
    for items in (("a\x00b", "c"), ("a", b"b"), ()):
        data = coder.encode(UserItems("u", items))
        assert data[:6] == b"\x01\x00\x00\x00\x01u"  # a str id: its length and UTF-8
        assert data[6:7] == b"p" and coder.decode(data) == ("u", items)


def test_numpy_str_items_come_back_as_plain_str():
    coder = UserItemsCoder()
    items = tuple(np.array(["x", "yz"]))
    back = coder.decode(coder.encode(UserItems(7, items)))
    assert back == (7, ("x", "yz")) and all(type(i) is str for i in back[1])


def test_the_registry_gives_pcollections_typed_user_items_this_coder():
    assert isinstance(beam.coders.registry.get_coder(UserItems), UserItemsCoder)
    assert UserItemsCoder() == UserItemsCoder()
    assert hash(UserItemsCoder()) == hash(UserItemsCoder())


def test_user_items_pickle_as_themselves():
    import pickle
    record = UserItems("u", ("a", "b"))
    back = pickle.loads(pickle.dumps(record))
    assert type(back) is UserItems and back == record


def test_records_written_between_stages_go_through_the_coder(monkeypatch):
    # A side input forces a stage boundary, as between SIPS rounds.
    coded = []
    encode = UserItemsCoder.encode
    monkeypatch.setattr(UserItemsCoder, "encode",
                        lambda self, r: coded.append(r) or encode(self, r))
    users = [UserItems(f"u{i}", tuple(f"w{j}" for j in range(i % 5))) for i in range(40)]
    with TestPipeline() as p:
        side = p | "Side" >> beam.Create(["w1"])
        kept = (p | beam.Create(users)
                | beam.Map(lambda r, drop: UserItems(r[0], tuple(i for i in r[1] if i not in drop)),
                           drop=beam.pvalue.AsList(side)).with_output_types(UserItems)
                | beam.Map(lambda r: (r[0], len(r[1]))))
        assert_that(kept, equal_to([(u, max(0, len(items) - ("w1" in items)))
                                    for u, items in users]))
    assert coded and all(isinstance(r, UserItems) for r in coded)
    assert beam_dpsu.beam.user_blocks.UserItemsCoder is UserItemsCoder
