"""TestPipeline tests of SelectItems and its parts on the DirectRunner."""

import math

import apache_beam as beam
import pytest
from tests.support.runner import TestPipeline

from beam_dpsu import (MECHANISMS, Budget, BoundContributions, CountGaussian, CountLaplace,
                       InvalidRecordError, SelectItems, WeightedGaussian, WeightedLaplace,
                       ZCDPBudget, mechanism_from_name)
from beam_dpsu.beam.bounding import item_counts
from beam_dpsu.beam.histograms import (HISTOGRAM_SHARDS, SampledWeightedHistogram,
                                      WeightedHistogram,
                                  shard_of_item)
from beam_dpsu.core import policies
from beam_dpsu.core.sampling import sample_items
from beam_dpsu.core.calibration import release_mask
from beam_dpsu.core.hashing import derived_rng
from tests.support.one_pipeline import run_cases
from tests.support import histograms

pytestmark = pytest.mark.pipeline

ALL = [CountLaplace(3), CountGaussian(3), WeightedLaplace(3), WeightedGaussian(3)]
HUGE = Budget(epsilon=1e6, delta=0.4)  # noise ~1e-6: the release is the threshold rule


def dataset():
    """Items with known weights under every mechanism.

    'common' is held by 40 users, 'pair' by 2, 'solo' by 1; each user holds
    ≤ 3 distinct items, so no sampling happens (Δ0 = 3).
    """
    pairs = []
    for u in range(40):
        pairs += [(f"u{u}", "common"), (f"u{u}", "common")]  # duplicates within a user
    pairs += [("u0", "pair"), ("u1", "pair"), ("u2", "solo")]
    return pairs


BUDGETS = {"approx-dp": Budget(0.5, 1e-6), "zcdp": ZCDPBudget(0.05, 1e-6)}


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    """{(mechanism name, budget name): the released items}: the seeded huge-ε
    releases and the unseeded ones of BUDGETS, every mechanism of ALL, in ONE
    pipeline on one input (a TestPipeline each cost seconds); and in the same
    pipeline every other Beam case of this file, {case: its list} (``_BUILDERS``)."""
    def build(p):
        data = p | beam.Create(dataset())
        cases = {}
        for mechanism in ALL:
            for name, budget, seed in [("huge", HUGE, 7)] + [(b, BUDGETS[b], None)
                                                             for b in BUDGETS]:
                cases[mechanism.name, name] = data | f"Select {mechanism.name} {name}" >> (
                    SelectItems(mechanism, budget, seed=seed))
        for case, builder in _BUILDERS.items():
            cases[case] = builder(p, case)
        return cases

    return run_cases(tmp_path_factory.mktemp("releases"), build)


@pytest.mark.parametrize("mechanism", ALL, ids=lambda m: m.name)
def test_huge_epsilon_releases_items_above_threshold(releases, mechanism):
    select = SelectItems(mechanism, HUGE, seed=7)  # the fixture's (name, "huge") case
    threshold = select.calibration.release_threshold
    # With ε = 1e6 the noise is negligible, so an item is released iff its
    # weight exceeds ρ; compute the weights from the pure policy.
    users = {}
    for u, item in dataset():
        users.setdefault(u, set()).add(item)
    weights = histograms.weighted_histogram(users.values(), mechanism.item_weight)
    expected = sorted(item for item, w in weights.items() if w > threshold)
    assert "common" in expected and "solo" not in expected
    assert sorted(releases[mechanism.name, "huge"]) == expected


@pytest.mark.parametrize("budget", sorted(BUDGETS))
@pytest.mark.parametrize("mechanism", ALL, ids=lambda m: m.name)
def test_never_releases_anything_outside_the_input(releases, mechanism, budget):
    items_held = {item for _, item in dataset()}
    items = releases[mechanism.name, budget]
    assert set(items) <= items_held, set(items) - items_held
    assert len(items) == len(set(items)), "an item was released twice"


def _build_sampling(p, case):
    pairs = [("alice", f"w{i}") for i in range(50)] + [("bob", "w1"), ("bob", "w1")]
    return (p | f"Create {case}" >> beam.Create(pairs)
            | f"Bound {case}" >> BoundContributions(max_items_per_user=7))


