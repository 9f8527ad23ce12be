"""TestPipeline tests of the sequential mechanisms (stateful DoFn), sharded and not:
the Beam histogram has exactly the keys of the pure reference (GW's zero weights
included); and the single-user statistical test of GW."""

import hashlib

import apache_beam as beam
import numpy as np
import pytest
from tests.support.runner import RUNNER, TestPipeline
from scipy import stats

from beam_dpsu import (Budget, GreedyWithoutSampling, PolicyGaussian, PolicyLaplace,
                       SelectItems, ZCDPBudget, mechanism_from_name)
from beam_dpsu.core import policies
from beam_dpsu.core import thresholds
from beam_dpsu.core.sampling import sample_items
from beam_dpsu.core.calibration import release_mask
from beam_dpsu.core.hashing import derived_rng, os_rng, stable_hash64
from beam_dpsu.beam import sequential
from beam_dpsu.beam.bounding import ItemCountsPerUser
from beam_dpsu.beam.sequential import OrderItemsForGW, SequentialPolicyHistogram
from tests.support.histograms import sharded_policy_histogram
from tests.support.one_pipeline import run_cases

pytestmark = pytest.mark.pipeline

SEED = 17


def corpus():
    """Zipf-like data: user u holds words w0..w(k−1) with repeats, k from 1 to 12."""
    rng = np.random.default_rng(3)
    pairs = []
    for u in range(120):
        k = int(rng.integers(1, 13))
        for _ in range(k):
            pairs += [(f"user{u}", f"w{int(rng.zipf(1.6)) % 40}")] * int(rng.integers(1, 3))
    return pairs


def user_counts(pairs):
    counts = {}
    for u, item in pairs:
        counts.setdefault(u, {})
        counts[u][item] = counts[u].get(item, 0) + 1
    return counts


ORDER_KEY = hashlib.sha256(b"beam_dpsu/order/%d" % SEED).digest()  # run_order_key(SEED)


def gw_lists(counts, max_items, public=None, key=ORDER_KEY):
    tie = lambda item: stable_hash64(item, key=key)  # noqa: E731
    return [(u, policies.gw_item_order(c, tie, max_items, public)) for u, c in counts.items()]


def expected_histogram(pairs, mechanism, cutoff):
    """The seeded policy histogram, computed by the pure core with the transform's key."""
    counts = user_counts(pairs)
    if isinstance(mechanism, GreedyWithoutSampling):
        named = gw_lists(counts, mechanism.max_items_per_user, mechanism.public_counts)
        update = policies.greedy_update
    else:
        named = [(u, sample_items(c, mechanism.max_items_per_user,
                                  derived_rng(SEED, "sample", "", u), ordered=True))
                 for u, c in counts.items()]
        update = (policies.l1_descent if isinstance(mechanism, PolicyLaplace)
                  else policies.l2_descent)
    hist = sharded_policy_histogram(named, update, cutoff, mechanism.shards, ORDER_KEY)
    # Every listed item is a key; the Policy mechanisms give each a positive weight.
    assert set(hist) == {item for _, items in named for item in items}
    if isinstance(mechanism, GreedyWithoutSampling):
        assert all(w >= 0 for w in hist.values())
    else:
        assert all(w > 0 for w in hist.values())
    return hist


def expected_release(pairs, mechanism, select):
    """The seeded release, computed by the pure core with the transform's key."""
    cal = select.calibration
    hist = expected_histogram(pairs, mechanism, cal.cutoff)
    return sorted(item for item, w in hist.items()
                  if release_mask(w, cal, derived_rng(SEED, "noise", "", item)))


MECHANISMS = [PolicyLaplace(5), PolicyLaplace(5, shards=3), PolicyGaussian(5, alpha=2),
              PolicyGaussian(5, shards=4), GreedyWithoutSampling(), GreedyWithoutSampling(3),
              GreedyWithoutSampling(4, shards=2),
              GreedyWithoutSampling(3, public_counts={"w7": 1000, "w3": 50})]


def ids(m):
    return f"{m.name}-{getattr(m, 'max_items_per_user', '')}-{m.shards}"


GW_HISTOGRAMS = [(3, 1, None), (4, 3, None), (2, 2, {"w7": 1000, "w3": 50, "w20": 7}),
                 (100, 1, None)]
