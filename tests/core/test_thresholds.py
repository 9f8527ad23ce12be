"""Golden tests of the release thresholds (docs/privacy.md golden values, from dpsu and gw)."""

import math

import numpy as np
import pytest
from scipy import stats

from beam_dpsu.core import thresholds
from beam_dpsu.core.gaussian import analytic_gaussian_sigma

EPS = 3.0
DELTA = math.exp(-10)  # dpsu §6: ε = 3, δ = e^-10


def test_weighted_laplace_golden():
    # docs/privacy.md: ρ_Lap(Δ0 = 100) = 4.6473 and ρ_Lap(Δ0 = 1) = 4.1023 (dpsu Thm 4.1/B.1).
    assert (thresholds.weighted_laplace_threshold(1 / EPS, DELTA, 100)
            == pytest.approx(4.6473, abs=5e-5))
    assert (thresholds.weighted_laplace_threshold(1 / EPS, DELTA, 1)
            == pytest.approx(4.1023, abs=5e-5))


def test_gw_golden_equals_laplace_at_one_item():
    # docs/privacy.md: ρ_GW = 1 − λ ln(2δ) = 4.1023 = ρ_Lap(Δ0 = 1) (gw §3): the fixed
    # threshold at Δ0 = 1 is the published one.
    assert thresholds.gw_threshold(1 / EPS, DELTA, 1) == pytest.approx(4.1023, abs=5e-5)
    assert thresholds.gw_threshold(1 / EPS, DELTA, 1) == pytest.approx(
        thresholds.weighted_laplace_threshold(1 / EPS, DELTA, 1), rel=1e-9)
    assert thresholds.gw_threshold(1 / EPS, DELTA, 1) == pytest.approx(
        1 - math.log(2 * DELTA) / EPS, rel=1e-12)


@pytest.mark.parametrize("epsilon,delta,max_items,expected", [
    # docs/privacy.md (the GW fix of gw §3): ε = 1.7, δ = 8.1142e-5 (dp-sips Table 2's GW budget).
    (1.7, 8.1142e-5, 1, 6.13304),
    (1.7, 8.1142e-5, 30, 7.21549),
    (1.7, 8.1142e-5, 100, 7.86768),
    (1.0, 1e-5, 50, 14.76558),
])
def test_gw_threshold_golden(epsilon, delta, max_items, expected):
    assert thresholds.gw_threshold(1 / epsilon, delta, max_items) == pytest.approx(
        expected, abs=5e-6)


@pytest.mark.parametrize("epsilon,delta", [(1.7, 8.1142e-5), (1.0, 1e-5), (3.0, DELTA),
                                           (0.1, 1e-9), (5.0, 0.3), (1.0, 1e-200)])
@pytest.mark.parametrize("max_items", [1, 2, 10, 100, 1000])
def test_gw_worst_case_release_probability_is_delta(epsilon, delta, max_items):
    # The exact chance that one of the extra user's keys is released, in the
    # worst case of the proof (one key at weight 1, Δ0 − 1 at 0), is δ at ρ:
    # computed independently with scipy's Laplace survival function.
    lam = 1 / epsilon
    rho = thresholds.gw_threshold(lam, delta, max_items)
    weights = [1.0] + [0.0] * (max_items - 1)
    survival = stats.laplace(scale=lam).sf
    if delta > 1e-100:  # 1 − Π(1 − p) in plain floats loses precision below that
        exact = 1 - (1 - survival(rho - 1)) * (1 - survival(rho)) ** (max_items - 1)
        assert exact == pytest.approx(delta, rel=1e-6)
    assert thresholds.gw_release_probability(lam, rho, weights) <= delta * (1 + 1e-9)
    assert thresholds.gw_release_probability(lam, rho, weights) == pytest.approx(delta, rel=1e-9)
    # Any other admissible split of x's budget over ≤ Δ0 keys releases less (convexity).
    rng = np.random.default_rng(max_items)
    for _ in range(20):
        w = rng.dirichlet(np.ones(max_items)) * rng.uniform(0, 1)
        assert thresholds.gw_release_probability(lam, rho, w) <= delta * (1 + 1e-9)


def test_gw_threshold_grows_with_delta0_and_is_below_the_union_bound():
    lam, delta = 1 / 1.7, 8.1142e-5
    rhos = [thresholds.gw_threshold(lam, delta, d) for d in (1, 3, 10, 30, 100, 300)]
    assert rhos == sorted(rhos) and len(set(rhos)) == len(rhos)
    # The union bound p(1) + (Δ0 − 1)·p(0) = δ gives a slightly larger ρ.
    union = lam * math.log((math.exp(1 / lam) + 99) / (2 * delta))
    assert rhos[4] < union < rhos[4] + 1e-3


def test_gw_threshold_validation():
    with pytest.raises(ValueError, match="max_items_per_user must be >= 1, got 0"):
        thresholds.gw_threshold(1.0, 1e-5, 0)
    with pytest.raises(ValueError, match="delta"):
        thresholds.gw_threshold(1.0, 1.0, 10)
    with pytest.raises(ValueError, match="must be a finite number > 0"):
        thresholds.gw_threshold(0.0, 1e-5, 10)