def test_sampling_bounds_each_user_to_max_items(releases):
    records = releases["sampling"]
    by_user = dict(records)
    assert len(by_user["alice"]) == 7 and len(set(by_user["alice"])) == 7
    assert set(by_user["alice"]) <= {f"w{i}" for i in range(50)}
    assert by_user["bob"] == ("w1",)


def _build_weighted_histogram(p, case):
    users = [("a", ("x", "y", "z", "w")), ("b", ("x",))]
    return (p | f"Create {case}" >> beam.Create(users)
            | f"Histogram {case}" >> WeightedHistogram(policies.weighted_gaussian_weight,
                                                       hot_key_fanout=2))


def test_weighted_histogram_sums_user_weights(releases):
    assert sorted(releases["weighted histogram"]) == sorted(
        [("x", 1.5), ("y", 0.5), ("z", 0.5), ("w", 0.5)])


def _build_sampled_weighted_histogram(p, case):
    # alice holds 50 distinct items, bounded to Δ0 = 7 (weight 1/√7 each);
    # bob's 2 are kept whole (1/√2 each); an empty record adds nothing.
    users = [("alice", {f"w{i}": 1 for i in range(50)}), ("bob", ("w1", "x")), ("eve", ())]
    return (p | f"Create {case}" >> beam.Create(users)
            | f"Histogram {case}" >> SampledWeightedHistogram(
                policies.weighted_gaussian_weight, 7, hot_key_fanout=2))


def test_sampled_weighted_histogram_bounds_each_user_then_sums(releases):
    shards = releases["sampled weighted histogram"]
    # One dict per shard, each item in its own shard and no other.
    assert len({shard for shard, _ in shards}) == len(shards)
    pairs = [(k, w) for shard, part in shards for k, w in part.items()]
    assert all(shard_of_item(k, 2 * HISTOGRAM_SHARDS) == shard  # fan-out 2
               for shard, part in shards for k in part)
    weights = dict(pairs)
    assert len(pairs) == len(weights)
    alice = {k: w for k, w in weights.items() if k != "x"}
    assert weights["x"] == pytest.approx(1 / math.sqrt(2))
    # 7 sampled items of alice's (w1 may also carry bob's 1/√2).
    solo = {k: w - (1 / math.sqrt(2) if k == "w1" else 0) for k, w in alice.items()}
    solo = {k: w for k, w in solo.items() if w > 1e-12}
    assert len(solo) == 7 and set(solo) <= {f"w{i}" for i in range(50)}
    assert all(w == pytest.approx(1 / math.sqrt(7)) for w in solo.values())
    with pytest.raises(ValueError, match="max_items_per_user must be >= 1"):
        SampledWeightedHistogram(policies.weighted_gaussian_weight, 0)


def test_shard_sums_leave_each_flush_to_the_shuffle():
    # Summing the shards with a CombinePerKey would let its pre-combine (evicting by
    # key count, with only 64 keys) keep every flushed item of a bundle on the
    # worker: flushing would no longer bound memory. The shard sum must not be a
    # combiner.
    p = beam.Pipeline()
    _ = (p | beam.Create([("u", ("a",))])
         | SampledWeightedHistogram(policies.weighted_gaussian_weight, 7))
    kinds = []

    class Visitor(beam.pipeline.PipelineVisitor):
        def visit_transform(self, node):
            kinds.append(type(node.transform).__name__)

        def enter_composite_transform(self, node):
            kinds.append(type(node.transform).__name__)

    p.visit(Visitor())
    assert "GroupByKey" in kinds
    assert not {"CombinePerKey", "CombineGlobally"} & set(kinds)


SEEDED_PAIRS = [(f"u{u}", f"w{(u * 7 + k) % 60}") for u in range(200) for k in range(12)]
SEEDED = (WeightedGaussian(5), Budget(2.0, 1e-3), 11)  # mechanism, budget, seed


def _build_seeded(p, case):
    mechanism, budget, seed = SEEDED
    return (p | f"Create {case}" >> beam.Create(SEEDED_PAIRS)
            | f"Select {case}" >> SelectItems(mechanism, budget, seed=seed))


