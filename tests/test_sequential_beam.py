"""TestPipeline tests of the sequential mechanisms (stateful DoFn), sharded and not,
and the single-user statistical test of GW."""

import hashlib

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from scipy import stats

from beam_dpsu import (Budget, GreedyWithoutSampling, PolicyGaussian, PolicyLaplace,
                       SelectItems, ZCDPBudget, mechanism_from_name)
from beam_dpsu import policies
from beam_dpsu.bounding import sample_items
from beam_dpsu.calibration import release_mask
from beam_dpsu.noise import derived_rng, os_rng, stable_hash64
from beam_dpsu.sequential import sharded_policy_histogram

SEED = 17


def corpus():
    """Zipf-like data: user u holds words w0..w(k−1) with repeats, k from 1 to 12."""
    rng = np.random.default_rng(3)
    pairs = []
    for u in range(120):
        k = int(rng.integers(1, 13))
        for j in range(k):
            pairs += [(f"user{u}", f"w{int(rng.zipf(1.6)) % 40}")] * int(rng.integers(1, 3))
    return pairs


def expected_release(pairs, mechanism, select):
    """The seeded release, computed by the pure core with the transform's key."""
    key = hashlib.sha256(b"beam_dpsu/order/%d" % SEED).digest()
    counts = {}
    for u, item in pairs:
        counts.setdefault(u, {})
        counts[u][item] = counts[u].get(item, 0) + 1
    cal = select.calibration
    if isinstance(mechanism, GreedyWithoutSampling):
        tie = lambda item: stable_hash64(item, key=key)  # noqa: E731
        public = mechanism.public_counts
        named = [(u, policies.gw_item_order(c, tie, public)) for u, c in counts.items()]
        update = policies.greedy_update
    else:
        named = [(u, sample_items(c, mechanism.max_items_per_user,
                                  derived_rng(SEED, "sample", "", u), ordered=True))
                 for u, c in counts.items()]
        update = (policies.l1_descent if isinstance(mechanism, PolicyLaplace)
                  else policies.l2_descent)
    hist = sharded_policy_histogram(named, update, cal.cutoff, mechanism.shards, key)
    assert all(w > 0 for w in hist.values())
    return sorted(item for item, w in hist.items()
                  if release_mask(w, cal, derived_rng(SEED, "noise", "", item)))


MECHANISMS = [PolicyLaplace(5), PolicyLaplace(5, shards=3), PolicyGaussian(5, alpha=2),
              PolicyGaussian(5, shards=4), GreedyWithoutSampling(), GreedyWithoutSampling(shards=2),
              GreedyWithoutSampling(public_counts={"w7": 1000, "w3": 50})]


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=lambda m: f"{m.name}-{m.shards}")
def test_seeded_release_equals_pure_core(mechanism):
    select = SelectItems(mechanism, Budget(2.0, 1e-3), seed=SEED)
    pairs = corpus()
    expected = expected_release(pairs, mechanism, select)
    assert expected  # the test data releases something
    with TestPipeline() as p:
        # Input order reversed: the keyed-hash order must make it irrelevant.
        released = p | beam.Create(list(reversed(pairs))) | select
        assert_that(released, equal_to(expected))


def test_gw_kt_with_public_counts_as_a_pcollection():
    public = {"w7": 1000, "w3": 50}
    pairs = corpus()
    with TestPipeline() as p:
        public_pc = p | "Public" >> beam.Create(sorted(public.items()))
        select = SelectItems(GreedyWithoutSampling(public_counts=public_pc), Budget(2.0, 1e-3),
                             seed=SEED)
        expected = expected_release(pairs, GreedyWithoutSampling(public_counts=public), select)
        released = p | "Data" >> beam.Create(pairs) | select
        assert_that(released, equal_to(expected))
    assert select.report["mechanism"]["name"] == "gw-kt"


@pytest.mark.parametrize("mechanism", [PolicyLaplace(5), PolicyGaussian(5), GreedyWithoutSampling()],
                         ids=lambda m: m.name)
def test_never_releases_an_item_nobody_holds(mechanism):
    pairs = corpus()
    held = {item for _, item in pairs}
    with TestPipeline() as p:
        released = p | beam.Create(pairs) | SelectItems(mechanism, ZCDPBudget(0.3, 1e-4))

        def only_held_items(items):
            assert set(items) <= held, set(items) - held

        assert_that(released, only_held_items)


def test_configs_validate_and_report_the_cutoff():
    with pytest.raises(ValueError, match="alpha must be a finite number >= 0, got -1.0"):
        PolicyLaplace(alpha=-1)
    with pytest.raises(ValueError, match="shards must be an int >= 1, got 0"):
        PolicyGaussian(shards=0)
    with pytest.raises(TypeError, match="public_counts must be None, a mapping"):
        GreedyWithoutSampling(public_counts=[("a", 1)])
    with pytest.raises(ValueError, match=r"GW needs a cutoff Γ >= 1 \(gw Theorem 1\)"):
        GreedyWithoutSampling(alpha=0).calibrate(Budget(0.5, 0.6))
    report = SelectItems(PolicyGaussian(100), Budget(3.0, np.exp(-10))).report
    # Γ = ρ_Gauss + α·σ = 6.8237 + 3 × 1.33279 (Algorithm 5, as corrected in DESIGN §3).
    assert report["cutoff"] == pytest.approx(6.8237 + 3 * 1.33279, abs=1e-4)
    assert "fresh secret key per run" in report["user_order"]
    gw = SelectItems(GreedyWithoutSampling(), Budget(3.0, np.exp(-10))).report
    assert gw["release_threshold"] == pytest.approx(4.1023, abs=5e-5)  # ρ_GW (DESIGN §4)
    assert mechanism_from_name("policy-laplace", max_items_per_user=7, alpha=2.0) == PolicyLaplace(7, 2.0)
    with pytest.raises(ValueError, match="does not take \\['max_items_per_user'\\]"):
        mechanism_from_name("gw", max_items_per_user=7)


def test_gw_single_user_with_1000_items_releases_with_probability_at_most_delta():
    # One user holding 1,000 unique items: GW puts its whole budget of 1 on one
    # item (Γ ≥ 1), so exactly one item enters the histogram and it is released
    # with probability ½·exp(−(ρ_GW − 1)/λ) = δ. We run the pure core (policy +
    # release_mask) 20,000 times at δ = 0.05 and compare with the 1 − 1e-8
    # quantile of Binomial(20,000, δ): a correct mechanism fails by chance
    # with probability ≤ 1e-8.
    budget = Budget(1.0, 0.05)
    cal = GreedyWithoutSampling().calibrate(budget)
    items = [f"item{i}" for i in range(1000)]
    n = 20_000
    order = policies.gw_item_order({i: 1 for i in items}, lambda i: stable_hash64(i, key=b"k"))
    hist = policies.policy_histogram([order], policies.greedy_update, cal.cutoff)
    assert list(hist.values()) == [1.0]  # one item, weight 1, no zero-weight keys
    weights = np.tile(np.array(list(hist.values())), (n, 1))
    hits = int(release_mask(weights, cal, os_rng()).any(axis=1).sum())
    assert hits <= stats.binom.ppf(1 - 1e-8, n, budget.delta), hits