GW_CUTOFF = 8.0  # high enough that users run out of budget: zero-weight keys appear
UNSEEDED = [PolicyLaplace(5), PolicyGaussian(5), GreedyWithoutSampling()]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    """Every case of the Beam tests below in ONE pipeline (a TestPipeline each cost
    seconds), each on its own Create, as before: ("seeded", i): MECHANISMS[i]'s seeded
    release; ("gw", i): GW_HISTOGRAMS[i]'s histogram; ("unseeded", name): the releases
    of UNSEEDED; ("two", privacy_unit, i): {"together", "alone"}, TWO_SELECTIONS[i]'s
    release next to the others on one input and alone on its own; "gw-kt": the GW-KT
    release, and ("gw-kt", "select") its SelectItems (for its calibration and report)."""
    selects = {}

    def build(p):
        cases = _two_selections(p)
        public_pc = p | "Public gw-kt" >> beam.Create(sorted(GW_KT_PUBLIC.items()))
        selects["gw-kt"] = SelectItems(GreedyWithoutSampling(3, public_order=True),
                                       Budget(2.0, 1e-3), seed=SEED, public_counts=public_pc)
        cases["gw-kt"] = (p | "Data gw-kt" >> beam.Create(corpus())
                          | "Select gw-kt" >> selects["gw-kt"])
        for i, mechanism in enumerate(MECHANISMS):
            label = ("seeded", i)
            # Input order reversed: the keyed-hash order must make it irrelevant.
            cases[label] = (p | f"Create {label}" >> beam.Create(list(reversed(corpus())))
                            | f"Select {label}" >> SelectItems(mechanism, Budget(2.0, 1e-3),
                                                               seed=SEED))
        for i, (max_items, shards, public) in enumerate(GW_HISTOGRAMS):
            label = ("gw", i)
            cases[label] = (p | f"Create {label}" >> beam.Create(list(reversed(corpus())))
                            | f"Counts {label}" >> ItemCountsPerUser()
                            | f"Order {label}" >> OrderItemsForGW(ORDER_KEY, max_items, public)
                            | f"Histogram {label}" >> SequentialPolicyHistogram(
                                policies.greedy_update, GW_CUTOFF, ORDER_KEY, shards))
        for mechanism in UNSEEDED:
            label = ("unseeded", mechanism.name)
            cases[label] = (p | f"Create {label}" >> beam.Create(corpus())
                            | f"Select {label}" >> SelectItems(mechanism, ZCDPBudget(0.3, 1e-4)))
        return cases

    released = run_cases(tmp_path_factory.mktemp("sequential"), build)
    released["gw-kt", "select"] = selects["gw-kt"]
    return released


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=ids)
def test_seeded_release_equals_pure_core(outputs, mechanism):
    select = SelectItems(mechanism, Budget(2.0, 1e-3), seed=SEED)
    pairs = corpus()
    expected = expected_release(pairs, mechanism, select)
    assert expected  # the test data releases something
    case = next(i for i, m in enumerate(MECHANISMS) if m is mechanism)
    assert sorted(outputs["seeded", case]) == expected


TWO_SELECTIONS = [PolicyGaussian(3), PolicyLaplace(4), GreedyWithoutSampling(3)]


def _two_selects(privacy_unit):
    """One object per application (a second application is refused)."""
    return [SelectItems(m, Budget(2.0, 1e-3), seed=SEED, privacy_unit=privacy_unit)
            for m in TWO_SELECTIONS]


def _two_selections(p):
    """The cases of test_two_sequential_selections_of_one_input_both_release."""
    by_user: dict = {}
    for user, item in corpus():
        by_user.setdefault(user, []).append(item)
    cases = {}
    for privacy_unit in ("user_id", "element"):
        data = corpus() if privacy_unit == "user_id" else list(by_user.values())
        shared = p | f"Create shared {privacy_unit}" >> beam.Create(data)
        for i, select in enumerate(_two_selects(privacy_unit)):
            cases["two", privacy_unit, i] = {
                "together": shared | f"Select{i} {privacy_unit}" >> select}
        # Each selection run alone (same seed) on its own copy of the input, for comparison.
        for i, select in enumerate(_two_selects(privacy_unit)):
            cases["two", privacy_unit, i]["alone"] = (
                p | f"Create{i} {privacy_unit}" >> beam.Create(data)
                | f"Alone{i} {privacy_unit}" >> select)
    return cases


@pytest.mark.parametrize("privacy_unit", ["user_id", "element"])
def test_two_sequential_selections_of_one_input_both_release(outputs, privacy_unit):
    # Found while testing the element path: fed from one PCollection with no
    # shuffle before them (privacy_unit="element"), two policy histograms
    # shared a fused stage on the DirectRunner, and only one stateful DoFn's
    # end-of-window timer fired: the other selection released nothing,
    # silently (a runner bug; a stage boundary before the state avoids it).
    # The runner that showed the bug: the DirectRunner hands a batch pipeline to
    # Prism where Prism can be fetched, to the FnApiRunner otherwise; the
    # fixture's pipeline runs on the FnApiRunner.
    assert RUNNER == "FnApiRunner"
    for i in range(len(TWO_SELECTIONS)):
        together = outputs["two", privacy_unit, i]["together"]
        by_itself = outputs["two", privacy_unit, i]["alone"]
        assert together and sorted(together) == sorted(by_itself), f"Released{i}"