def test_seeded_run_equals_the_pure_core_with_the_same_seed(releases):
    # A seeded run derives every draw from (seed, user or item), so the Beam
    # result must equal the pure computation, whatever the bundling.
    mechanism, budget, seed = SEEDED
    calibration = mechanism.calibrate(budget)
    users = {}
    for u, item in SEEDED_PAIRS:
        users.setdefault(u, set()).add(item)
    sampled = [sample_items(items, 5, derived_rng(seed, "sample", "", u), ordered=True)
               for u, items in users.items()]
    hist = histograms.weighted_histogram(sampled, mechanism.item_weight)
    expected = sorted(item for item, w in hist.items()
                      if release_mask(w, calibration, derived_rng(seed, "noise", "", item)))
    assert 0 < len(expected) < 60
    assert sorted(releases["seeded"]) == expected


# The bad records that also fail a whole pipeline: a pair's and a record's.
FAILING_PIPELINES = [(None, "secret-item"), ("secret-user", ["secret-a", ""])]


@pytest.mark.parametrize("record,message", [
    ((None, "secret-item"), "missing user id"),
    (("", "secret-item"), "missing user id"),
    (("secret-user", 3), r"field 1 must be an item \(str or bytes\) or a list, tuple, set or "
                         r"array of items, got an int"),
    (("secret-user", ""), "empty item in field 1"),
    # Per-user records: the bad item's position, never its value.
    ((None, ["secret-item"]), r"\(user_id, items\) record has a missing user id"),
    (("secret-user", ["secret-a", ""]), r"item 1 of a \(user_id, items\) record \(field 1\) "
                                        "is empty"),
    (("secret-user", ("secret-a", 3)), r"item 1 of a \(user_id, items\) record \(field 1\) "
                                       "must be str or bytes, got an int"),
    (("secret-user", ["secret-a", ["secret-b"]]), r"item 1 of .* got a list"),
    (("secret-user", {"secret-a", 7}), r"an item of a \(user_id, items\) record .* got an int"),
    (("secret-user", {"secret-a": 2}), r"got a dict; give the items as a list"),
    (("secret-user",), r"expected a \(user_id, item\) pair or \(user_id, items\) record, got "
                       "a tuple of 1 fields"),
    ((["secret-user"], "secret-item"), "user id \\(field 0\\).*must be a str, bytes, int or "
                                       "tuple of these, got a list"),
    ((1.5, "secret-item"), "user id \\(field 0\\).*got a float"),
    ((True, "secret-item"), "user id \\(field 0\\).*got a bool"),
])
def test_bad_records_fail_the_pipeline_with_a_clear_error(record, message):
    # SelectItems checks every element with item_counts (in ItemCountsPerUser: only
    # the distinct items, as this mechanism reads them), so the refusal is that
    # function's; a pair and a record also fail a pipeline (each its own: the first
    # error stops a pipeline), the wiring from the element to the error.
    with pytest.raises(InvalidRecordError, match=message) as raised:
        item_counts(record, occurrences=False)
    # The message names the field and the problem, never the record's values
    # (runner logs keep error text).
    assert "secret" not in str(raised.value)
    if record in FAILING_PIPELINES:
        with pytest.raises(InvalidRecordError, match=message) as raised:
            with TestPipeline() as p:
                _ = (p | beam.Create([("u0", "dog"), record])
                     | SelectItems(WeightedGaussian(3), Budget(1.0, 1e-5)))
        assert "secret" not in str(raised.value)


def _build_bytes_items(p, case):
    pairs = [(f"u{u}", b"\xffraw") for u in range(30)]
    return (p | f"Create {case}" >> beam.Create(pairs)
            | f"Select {case}" >> SelectItems(WeightedLaplace(1), HUGE))


def test_bytes_items_are_supported(releases):
    assert releases["bytes items"] == [b"\xffraw"]


