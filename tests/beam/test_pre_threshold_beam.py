"""Pre-threshold k in the Beam transforms: SelectItems (every mechanism, fixed and auto
Δ0), ExtractNgrams' level 1, and the holder counts the sequential histogram carries.

The data make the outcome certain whatever the noise: an item held by k − 1 users
can never be released (it is not even noised), while an item held by 60 users at full
weight sits far above the raised threshold at a large budget (released with
probability > 1 − 1e-12 for every mechanism here: ε = 20, δ = 0.3).
"""

from __future__ import annotations

import hashlib
import logging

import apache_beam as beam
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_dpsu import (SIPS, Budget, CountGaussian, CountLaplace, ExtractNgrams,
                       GreedyWithoutSampling, PolicyGaussian, PolicyLaplace, SelectItems,
                       TruncatedGeometric, WeightedGaussian, WeightedLaplace)
from beam_dpsu.core import policies
from beam_dpsu.beam.sequential import UserBlockBuilder, shard_policy_histogram
from tests.support.one_pipeline import run_cases

pytestmark = pytest.mark.pipeline

K = 4
BUDGET = Budget(20.0, 0.3)


def pairs():
    """'common' held by 60 users (each holding it alone); 'few' by K − 1 users, each also
    holding it alone (full weight: a plain selection would release it)."""
    data = [(f"c{i}", "common") for i in range(60)]
    data += [(f"f{i}", "few") for i in range(K - 1)]
    return data


MECHANISMS = [CountLaplace(1), CountGaussian(1), WeightedLaplace(1), WeightedGaussian(1),
              PolicyLaplace(1), PolicyGaussian(1), GreedyWithoutSampling(max_items_per_user=1),
              SIPS(max_items_per_user=1), TruncatedGeometric(1)]


@pytest.fixture(scope="module")
def beam_cases(tmp_path_factory):
    """(outputs, transforms): every Beam case of this file in ONE pipeline (a TestPipeline
    each cost seconds); ``outputs[case]`` is the list (or {part: list}) read back from its
    branch, ``transforms[case]`` its SelectItems or ExtractNgrams (for its report)."""
    transforms: dict = {}

    def build(p):
        cases = {}
        for case, builder in _BUILDERS.items():
            cases.update(builder(p, case, transforms))
        return cases

    return run_cases(tmp_path_factory.mktemp("pre_threshold"), build), transforms


def _build_fewer_than_k(p, case, transforms):
    data = p | f"Create {case}" >> beam.Create(pairs())
    cases = {}
    for mechanism in MECHANISMS:
        cases[case, mechanism.name] = data | f"Select {mechanism.name}" >> SelectItems(
            mechanism, BUDGET, seed=5, pre_threshold=K)
    for mechanism in (WeightedGaussian(1), PolicyGaussian(1)):
        cases[case, "plain", mechanism.name] = data | f"Plain {mechanism.name}" >> (
            SelectItems(mechanism, BUDGET, seed=5))
    return cases


def test_an_item_of_fewer_than_k_holders_is_never_released(beam_cases):
    """Every mechanism in one pipeline (one TestPipeline per mechanism costs seconds each);
    and, as the control that lets this fail, Weighted and Policy Gaussian without the
    pre-threshold release 'few' (weight 3 against ρ ≈ 1 with σ ≈ 0.1)."""
    outputs, _ = beam_cases
    case = "fewer than k"
    for mechanism in MECHANISMS:
        assert outputs[case, mechanism.name] == ["common"], f"Check {mechanism.name}"
    for mechanism in (WeightedGaussian(1), PolicyGaussian(1)):
        assert sorted(outputs[case, "plain", mechanism.name]) == ["common", "few"], (
            f"Check plain {mechanism.name}")


def _build_auto_max_items(p, case, transforms):
    cases = {}
    for privacy_unit in ("user_id", "element"):
        data = pairs() if privacy_unit == "user_id" else [[item] for _, item in pairs()]
        select = SelectItems(WeightedGaussian("auto"), BUDGET, seed=5, pre_threshold=K,
                             privacy_unit=privacy_unit)
        transforms[case, privacy_unit] = select
        cases[case, privacy_unit] = (p | f"Create {case} {privacy_unit}" >> beam.Create(data)
                                     | f"Select {case} {privacy_unit}" >> select)
    return cases