def test_weighted_gaussian_golden():
    # docs/privacy.md: σ(ε, δ/2, L2=1) = 1.33279, ρ_G(Δ0 = 100) = 6.8237 (dpsu Thm 5.1/B.2).
    sigma = analytic_gaussian_sigma(EPS, DELTA / 2)
    assert (thresholds.weighted_gaussian_threshold(sigma, DELTA / 2, 100)
            == pytest.approx(6.8237, abs=5e-5))


def test_weighted_thresholds_match_naive_formula_where_it_is_accurate():
    # At δ = 1e-3 the textbook expression loses no precision; the stable form must agree.
    lam, sigma, d, d0 = 0.7, 1.3, 1e-3, 50
    t = np.arange(1, d0 + 1)
    naive_lap = np.max(1 / t + lam * np.log(1 / (2 * (1 - (1 - d) ** (1 / t)))))
    naive_gauss = np.max(1 / np.sqrt(t) + sigma * stats.norm.ppf((1 - d) ** (1 / t)))
    assert thresholds.weighted_laplace_threshold(lam, d, d0) == pytest.approx(naive_lap, rel=1e-10)
    assert (thresholds.weighted_gaussian_threshold(sigma, d, d0)
            == pytest.approx(naive_gauss, rel=1e-10))


def test_thresholds_stay_finite_for_tiny_delta():
    # (1 − 1e-20)^(1/t) rounds to 1 in floating point; the stable form does not.
    rho = thresholds.weighted_gaussian_threshold(1.0, 1e-20, 100)
    assert math.isfinite(rho) and rho > 9.0
    assert math.isfinite(thresholds.weighted_laplace_threshold(1.0, 1e-20, 100))


def test_count_thresholds_are_the_worst_case_t_equals_delta0():
    lam = 100 / EPS
    expected = 1 + lam * math.log(1 / (2 * (1 - (1 - DELTA) ** (1 / 100))))
    assert thresholds.count_laplace_threshold(lam, DELTA, 100) == pytest.approx(expected, rel=1e-9)
    sigma = analytic_gaussian_sigma(EPS, DELTA / 2, math.sqrt(100))
    expected = 1 + sigma * stats.norm.isf(1 - (1 - DELTA / 2) ** (1 / 100))
    assert (thresholds.count_gaussian_threshold(sigma, DELTA / 2, 100)
            == pytest.approx(expected, rel=1e-9))


def test_dp_sips_weighted_gaussian_threshold_under_zcdp():
    # dp-sips Alg. 2: σ = 1/√(2ρ), T = max_k 1/√k + σ Φ⁻¹((1−δ)^{1/k}); ρ = 0.1, δ = 1e-5, Δ0 = 100.
    sigma = 1 / math.sqrt(0.2)
    t = np.arange(1, 101)
    expected = np.max(1 / np.sqrt(t) + sigma * stats.norm.isf(-np.expm1(np.log1p(-1e-5) / t)))
    got = thresholds.weighted_gaussian_threshold(sigma, 1e-5, 100)
    assert got == pytest.approx(expected, rel=1e-12)
    assert got == pytest.approx(11.72607, abs=1e-5)


def test_policy_cutoff():
    assert thresholds.policy_cutoff(4.0, 0.5, 3) == 5.5
    with pytest.raises(ValueError, match="alpha"):
        thresholds.policy_cutoff(4.0, 0.5, -1)


@pytest.mark.parametrize("fn", [thresholds.weighted_laplace_threshold,
                                thresholds.weighted_gaussian_threshold,
                                thresholds.count_laplace_threshold,
                                thresholds.count_gaussian_threshold])
def test_threshold_validation(fn):
    with pytest.raises(ValueError, match="max_items_per_user must be >= 1, got 0"):
        fn(1.0, 1e-5, 0)
    with pytest.raises(ValueError, match="delta"):
        fn(1.0, 0.0, 10)
    with pytest.raises(ValueError, match="must be a finite number > 0"):
        fn(-1.0, 1e-5, 10)
    with pytest.raises(TypeError, match="max_items_per_user must be an int"):
        fn(1.0, 1e-5, 2.5)


@pytest.mark.parametrize("epsilon", [34.0, 40.0, 50.0, 200.0])
def test_gw_threshold_at_very_large_epsilon(epsilon):
    # Review finding: the zero-weight keys' term underflows and Brent's bracket
    # had no sign change ("f(a) and f(b) must have different signs").
    rho = thresholds.gw_threshold(1 / epsilon, 1e-5, 30)
    assert rho >= 1.0
    weights = [1.0] + [0.0] * 29
    assert thresholds.gw_release_probability(1 / epsilon, rho, weights) <= 1e-5 * (1 + 1e-9)


@pytest.mark.parametrize("epsilon,delta,max_items", [(1.0, 0.3, 2), (1.7, 8.1142e-5, 30),
                                                     (0.5, 0.1, 7)])
def test_gw_threshold_never_lands_on_the_unsafe_side(epsilon, delta, max_items):
    # Review finding: Brent's root sat up to 8e-14·δ above δ; the threshold is
    # stepped up to the first float where the worst case is at most δ.
    lam = 1 / epsilon
    rho = thresholds.gw_threshold(lam, delta, max_items)
    log_none = (math.log(1 - 0.5 * math.exp(-(rho - 1) / lam)) if rho >= 1 else None)
    assert log_none is not None
    worst = -math.expm1(log_none + (max_items - 1) * math.log1p(-0.5 * math.exp(-rho / lam)))
    assert worst <= delta * (1 + 1e-15)