def test_report_is_computed_at_construction():
    select = SelectItems(WeightedGaussian(100), Budget(3.0, math.exp(-10)))
    report = select.report
    assert report["noise"] == "gaussian"
    # docs/privacy.md's golden σ = 1.33279, ρ_G = 6.8237 are the δ/2 + δ/2 split;
    # the optimal split (docs/privacy.md, Accounting; delta_split.split_delta) lowers ρ_G.
    assert report["noise_scale"] == pytest.approx(1.32038, abs=5e-5)
    assert report["release_threshold"] == pytest.approx(6.81355, abs=5e-5)
    assert report["release_threshold"] < 6.8237
    assert report["delta_noise"] + report["threshold_delta"] <= math.exp(-10)
    assert report["mechanism"] == {"name": "weighted-gaussian", "max_items_per_user": 100}
    assert report["seeded"] is False and "seed" not in report
    zreport = SelectItems(WeightedGaussian(100), ZCDPBudget(0.1, 1e-5), seed=3).report
    assert zreport["seeded"] is True and "NOT differentially private" in zreport["seeded_note"]
    assert zreport["noise_scale"] == pytest.approx(1 / math.sqrt(0.2))
    assert zreport["dp_equivalents"][1]["delta"] == pytest.approx(5e-5)
    # The exact Gaussian curve (σ = 1/√0.2 plus δ to the threshold), tighter
    # than the zCDP conversion's 1.7637 (dp-sips Corollary 9).
    assert zreport["dp_equivalents"][1]["epsilon"] == pytest.approx(1.6048, abs=1e-3)


def test_select_items_rejects_bad_arguments():
    with pytest.raises(TypeError, match="mechanism must be a beam_dpsu mechanism config"):
        SelectItems("weighted-gaussian", Budget(1, 1e-5))
    with pytest.raises(TypeError, match="budget must be a Budget or ZCDPBudget"):
        SelectItems(WeightedGaussian(10), (1.0, 1e-5))
    with pytest.raises(ValueError, match="seed must be None or a non-negative int"):
        SelectItems(WeightedGaussian(10), Budget(1, 1e-5), seed=-1)
    with pytest.raises(ValueError, match="max_items_per_user must be >= 1, got 0"):
        WeightedGaussian(0)


def test_mechanism_from_name():
    assert mechanism_from_name("count-laplace", max_items_per_user=5) == CountLaplace(5)
    with pytest.raises(ValueError, match="unknown mechanism 'nope'"):
        mechanism_from_name("nope")
    with pytest.raises(ValueError, match="not differentially private.*corrigendum"):
        mechanism_from_name("policy-gaussian-l1")


def _build_one_user(p, case):
    # numpy.int64(7), 7 and "7" are one user (an int id is its text); so are numpy.str_
    # items and str.
    import numpy as np
    pairs = [(np.int64(7), np.str_("a")), (7, "b"), ("7", "c"), (np.int64(7), "d")]
    return (p | f"Create {case}" >> beam.Create(pairs) | f"Bound {case}" >> BoundContributions(10)
            | f"Types {case}" >> beam.MapTuple(
                lambda user, items: (type(user).__name__, sorted(items))))


def test_one_user_is_one_key_whatever_the_id_type(releases):
    assert releases["one user"] == [("str", ["a", "b", "c", "d"])]


_BUILDERS = {"sampling": _build_sampling, "weighted histogram": _build_weighted_histogram,
             "sampled weighted histogram": _build_sampled_weighted_histogram,
             "seeded": _build_seeded, "bytes items": _build_bytes_items,
             "one user": _build_one_user}


@pytest.mark.parametrize("budget", [Budget(1.0, 0), ZCDPBudget(0.1, 0)],
                         ids=["pure-dp", "pure-zcdp"])
@pytest.mark.parametrize("name", sorted(MECHANISMS))
def test_every_mechanism_refuses_a_pure_budget(name, budget):
    # Releasing an item held by one user needs δ > 0; a pure budget (valid for
    # counts) must be refused with an error naming the mechanism.
    mechanism = mechanism_from_name(name)
    with pytest.raises(ValueError, match=f"mechanism '{name}' needs delta > 0"):
        SelectItems(mechanism, budget)
    with pytest.raises(ValueError, match="needs delta > 0"):
        mechanism.calibrate(budget)


@pytest.mark.parametrize("budget", [Budget(1.0, 0), ZCDPBudget(0.1, 0)],
                         ids=["pure-dp", "pure-zcdp"])
def test_ngram_extraction_refuses_a_pure_budget(budget):
    from beam_dpsu.extract_ngrams import ExtractNgrams
    from beam_dpsu.ngram_baselines import NgramsByDPSU
    with pytest.raises(ValueError, match="DPNE n-gram extraction needs delta > 0"):
        ExtractNgrams(3, budget)
    for variant in ("dpsu-all", "dpsu-even", "dpsu-single"):
        with pytest.raises(ValueError, match=f"n-gram baseline '{variant}' needs delta > 0"):
            NgramsByDPSU(variant, 3, budget, n=2)