@pytest.mark.parametrize("privacy_unit", ["user_id", "element"])
def test_auto_max_items_and_element_input(beam_cases, privacy_unit):
    outputs, transforms = beam_cases
    assert outputs["auto", privacy_unit] == ["common"]
    assert transforms["auto", privacy_unit].report["pre_threshold"] == K


def test_the_report_records_k_and_the_build_logs_its_price(caplog):
    with caplog.at_level(logging.INFO, logger="beam_dpsu"):
        select = SelectItems(WeightedGaussian(10), BUDGET, pre_threshold=K)
    assert select.report["pre_threshold"] == K
    assert SelectItems(WeightedGaussian(10), BUDGET).report["pre_threshold"] == 1
    note = [r.getMessage() for r in caplog.records if "pre_threshold" in r.getMessage()]
    assert len(note) == 1 and f">= {K} distinct holders" in note[0]
    assert "rises from" in note[0]


@pytest.mark.parametrize("bad", [0, -3, 2.5, "3"])
def test_bad_pre_threshold_fails_when_built(bad):
    with pytest.raises(ValueError, match="pre_threshold must be an int >= 1"):
        SelectItems(WeightedGaussian(10), BUDGET, pre_threshold=bad)


NGRAM_CASES = [(level1, max_items) for max_items in (3, "auto")
               for level1 in ("weighted-gaussian", "policy-gaussian")]


def _build_ngrams(p, case, transforms):
    docs = [(f"c{i}", ["common", "word"]) for i in range(60)]
    docs += [(f"f{i}", ["few"]) for i in range(K - 1)]
    created = p | f"Create {case}" >> beam.Create(docs)
    cases = {}
    for level1, max_items in NGRAM_CASES:
        extract = ExtractNgrams(2, BUDGET, max_items_per_user=max_items, level1=level1, seed=5,
                                pre_threshold=K)
        transforms[case, level1, max_items] = extract
        released = created | f"Extract {level1} {max_items}" >> extract
        cases[case, level1, max_items] = released | f"Unigrams {level1} {max_items}" >> (
            beam.Filter(lambda gram: len(gram) == 1))
    return cases


@pytest.mark.parametrize("level1", ["weighted-gaussian", "policy-gaussian"])
@pytest.mark.parametrize("max_items", [3, "auto"])
def test_ngram_level_one_releases_only_words_of_k_holders(beam_cases, level1, max_items):
    outputs, transforms = beam_cases
    assert sorted(outputs["ngrams", level1, max_items]) == [("common",), ("word",)]
    assert transforms["ngrams", level1, max_items].report["pre_threshold"] == K


# --- the sequential histogram's holder counts (pure, from its encoded blocks) --------------

user_lists = st.lists(st.lists(st.sampled_from("abcdef"), min_size=1, max_size=4, unique=True),
                      max_size=10)


def _order_key(index: int) -> bytes:
    return hashlib.blake2b(str(index).encode(), digest_size=16).digest()


def _policy_keys(users, k, blocks_of=3):
    blocks, builder = [], UserBlockBuilder()
    for i, items in enumerate(users):
        builder.add(_order_key(i), items)
        if (i + 1) % blocks_of == 0:
            blocks.append(builder.encode())
            builder = UserBlockBuilder()
    blocks.append(builder.encode())
    weights, holders = shard_policy_histogram(blocks, policies.l2_descent, 5.0,
                                              count_holders=True)
    assert set(weights) == set(holders)
    return weights, holders, {item for item, n in holders.items() if n >= k}


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(users=user_lists)
def test_policy_holders_count_the_users_listing_each_item(users):
    weights, holders, _ = _policy_keys(users, 1)
    expected: dict = {}
    for items in users:
        for item in items:
            expected[item] = expected.get(item, 0) + 1
    assert holders == expected
    assert weights == shard_policy_histogram(
        [_encoded(users)], policies.l2_descent, 5.0)