@pytest.mark.parametrize("case", range(len(GW_HISTOGRAMS)),
                         ids=[f"{m}-{s}-{'public' if p else None}"
                              for m, s, p in GW_HISTOGRAMS])
def test_gw_beam_histogram_has_the_keys_of_the_pure_reference(outputs, case):
    # The histogram the Beam path noises (OrderItemsForGW + SequentialPolicyHistogram)
    # has exactly the keys of policies.policy_histogram on the same lists, zero
    # weights included, and the same weights.
    max_items, shards, public = GW_HISTOGRAMS[case]
    pairs = corpus()
    cutoff = GW_CUTOFF
    expected = expected_histogram(pairs, GreedyWithoutSampling(max_items, shards=shards,
                                                               public_counts=public), cutoff)
    assert 0.0 in expected.values()
    items = outputs["gw", case]
    got = dict(items)
    assert len(got) == len(items) and set(got) == set(expected)
    assert all(got[k] == pytest.approx(w, abs=1e-12) for k, w in expected.items())
    if shards == 1:  # one order: the pure reference is policy_histogram itself
        counts = user_counts(pairs)
        ordered = sorted(gw_lists(counts, max_items, public),
                         key=lambda u: sequential.user_order_key(u[0], ORDER_KEY))
        assert policies.policy_histogram([items for _, items in ordered],
                                         policies.greedy_update, cutoff) == expected


GW_KT_PUBLIC = {"w7": 1000, "w3": 50}


def test_gw_kt_with_public_counts_as_a_pcollection(outputs):
    select = outputs["gw-kt", "select"]
    expected = expected_release(corpus(), GreedyWithoutSampling(3, public_counts=GW_KT_PUBLIC),
                                select)
    assert sorted(outputs["gw-kt"]) == expected
    assert select.report["mechanism"]["name"] == "gw-kt"
    assert select.report["mechanism"]["public_counts"] == "PCollection"


def test_no_config_holds_a_pcollection():
    # The public counts' PCollection is the transform's side input, never a config's.
    p = TestPipeline()
    public_pc = p | beam.Create([("w7", 1000)])
    with pytest.raises(TypeError, match="a PCollection of \\(item, count\\) goes to the "
                                        "transform"):
        GreedyWithoutSampling(3, public_counts=public_pc)
    with pytest.raises(ValueError, match="public_order=True\\) ranks items by public counts"):
        SelectItems(GreedyWithoutSampling(3, public_order=True), Budget(2.0, 1e-3))
    with pytest.raises(ValueError, match="public_counts ranks GW-KT's items"):
        SelectItems(GreedyWithoutSampling(3), Budget(2.0, 1e-3), public_counts=public_pc)
    with pytest.raises(TypeError, match="public_counts must be a PCollection"):
        SelectItems(GreedyWithoutSampling(3, public_order=True), Budget(2.0, 1e-3),
                    public_counts={"w7": 1000})
    assert GreedyWithoutSampling(public_order=True).max_items_per_user == 300
    assert GreedyWithoutSampling(public_counts={"a": 1}).public_order


@pytest.mark.parametrize("mechanism", UNSEEDED, ids=lambda m: m.name)
def test_never_releases_an_item_nobody_holds(outputs, mechanism):
    held = {item for _, item in corpus()}
    items = outputs["unseeded", mechanism.name]
    assert set(items) <= held, set(items) - held


