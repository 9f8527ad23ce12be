"""Golden tests of the release thresholds (docs/privacy.md golden values, from dpsu and gw)."""

import math
import random

import mpmath
import numpy as np
import pytest
from scipy import stats

from beam_dpsu.core import thresholds
from beam_dpsu.core.gaussian import analytic_gaussian_sigma
from tests.support.exact_tails import DIGITS, gaussian_sf, laplace_sf

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
    # The zero-weight keys' term underflows: Brent's bracket must still have a sign
    # change (else "f(a) and f(b) must have different signs").
    rho = thresholds.gw_threshold(1 / epsilon, 1e-5, 30)
    assert rho >= 1.0
    weights = [1.0] + [0.0] * 29
    assert thresholds.gw_release_probability(1 / epsilon, rho, weights) <= 1e-5 * (1 + 1e-9)


@pytest.mark.parametrize("epsilon,delta,max_items", [(1.0, 0.3, 2), (1.7, 8.1142e-5, 30),
                                                     (0.5, 0.1, 7)])
def test_gw_threshold_never_lands_on_the_unsafe_side(epsilon, delta, max_items):
    # Brent's root sits up to 8e-14·δ above δ; the threshold is stepped up to the
    # first float where the worst case is at most δ.
    lam = 1 / epsilon
    rho = thresholds.gw_threshold(lam, delta, max_items)
    log_none = (math.log(1 - 0.5 * math.exp(-(rho - 1) / lam)) if rho >= 1 else None)
    assert log_none is not None
    worst = -math.expm1(log_none + (max_items - 1) * math.log1p(-0.5 * math.exp(-rho / lam)))
    assert worst <= delta * (1 + 1e-15)


# --- the closed-form thresholds meet δ in exact arithmetic (docs/privacy.md, invariant 3) ---
# The lone-user release chance at the computed ρ must not exceed δ: evaluated at 50 digits,
# where the float error of ρ (~1e-14 relative) shows. A ρ rounded to nearest, not up, is
# over δ by that much.

def _weighted_gaussian_chance(rho: float, sigma: float, t: int):
    """1 − (1 − Φ̄((ρ − 1/√t)/σ))^t: one of t keys at weight 1/√t released."""
    z = (mpmath.mpf(rho) - 1 / mpmath.sqrt(t)) / mpmath.mpf(sigma)
    return 1 - (1 - gaussian_sf(z)) ** t


def _weighted_laplace_chance(rho: float, scale: float, t: int):
    z = (mpmath.mpf(rho) - mpmath.mpf(1) / t) / mpmath.mpf(scale)
    return 1 - (1 - laplace_sf(z)) ** t


def _count_chance(sf, rho: float, scale: float, max_items: int):
    return 1 - (1 - sf((mpmath.mpf(rho) - 1) / mpmath.mpf(scale))) ** max_items


def _worst_weighted_gaussian_chance(sigma: float, delta: float, max_items: int):
    rho = thresholds.weighted_gaussian_threshold(sigma, delta, max_items)
    with mpmath.workdps(DIGITS):
        return max(_weighted_gaussian_chance(rho, sigma, t) for t in range(1, max_items + 1))


@pytest.mark.parametrize("sigma, delta, max_items", [
    # the relative excess over δ of a ρ rounded to nearest
    (14.996, 5.1e-09, 5),          # 9.6e-15
    (12.72007031779105, 2.929550059139368e-10, 64),   # 1.2e-14
    (0.9309992931610025, 0.0031596794974115177, 3),   # 2.4e-15
])
def test_weighted_gaussian_threshold_meets_delta_exactly(sigma, delta, max_items):
    """The SIPS-round / Weighted Gaussian threshold (``weighted_gaussian_threshold``):
    for every t ≤ Δ0, 1 − (1 − Φ̄((ρ − 1/√t)/σ))^t ≤ δ in 50-digit arithmetic."""
    assert _worst_weighted_gaussian_chance(sigma, delta, max_items) <= mpmath.mpf(delta)


def test_weighted_gaussian_threshold_meets_delta_on_a_random_grid():
    """30 (σ, δ, Δ0) drawn from a fixed seed (σ log-uniform in [0.05, 50], δ in
    [1e-12, 0.25], Δ0 ≤ 64): at a ρ rounded to nearest about a quarter of such draws
    exceed δ (by up to 1.2e-14 relative). Every one must meet δ."""
    rng = np.random.default_rng(20240611)
    over = []
    for _ in range(30):
        sigma = float(np.exp(rng.uniform(math.log(0.05), math.log(50.0))))
        delta = float(10.0 ** rng.uniform(-12.0, -0.6))
        max_items = int(rng.integers(1, 65))
        if _worst_weighted_gaussian_chance(sigma, delta, max_items) > mpmath.mpf(delta):
            over.append((sigma, delta, max_items))
    assert not over