def _encoded(users) -> bytes:
    builder = UserBlockBuilder()
    for i, items in enumerate(users):
        builder.add(_order_key(i), items)
    return builder.encode()


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(users=user_lists, extra=st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=4,
                                        unique=True), k=st.integers(1, 4))
def test_policy_eligible_keys_grow_only_by_the_new_users_items(users, extra, k):
    """Invariant 8 with a pre-threshold: the extra user (last in the order or not) adds
    keys only among its own items, and removes none."""
    _, _, before = _policy_keys(users, k)
    _, _, after = _policy_keys(users + [extra], k)
    assert before <= after and after - before <= set(extra)


# --- the holder filter itself, before any noise (the threshold alone would also keep 'few'
# out above, so these pin the promise "never noised with fewer than k holders") ------------

def _records():
    """(user, distinct items): 'few' held by K − 1 users, 'common' by 60, 'pair' by K users
    that each also hold 'common'."""
    records = [(f"c{i}", ("common",)) for i in range(60)]
    records += [(f"f{i}", ("few",)) for i in range(K - 1)]
    records += [(f"p{i}", ("common", "pair")) for i in range(K)]
    return records


def _keys(shard_histograms, label):
    return shard_histograms | f"Keys {label}" >> beam.FlatMap(
        lambda shard_histogram: list(shard_histogram[1]))


def _build_histograms(p, case, transforms):
    from beam_dpsu.beam.histograms import HISTOGRAM_SHARDS, SampledWeightedHistogram
    from beam_dpsu.beam.sequential import SequentialPolicyHistogram, run_order_key
    records = p | f"Create {case}" >> beam.Create(_records())
    cases = {}
    for seed in (None, 3):
        cases["weighted", seed] = _keys(records | f"Weighted seed={seed}" >> (
            SampledWeightedHistogram(policies.weighted_gaussian_weight, 5, seed,
                                     pre_threshold=K)), f"weighted seed={seed}")
    for shards in (1, 3):
        cases["policy", shards] = _keys(records | f"Policy shards={shards}" >> (
            SequentialPolicyHistogram(policies.l2_descent, 5.0, run_order_key(1), shards,
                                      item_shards=HISTOGRAM_SHARDS, pre_threshold=K)),
            f"policy shards={shards}")
    return cases


@pytest.mark.parametrize("seed", [None, 3])
def test_the_weighted_histogram_holds_only_items_of_k_holders(beam_cases, seed):
    outputs, _ = beam_cases
    assert sorted(outputs["weighted", seed]) == ["common", "pair"]


@pytest.mark.parametrize("shards", [1, 3])
def test_the_policy_histogram_holds_only_items_of_k_holders(beam_cases, shards):
    outputs, _ = beam_cases
    assert sorted(outputs["policy", shards]) == ["common", "pair"]


_BUILDERS = {"fewer than k": _build_fewer_than_k, "auto": _build_auto_max_items,
             "ngrams": _build_ngrams, "histograms": _build_histograms}


def test_dpne_level_one_sums_count_each_user_once():
    import numpy as np

    from beam_dpsu.core.user_blocks import document_blocks
    # One user repeats "a" in two documents; "b" is held by both users; user 1 alone has "c".
    users = np.array([0, 0, 0, 1, 1, 1])
    tokens = np.array([0, 0, 1, 1, 2, 1])
    sums, holders = document_blocks.sampled_weighted_sums(
        users, tokens, 3, 10, policies.weighted_gaussian_weight, np.random.default_rng(0),
        count_holders=True)
    assert holders.tolist() == [1, 2, 1]
    np.testing.assert_allclose(sums, [2 ** -0.5, 2 * 2 ** -0.5, 2 ** -0.5])


def test_dpne_level_one_filter_and_sum():
    from beam_dpsu.beam import ngram_level1
    assert ngram_level1._sum_weights_and_holders([(0.5, 1), (1.5, 2), (0.0, 0)]) == (2.0, 3)
    assert list(ngram_level1._held_by_at_least(("a", (9.0, K - 1)), K)) == []
    assert list(ngram_level1._held_by_at_least(("a", (0.1, K)), K)) == [("a", 0.1)]
