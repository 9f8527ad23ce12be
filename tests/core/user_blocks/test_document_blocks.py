"""DPNE's level work on blocks of users (``beam_dpsu.core.user_blocks.document_blocks``): the
pure core.

The reference is the per-user rule: a user's distinct valid k-grams
(``kgrams.is_valid`` on every k-gram of its documents), sampled to Δ_k, each
weighted 1/√|sample| (``tests.support.histograms.weighted_histogram``).

False-failure rate: only ``test_samples_are_uniform`` is statistical; its 8
two-sided checks at 1e-8 per tail fail by chance with probability < 2e-7.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from beam_dpsu.core import hashing
from beam_dpsu.core.sampling import sample_user_items
from beam_dpsu.core.user_blocks.document_blocks import (BadToken, BlockBuilder, _gram_keys,
                                                        level1_sums, level_sums,
                                                        sampled_weighted_sums)
from beam_dpsu.core.kgrams import is_valid, kgrams_of
from beam_dpsu.core.policies import weighted_gaussian_weight
from tests.support.byte_cases import blob, item_list, nth_permutation
from tests.support.document_blocks import encode_block
from tests.support.histograms import histogram_distance, weighted_histogram
from tests.support.hypothesis_profiles import examples
from tests.support.kgram_sets import TOKENS, released_sets

BIG = 10_000  # a Δ no user reaches: nothing is sampled
# Users' documents decoded from one blob (tests/support/byte_cases.py), a few
# draws per case where lists of lists of tokens took one or two per token.
# Case space: 0..6 users, each a tuple of 0..3 documents, each a tuple of 0..8
# tokens of TOKENS. Zero bytes: users without documents.
MAX_USERS, MAX_DOCS, MAX_DOC = 6, 3, 8
DOC_BYTES = 1 + MAX_DOC
USER_BYTES = 1 + MAX_DOCS * DOC_BYTES


def document(chunk):
    return tuple(item_list(chunk, TOKENS, MAX_DOC, min_size=0))


def user_documents(chunk):
    return tuple(document(chunk[1 + j * DOC_BYTES:1 + (j + 1) * DOC_BYTES])
                 for j in range(chunk[0] % (MAX_DOCS + 1)))


@st.composite
def users_documents(draw):
    n = draw(st.integers(0, MAX_USERS))
    data = draw(blob(MAX_USERS * USER_BYTES))
    return [user_documents(data[i * USER_BYTES:(i + 1) * USER_BYTES]) for i in range(n)]


documents = blob(DOC_BYTES).map(document)
users_docs = users_documents()


def order_of(data: bytes) -> int:
    """An order's rank (tests/support/byte_cases.py ``nth_permutation``): zero bytes keep
    the order; 44 bytes reach every order of ≤ 72 items (2^352 > 72!)."""
    return int.from_bytes(data, "little")


def valid_of(docs, k, previous, unigrams, pruning):
    return {g for doc in docs for g in kgrams_of(doc, k)
            if is_valid(g, previous, unigrams, pruning)}


def block_of(users, keep_ids=False):
    return encode_block([(f"u{i}", docs) for i, docs in enumerate(users)], keep_ids)


def level_sets(sets):
    """(k, S_{k−1}, S_1) as sets from ``released_sets`` (S_{k−1} = S_1 at level 2)."""
    k, unigrams, previous = sets
    return k, set(unigrams if k == 2 else previous), set(unigrams)


def as_dict(pairs):
    out = dict(pairs)
    assert len(out) == len(pairs), "an item was summed twice"
    return out


@settings(max_examples=examples(300), deadline=None)
@given(released_sets(), st.sampled_from(["both", "single"]), users_docs)
def test_level_sums_are_the_per_user_rule_when_nothing_is_sampled(sets, pruning, users):
    k, previous, unigrams = level_sets(sets)
    expected = weighted_histogram([valid_of(docs, k, previous, unigrams, pruning)
                                   for docs in users], weighted_gaussian_weight)
    got = as_dict(level_sums(block_of(users), k, pruning, previous, unigrams, BIG,
                             weighted_gaussian_weight, np.random.default_rng(0)))
    assert set(got) == set(expected)
    assert all(got[g] == pytest.approx(expected[g]) for g in got)


@settings(max_examples=examples(200), deadline=None)
@given(users_docs)
def test_level1_sums_are_the_per_user_rule_when_nothing_is_sampled(users):
    expected = weighted_histogram([{t for doc in docs for t in doc} for docs in users],
                                  weighted_gaussian_weight)
    got = as_dict(level1_sums(block_of(users), BIG, weighted_gaussian_weight,
                              np.random.default_rng(0)))
    assert set(got) == set(expected)
    assert all(got[t] == pytest.approx(expected[t]) for t in got)


@settings(max_examples=examples(200), deadline=None)
@given(released_sets(), st.sampled_from(["both", "single"]), users_docs, documents,
       st.integers(1, 3), st.integers(0, 2**32))
def test_one_more_user_moves_the_sums_by_at_most_1_in_l2_and_only_on_its_own_kgrams(
        sets, pruning, users, extra_doc, max_items, seed):
    # Seeded, a user's sample depends on (seed, salt, its id) only, so the
    # block with the extra user differs by that user's contribution alone.
    k, previous, unigrams = level_sets(sets)
    extra = (extra_doc, extra_doc[::-1])
    rng = np.random.default_rng(0)

    def sums(us):
        return as_dict(level_sums(block_of(us, keep_ids=True), k, pruning, previous, unigrams,
                                  max_items, weighted_gaussian_weight, rng, seed, "L"))

    without, with_extra = sums(users), sums(users + [extra])
    assert histogram_distance(without, with_extra, 2) <= 1.0 + 1e-9
    own = valid_of(extra, k, previous, unigrams, pruning)
    assert set(with_extra) <= set(without) | own
    assert set(with_extra) >= set(without)
    # Each user holds at most Δ_k of the items it contributes to.
    block = block_of([extra], keep_ids=True)
    alone = as_dict(level_sums(block, k, pruning, previous, unigrams, max_items,
                               weighted_gaussian_weight, rng, seed, "L"))
    assert len(alone) == min(len(own), max_items) and set(alone) <= own
    assert all(w == pytest.approx(1 / math.sqrt(len(alone))) for w in alone.values())


def test_seeded_samples_are_sample_user_items_draws():
    # The same draws as SampleEachUser (and the Python levels before the
    # blocks), wherever the user sits in a block.
    items = [f"w{i}" for i in range(12)]
    users = [(("x",),), (tuple(items),), (("y", "z"),)]
    for order in ([0, 1, 2], [2, 1, 0]):
        block = encode_block([(f"u{i}", users[i]) for i in order], keep_ids=True)
        got = as_dict(level1_sums(block, 5, weighted_gaussian_weight, None, seed=3,
                                  salt="level1"))
        chosen = sample_user_items("u1", items, 5, None, 3, "level1")
        assert {t for t in got if t.startswith("w")} == set(chosen)


def test_samples_are_uniform():
    # 30,000 users each hold the same 8 items, Δ = 3: each item lands in a
    # user's sample with probability 3/8, so its number of holders is
    # Binomial(30,000, 3/8) (checked at 1e-8 per tail, 8 items).
    n_users, n_items, max_items = 30_000, 8, 3
    users = np.repeat(np.arange(n_users), n_items)
    items = np.tile(np.arange(n_items), n_users)
    sums = sampled_weighted_sums(users, items, n_items, max_items, weighted_gaussian_weight,
                                 hashing.os_rng())
    holders = sums * math.sqrt(max_items)
    assert holders.sum() == pytest.approx(n_users * max_items)
    low = stats.binom.ppf(1e-8, n_users, max_items / n_items)
    high = stats.binom.isf(1e-8, n_users, max_items / n_items)
    assert all(low <= h <= high for h in np.round(holders)), holders


def test_repeated_occurrences_count_once():
    users = np.array([0, 0, 0, 1])
    items = np.array([2, 2, 1, 2])
    sums = sampled_weighted_sums(users, items, 3, 10, weighted_gaussian_weight, None)
    assert sums.tolist() == pytest.approx([0.0, 1 / math.sqrt(2), 1 / math.sqrt(2) + 1.0])


@settings(max_examples=examples(200), deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=40), st.integers(1, 5),
       st.sampled_from([4, 2**20, 2**40]))
def test_gram_keys_are_equal_exactly_when_grams_are(tokens, length, n_tokens):
    # n_tokens 2**40 forces the dense renumbering (one more digit could overflow).
    tokens = np.array(tokens, dtype=np.int64)
    starts = np.arange(max(tokens.size - length + 1, 0))
    keys, digits = _gram_keys(tokens, starts, length, n_tokens)
    keys = keys.tolist()
    assert digits == (n_tokens ** length < 2**62)
    grams = [tuple(tokens[s:s + length].tolist()) for s in starts]
    for i in range(len(grams)):
        for j in range(len(grams)):
            assert (keys[i] == keys[j]) == (grams[i] == grams[j])


def test_an_empty_block_and_users_without_documents():
    block = encode_block([("u", ()), ("v", ((),))], keep_ids=False)
    assert block.tokens.size == 0 and block.doc_lengths.tolist() == [0]
    assert level1_sums(block, 3, weighted_gaussian_weight, np.random.default_rng(0)) == []
    assert level_sums(block, 2, "both", {("a",)}, {("a",)}, 3, weighted_gaussian_weight,
                      np.random.default_rng(0)) == []


@settings(max_examples=examples(100), deadline=None)
@given(released_sets(), st.sampled_from(["both", "single"]), users_docs)
def test_released_grams_by_digit_keys_and_by_lookups_agree(sets, pruning, users):
    # Two ways to tell which (k−1)-grams were released: their digit keys
    # (S_{k−1} encoded in the block's token ids) or one set lookup each.
    import beam_dpsu.core.user_blocks.document_blocks as document_blocks
    k, previous, unigrams = level_sets(sets)
    previous |= {("zz",) * (k - 1)}  # a gram of no block token
    block = block_of(users)

    def run():
        return as_dict(level_sums(block, k, pruning, previous, unigrams, BIG,
                                  weighted_gaussian_weight, np.random.default_rng(0)))

    by_keys = run()
    original = document_blocks._DIGIT_KEYS
    try:
        document_blocks._DIGIT_KEYS = 0  # never digit keys: one lookup per distinct gram
        by_lookups = run()
    finally:
        document_blocks._DIGIT_KEYS = original
    assert by_keys == by_lookups


@settings(max_examples=examples(200), deadline=None)
@given(blob(1 + 8).map(lambda chunk: item_list(chunk, range(10), 8)), st.integers(1, 4),
       blob(44).map(order_of))
def test_each_user_keeps_exactly_min_count_delta_of_its_own_items_unseeded(sizes, max_items,
                                                                            order):
    # The unseeded path's own sensitivity test: without it, a sample ordered by
    # priority alone (users mixed up) would pass every other test. Users hold
    # disjoint items, given in a shuffled order: each keeps exactly
    # min(count, Δ) of its own items, each weighted 1/√kept (ℓ2 = 1 per user).
    # 1..8 users of 0..9 items each, the ≤ 72 (user, item) pairs in any order.
    pairs = nth_permutation([(u, f"{u}.{j}") for u, n in enumerate(sizes) for j in range(n)],
                            order)
    labels = sorted({item for _, item in pairs})
    index = {item: i for i, item in enumerate(labels)}
    users = np.array([u for u, _ in pairs], dtype=np.int64)
    items = np.array([index[item] for _, item in pairs], dtype=np.int64)
    sums = sampled_weighted_sums(users, items, len(labels), max_items,
                                 weighted_gaussian_weight, hashing.os_rng())
    for u, n in enumerate(sizes):
        mine = sums[[index[f"{u}.{j}"] for j in range(n)]]
        kept = min(n, max_items)
        assert np.count_nonzero(mine) == kept
        if kept:
            assert mine[mine > 0] == pytest.approx(1 / math.sqrt(kept))
            assert float((mine ** 2).sum()) == pytest.approx(1.0)


@settings(max_examples=examples(200), deadline=None)
@given(users_docs)
def test_a_block_built_user_by_user_holds_every_document_in_order(users):
    builder = BlockBuilder(keep_ids=True)
    for i, docs in enumerate(users):
        builder.add(f"u{i}", docs)
    assert builder.users == len(users)
    assert builder.tokens == sum(len(doc) for docs in users for doc in docs)
    block = builder.build()
    words = np.array(block.vocab + [None], dtype=object)[block.tokens]
    ends = np.cumsum(block.doc_lengths)
    got = [tuple(words[e - n:e]) for e, n in zip(ends.tolist(), block.doc_lengths.tolist())]
    assert got == [doc for docs in users for doc in docs]
    assert block.doc_users.tolist() == [i for i, docs in enumerate(users) for _ in docs]
    assert block.user_ids == [f"u{i}" for i in range(len(users))]
    assert len(set(block.vocab)) == len(block.vocab)


def test_a_user_with_a_token_the_check_refuses_adds_nothing():
    # The tokens before the refused one must not stay in the vocabulary (nor in the
    # pickled block) once the user is dropped.
    builder = BlockBuilder(keep_ids=False, check=lambda t: type(t) is str and t != "bad")
    builder.add(None, (("a", "b"),))
    for docs in ((("secret", "bad"),), (("d",), ("e", ["unhashable"]))):
        with pytest.raises((BadToken, TypeError)):
            builder.add(None, docs)
        assert builder.users == 1 and builder.tokens == 2
        with pytest.raises((BadToken, TypeError)):
            builder.add(None, (docs[-1],))
        assert builder.users == 1 and builder.tokens == 2
    builder.add(None, (("b", "c"),))
    block = builder.build()
    assert block.doc_lengths.tolist() == [2, 2] and block.doc_users.tolist() == [0, 1]
    assert block.vocab == ["a", "b", "c"]
    words = np.array(block.vocab, dtype=object)[block.tokens].tolist()
    assert words == ["a", "b", "b", "c"]


@st.composite
def user_item_pairs(draw):
    """0..40 (user 0..6, item 0..9) pairs, one byte each, and an order's rank (20 bytes:
    2^160 > 40!). Zero bytes: (0, 0) pairs in order."""
    n = draw(st.integers(0, 40))
    data = draw(blob(40 + 20))
    return [(b % 7, b // 7 % 10) for b in data[:n]], order_of(data[40:])


@settings(max_examples=examples(200), deadline=None)
@given(user_item_pairs(), st.integers(1, 4))
def test_repeats_count_once_whether_users_come_in_order_or_not(pairs_order, max_items):
    pairs, order = pairs_order
    # Users in order take the linear path (a radix sort by item), shuffled
    # ones the combined-key sort: both give each user's distinct items.
    reference = weighted_histogram([{i for u2, i in pairs if u2 == u} for u in range(7)],
                                   weighted_gaussian_weight)
    in_order = sorted(pairs, key=lambda p: p[0])  # by user only: items stay mixed
    shuffled = nth_permutation(pairs, order)
    for given_pairs in (in_order, shuffled):
        users = np.array([u for u, _ in given_pairs], dtype=np.int64)
        items = np.array([i for _, i in given_pairs], dtype=np.int64)
        sums = sampled_weighted_sums(users, items, 10, BIG, weighted_gaussian_weight, None)
        assert {i: w for i, w in enumerate(sums.tolist()) if w} == pytest.approx(reference)
        # Sampled to Δ: each user adds min(n, Δ) items of weight 1/√min(n, Δ).
        sampled = sampled_weighted_sums(users, items, 10, max_items, weighted_gaussian_weight,
                                        hashing.os_rng())
        sizes = [len({i for u2, i in pairs if u2 == u}) for u in range(7)]
        assert sampled.sum() == pytest.approx(sum(math.sqrt(min(n, max_items)) for n in sizes))