def test_configs_validate_and_report_the_cutoff():
    with pytest.raises(ValueError, match="alpha must be a finite number >= 0, got -1.0"):
        PolicyLaplace(alpha=-1)
    with pytest.raises(ValueError, match="shards must be an int >= 1, got 0"):
        PolicyGaussian(shards=0)
    with pytest.raises(TypeError, match="public_counts must be None, a mapping"):
        GreedyWithoutSampling(public_counts=[("a", 1)])
    with pytest.raises(ValueError, match=r"GW needs a cutoff Γ >= 1 \(gw Theorem 1\)"):
        GreedyWithoutSampling(1, alpha=0).calibrate(Budget(0.5, 0.6))
    with pytest.raises(ValueError, match="max_items_per_user must be >= 1, got 0"):
        GreedyWithoutSampling(0)
    report = SelectItems(PolicyGaussian(100), Budget(3.0, np.exp(-10))).report
    # Γ = ρ_Gauss + α·σ (Algorithm 5, as corrected in docs/privacy.md), with the
    # optimal δ split: 6.81355 + 3 × 1.32038 (δ/2 each gave 6.8237 + 3 × 1.33279).
    assert report["cutoff"] == pytest.approx(6.81355 + 3 * 1.32038, abs=2e-4)
    assert report["cutoff"] == pytest.approx(
        report["release_threshold"] + 3 * report["noise_scale"], rel=1e-12)
    assert "fresh secret key per run" in report["user_order"]
    gw = SelectItems(GreedyWithoutSampling(1), Budget(3.0, np.exp(-10))).report
    assert gw["release_threshold"] == pytest.approx(4.1023, abs=5e-5)  # ρ_GW (docs/privacy.md)
    gw = SelectItems(GreedyWithoutSampling(100), Budget(1.7, 8.1142e-5)).report
    assert gw["release_threshold"] == pytest.approx(7.86768, abs=5e-6)  # docs/privacy.md golden
    assert gw["mechanism"]["max_items_per_user"] == 100
    # Under zCDP the Laplace ε is √(2ρ), as for Policy Laplace.
    z = GreedyWithoutSampling(50).calibrate(ZCDPBudget(0.5, 1e-5))
    assert z.noise_scale == pytest.approx(1.0)
    assert z.release_threshold == pytest.approx(14.76558, abs=5e-6)
    assert (mechanism_from_name("policy-laplace", max_items_per_user=7, alpha=2.0)
            == PolicyLaplace(7, alpha=2.0))
    assert mechanism_from_name("gw", max_items_per_user=7) == GreedyWithoutSampling(7)
    # Default Δ0: 30 for GW, 300 for GW-KT (whose lists start with the common words).
    assert GreedyWithoutSampling().max_items_per_user == 30
    assert GreedyWithoutSampling(public_counts={"a": 1}).max_items_per_user == 300
    assert GreedyWithoutSampling(5, public_counts={"a": 1}).max_items_per_user == 5


@pytest.mark.parametrize("max_items", [1, 30])
def test_gw_single_user_with_1000_items_releases_with_probability_at_most_delta(max_items):
    # One user holding 1,000 unique items: GW keeps its top Δ0, puts its whole
    # budget of 1 on the first (Γ ≥ 1) and gives the other Δ0 − 1 weight 0;
    # all Δ0 keys are noised. That is the worst case of the threshold, so
    # anything is released with probability exactly δ. We run the pure core
    # (policy + release_mask) 20,000 times at δ = 0.05 and compare with the
    # 1 − 1e-8 quantile of Binomial(20,000, δ): a correct mechanism fails by
    # chance with probability ≤ 1e-8 (2e-8 for both Δ0).
    budget = Budget(1.0, 0.05)
    cal = GreedyWithoutSampling(max_items).calibrate(budget)
    items = [f"item{i}" for i in range(1000)]
    n = 20_000
    order = policies.gw_item_order({i: 1 for i in items}, lambda i: stable_hash64(i, key=b"k"),
                                   max_items)
    hist = policies.policy_histogram([order], policies.greedy_update, cal.cutoff)
    assert sorted(hist.values()) == [0.0] * (max_items - 1) + [1.0]
    assert thresholds.gw_release_probability(cal.noise_scale, cal.release_threshold,
                                             hist.values()) == pytest.approx(budget.delta)
    weights = np.tile(np.array(list(hist.values())), (n, 1))
    hits = int(release_mask(weights, cal, os_rng()).any(axis=1).sum())
    assert hits <= stats.binom.ppf(1 - 1e-8, n, budget.delta), hits
    # ... and not far below it: the threshold is not wastefully high (fails by
    # chance w.p. < 1e-8 too).
    assert hits >= stats.binom.ppf(1e-8, n, budget.delta), hits


def test_a_users_gw_list_does_not_depend_on_who_the_worker_saw_first():
    # A per-worker tie-key cache keyed by equality would let 1, 1.0 and True share an
    # entry though their keyed hashes differ: user B's list would change once another
    # user holding the int 1 was ordered.
    from beam_dpsu.beam.sequential import _TopItemsFn
    key = b"k" * 32
    z = next(f"z{i}" for i in range(1000)
             if (stable_hash64(1.0, key=key) < stable_hash64(f"z{i}", key=key))
             != (stable_hash64(1, key=key) < stable_hash64(f"z{i}", key=key)))
    user_b = ("B", {1.0: 1, z: 1})
    alone = _TopItemsFn(key, 1)
    alone.setup()
    shared = _TopItemsFn(key, 1)
    shared.setup()
    list(shared.process(("A", {1: 5})))
    assert list(shared.process(user_b)) == list(alone.process(user_b))