# The other closed-form thresholds round the same way (each case: the largest relative
# excess over δ of a ρ rounded to nearest, in 400 random draws).
@pytest.mark.parametrize("kind, scale, delta, max_items", [
    ("weighted-laplace", 12.782, 4.75e-08, 1),   # 2.6e-15
    ("count-gaussian", 1.349, 3.04e-09, 5),      # 7.1e-15
    ("count-laplace", 0.2, 6.15e-10, 3),         # 3.8e-15
])
def test_other_thresholds_meet_delta_exactly(kind, scale, delta, max_items):
    with mpmath.workdps(DIGITS):
        _check_other_threshold(kind, scale, delta, max_items)


def _check_other_threshold(kind, scale, delta, max_items):
    if kind == "weighted-laplace":
        rho = thresholds.weighted_laplace_threshold(scale, delta, max_items)
        chance = max(_weighted_laplace_chance(rho, scale, t) for t in range(1, max_items + 1))
    elif kind == "count-gaussian":
        rho = thresholds.count_gaussian_threshold(scale, delta, max_items)
        chance = _count_chance(gaussian_sf, rho, scale, max_items)
    else:
        rho = thresholds.count_laplace_threshold(scale, delta, max_items)
        chance = _count_chance(laplace_sf, rho, scale, max_items)
    assert chance <= mpmath.mpf(delta)


def test_the_weighted_gaussian_threshold_is_off_by_rounding_only():
    """What the checks above see is rounding, not a wrong formula: the chance is within
    1e-13 relative of δ (so ρ is rounded up, the formula kept)."""
    for sigma, delta, max_items in [(14.996, 5.1e-09, 5), (12.72007031779105,
                                                          2.929550059139368e-10, 64)]:
        chance = _worst_weighted_gaussian_chance(sigma, delta, max_items)
        assert chance <= mpmath.mpf(delta) * (1 + mpmath.mpf("1e-13"))


# --- GW's threshold meets δ in exact arithmetic (docs/privacy.md, "GW and GW-KT") ----------
# The lone-user release chance at the returned ρ, at 60 digits (δ goes down to 1e-257).

def _gw_chance(scale: float, rho: float, max_items: int):
    """1 − (1 − p(1))·(1 − p(0))^{Δ0−1}, in logs (60 digits: δ goes down to 1e-257)."""
    def sf(z):  # P[Lap(0, 1) > z]
        return mpmath.mpf(1) / 2 * mpmath.exp(-z) if z >= 0 else 1 - mpmath.exp(z) / 2

    rho, s = mpmath.mpf(rho), mpmath.mpf(scale)
    return -mpmath.expm1(mpmath.log1p(-sf((rho - 1) / s))
                         + (max_items - 1) * mpmath.log1p(-sf(rho / s)))


def _gw_over(scale: float, delta: float, max_items: int) -> bool:
    rho = thresholds.gw_threshold(scale, delta, max_items)
    with mpmath.workdps(60):
        return bool(_gw_chance(scale, rho, max_items) > mpmath.mpf(delta))


@pytest.mark.parametrize("scale, delta, max_items", [
    # the relative excess over δ of the float root, not stepped up
    (1 / 1.7, 8.1142e-5, 1),            # 7.9e-16
    (1.0, 1e-6, 30),                    # 1.3e-15
    (1 / 0.12434830927900853, 3.3286094412569705e-58, 1000),   # 3.6e-14
    (1 / 0.5323527566452354, 5.170016412645408e-60, 5),        # 2.1e-14
    (21.8, 1.3e-257, 2),
    (1 / 98.46, 3.4227e-50, 1), (0.5, 0.3, 4), (10.0, 0.7, 3),
])
def test_gw_threshold_meets_delta_exactly(scale, delta, max_items):
    assert not _gw_over(scale, delta, max_items)


def test_gw_threshold_meets_delta_on_a_random_grid():
    """80 (λ, δ, Δ0) from a fixed seed (ε = 1/λ log-uniform in [0.1, 160], δ in
    [1e-60, 1e-2]); at the float root, not stepped up, 24 of them are over δ."""
    rng = random.Random(3434)
    over = []
    for _ in range(80):
        epsilon, delta = 10 ** rng.uniform(-1, 2.2), 10 ** rng.uniform(-60, -2)
        max_items = rng.choice([1, 2, 5, 30, 65, 300, 1000])
        if _gw_over(1.0 / epsilon, delta, max_items):
            over.append((epsilon, delta, max_items))
    assert not over


def test_gw_threshold_moved_up_by_a_sliver_only():
    # The published ρ_GW = 1 − λ·ln(2δ) at Δ0 = 1 (docs/privacy.md, Golden values).
    rho = thresholds.gw_threshold(1 / 1.7, 8.1142e-5, 1)
    exact = 1 - mpmath.log(2 * mpmath.mpf(8.1142e-5)) / mpmath.mpf(1.7)
    assert 0 <= (rho - exact) / exact < 1e-13
