"""Tight accounting of the Gaussian mechanisms under Budget(ε, δ) (docs/privacy.md, Accounting).

The noise of all rounds/levels is one analytic Gaussian at (ε, δ_noise), split
in μ² by the mechanism's schedule; δ_noise + δ_thr = δ is split to
minimise the release threshold (the search itself: test_delta_split.py); the
report states the exact Gaussian (ε′, δ′) curve. Golden checks against Google's
dp-accounting (PLD accountant) and the lone-user release bound.
"""

import math
import random
from fractions import Fraction

import dp_accounting
import numpy as np
import pytest
from dp_accounting.pld import pld_privacy_accountant
from scipy import special, stats

from beam_dpsu import SelectItems

from beam_dpsu.core import mechanisms

from beam_dpsu.core import hashing, ngram_calibration
from beam_dpsu.core.budgets import Budget, ZCDPBudget, dp_to_zcdp, geometric_split_weights
from beam_dpsu.core.gaussian import analytic_gaussian_sigma, gaussian_noise_schedule
from beam_dpsu.core.calibration import gaussian_dp_equivalents, release_mask
from beam_dpsu.extract_ngrams import ExtractNgrams
from beam_dpsu.core.thresholds import weighted_gaussian_threshold
from tests.support.gaussian_delta import gaussian_mechanism_delta

IMDB = Budget(1.765, 4.96e-5)
GAUSSIAN_SINGLE = [mechanisms.WeightedGaussian(100), mechanisms.CountGaussian(100),
                   mechanisms.PolicyGaussian(100), mechanisms.WeightedGaussian(1),
                   mechanisms.CountGaussian(10)]


def pld_epsilon(sigmas, delta) -> float:
    """ε at δ of the composition of Gaussian mechanisms (sensitivity 1), by dp-accounting's PLD."""
    acc = pld_privacy_accountant.PLDAccountant(value_discretization_interval=1e-4)
    acc.compose(dp_accounting.ComposedDpEvent(
        [dp_accounting.GaussianDpEvent(s) for s in sigmas]))
    return acc.get_epsilon(delta)


# --- the composed σ against dp-accounting --------------------------------------------


@pytest.mark.parametrize("rounds,ratio", [(3, 1 / 3), (2, 0.5), (4, 1.0)])
@pytest.mark.parametrize("budget", [IMDB, Budget(1.0, 1e-6)], ids=str)
def test_sips_rounds_compose_to_epsilon_at_delta_noise(rounds, ratio, budget):
    cal = mechanisms.SIPS(100, rounds=rounds, ratio=ratio).calibrate(budget)
    sigmas = [r.noise_scale for r in cal.rounds]
    # The rounds are one Gaussian mechanism at (ε, δ_noise): PLD's ε matches
    # (PLD rounds pessimistically, by < 1e-3 here).
    assert pld_epsilon(sigmas, cal.delta_noise) == pytest.approx(budget.epsilon, abs=2e-3)
    # ... with the existing geometric shape: μ_i² = w_i μ², i.e. ρ_i ∝ w_i.
    w = geometric_split_weights(rounds, ratio)
    mu2 = [1 / s ** 2 for s in sigmas]
    assert [m / sum(mu2) for m in mu2] == pytest.approx(w, rel=1e-12)
    assert [r.threshold_delta for r in cal.rounds] == pytest.approx(
        [x * cal.threshold_delta for x in w], rel=1e-12)


def test_a_wrong_composition_would_be_caught():
    # Teeth: calibrating every round to σ_total alone (no split of μ²) spends
    # far more than ε; the PLD comparison above would fail on it.
    cal = mechanisms.SIPS(100).calibrate(IMDB)
    assert pld_epsilon([cal.sigma_total] * 3, cal.delta_noise) > 2.5


@pytest.mark.parametrize("decay", ["equal", 0.7])
def test_dpne_levels_compose_to_epsilon_at_delta_noise(decay):
    budget = Budget(1.0, 1e-7)
    extract = ExtractNgrams(6, budget, max_items_per_user=10, noise_schedule=decay)
    assert pld_epsilon(extract.sigmas, extract.delta_noise) == pytest.approx(1.0, abs=2e-3)
    assert extract.delta_noise + extract.threshold_delta <= 1e-7
    # Only level 1 thresholds a lone user's items: its threshold has all of δ_thr.
    assert extract.level1_calibration.threshold_delta == extract.threshold_delta
    assert extract.report["delta_noise"] == extract.delta_noise


@pytest.mark.parametrize("mechanism", GAUSSIAN_SINGLE, ids=lambda m: m.name)
def test_single_round_sigma_against_pld(mechanism):
    cal = mechanism.calibrate(IMDB)
    # σ/Δ2 is the noise multiplier of a sensitivity-1 Gaussian.
    assert pld_epsilon([cal.noise_scale / cal.sensitivity], cal.delta_noise) == pytest.approx(
        IMDB.epsilon, abs=2e-3)


def test_equivalent_rho_at_imdb_budget():
    # The numbers of docs/benchmarks.md: σ = 2.117 at (1.765, δ/2) is an equivalent ρ of
    # 0.1116, against 0.0949 through zCDP (dp-sips Corollary 9, δ/2 each).
    sigma = analytic_gaussian_sigma(1.765, 4.96e-5 / 2)
    assert sigma == pytest.approx(2.117, abs=5e-4)
    assert 0.5 / sigma ** 2 == pytest.approx(0.1116, abs=5e-5)
    assert dp_to_zcdp(1.765, 4.96e-5, 4.96e-5 / 2).rho == pytest.approx(0.0949, abs=5e-5)
    # SIPS at the optimal split does at least as well as δ/2 each.
    rho = mechanisms.SIPS(100).calibrate(IMDB).zcdp_budget.rho
    assert rho >= 0.1116


@pytest.mark.parametrize("mechanism", GAUSSIAN_SINGLE + [mechanisms.SIPS(100)],
                         ids=lambda m: m.name)
@pytest.mark.parametrize("budget", [IMDB, Budget(0.5, 1e-10), Budget(10.0, 0.3)], ids=str)
def test_delta_is_never_overspent(mechanism, budget):
    cal = mechanism.calibrate(budget)
    assert cal.delta_noise + cal.threshold_delta <= budget.delta


# δ_noise + δ_thr ≤ δ in exact arithmetic, and all of δ spent: the thresholds cost δ_thr
# itself (docs/privacy.md, "The split between noise and thresholds"); charging them
# δ_thr/(1 − δ_thr) would leave δ_thr²/(1 − δ_thr) of δ unspent.

def _wasted_delta(delta: float, delta_noise: float, threshold_delta: float) -> Fraction:
    """δ − (δ_noise + δ_thr), exactly."""
    return Fraction(delta) - Fraction(delta_noise) - Fraction(threshold_delta)


SPLIT_MECHANISMS = [
    mechanisms.WeightedGaussian(100),
    mechanisms.CountGaussian(10),
    mechanisms.PolicyGaussian(100),
    mechanisms.SIPS(100, rounds=3),
]


@pytest.mark.parametrize("budget", [Budget(1.0, 0.1), Budget(1.0, 1e-5)])
@pytest.mark.parametrize("mechanism", SPLIT_MECHANISMS, ids=lambda m: m.name)
def test_a_gaussian_split_never_spends_past_its_delta(mechanism, budget):
    """δ_noise + δ_thr ≤ δ, exactly."""
    found = mechanism.calibrate(budget)
    assert _wasted_delta(budget.delta, found.delta_noise, found.threshold_delta) >= 0


@pytest.mark.parametrize("budget", [Budget(1.0, 0.1), Budget(3.0, 0.01)])
@pytest.mark.parametrize("mechanism", SPLIT_MECHANISMS, ids=lambda m: m.name)
def test_a_gaussian_split_spends_all_of_its_delta(mechanism, budget):
    """δ_noise + δ_thr = δ up to the rounding of δ_noise (two ulps of δ); a charge of
    δ_thr/(1 − δ_thr) would leave about 2.6e-3 of δ = 0.1 unspent."""
    found = mechanism.calibrate(budget)
    wasted = _wasted_delta(budget.delta, found.delta_noise, found.threshold_delta)
    assert 0 <= wasted <= 2 * Fraction(math.ulp(budget.delta))


def test_dpne_split_never_spends_past_its_delta():
    budget = Budget(1.0, 0.1)
    extract = ExtractNgrams(2, budget)
    spent = Fraction(extract.delta_noise) + Fraction(extract.threshold_delta)
    assert spent <= Fraction(budget.delta)


def test_dpne_split_spends_all_of_its_delta():
    budget = Budget(1.0, 0.1)
    extract = ExtractNgrams(2, budget)
    wasted = (Fraction(budget.delta) - Fraction(extract.delta_noise)
              - Fraction(extract.threshold_delta))
    assert 0 <= wasted <= 2 * Fraction(math.ulp(budget.delta))


def test_dpsu_even_delta_split_holds_exactly():
    """δ_noise + T·δ_k ≤ δ in exact arithmetic, over 60 budgets from a fixed seed: with
    δ_k = fl(δ_thr/T) rounded to nearest, 12 of them spend past δ."""
    rng = random.Random(1834)
    over = []
    for _ in range(60):
        epsilon, delta = 10 ** rng.uniform(-1, 1), 10 ** rng.uniform(-10, -3)
        levels, max_items = rng.choice([2, 3, 5, 6, 7]), rng.choice([1, 10, 100])
        cal = ngram_calibration.dpsu_even_calibration(Budget(epsilon, delta), levels, max_items)
        spent = Fraction(cal.delta_noise) + levels * Fraction(cal.threshold_delta)
        if spent > Fraction(delta):
            over.append((epsilon, delta, levels, max_items))
    assert not over


def test_zcdp_budget_keeps_its_meaning():
    # σ = 1/√(2ρ) and all of δ to the threshold, as before (docs/privacy.md, Accounting).
    cal = mechanisms.WeightedGaussian(100).calibrate(ZCDPBudget(0.1, 1e-5))
    assert cal.noise_scale == 1 / math.sqrt(0.2) and cal.threshold_delta == 1e-5
    assert cal.delta_noise is None
    assert cal.release_threshold == weighted_gaussian_threshold(1 / math.sqrt(0.2), 1e-5, 100)
    sips = mechanisms.SIPS(100).calibrate(ZCDPBudget(0.1, 1e-5))
    assert sips.zcdp_budget == ZCDPBudget(0.1, 1e-5) and sips.delta_noise is None


# --- the lone user's release probability ------------------------------------------------


def lone_user_release_probability(calibration, weight_of, t) -> float:
    """P[some of t items at weight w(t), held by one user, is released] (exact)."""
    z = (calibration.release_threshold - weight_of(t)) / calibration.noise_scale
    return float(-np.expm1(t * special.log_ndtr(z)))


@pytest.mark.parametrize("budget", [IMDB, Budget(1.0, 0.2)], ids=str)
def test_every_threshold_bounds_the_lone_user_release(budget):
    cals = [(m.calibrate(budget), m.item_weight, m.max_items_per_user)
            for m in (mechanisms.WeightedGaussian(10), mechanisms.CountGaussian(10))]
    cals.append((mechanisms.PolicyGaussian(10).calibrate(budget),
                 mechanisms.WeightedGaussian.item_weight, 10))
    sips = mechanisms.SIPS(10).calibrate(budget)
    cals += [(r, mechanisms.WeightedGaussian.item_weight, 10) for r in sips.rounds]
    for cal, weight_of, d0 in cals:
        worst = max(lone_user_release_probability(cal, weight_of, t) for t in range(1, d0 + 1))
        assert worst <= cal.threshold_delta * (1 + 1e-9)
        assert worst >= cal.threshold_delta * 0.5  # and not wastefully high


N_TRIALS = 20_000
QUANTILE = 1 - 1e-8


def test_sips_rounds_release_a_lone_users_items_at_most_delta_thr():
    # Statistical, on the noise-and-threshold core: a lone user with t = 10
    # items (weight 1/√10 each) in each round of SIPS under Budget(1, 0.2).
    # Each of the 3 checks fails by chance only above the Binomial(N, δ_r)
    # 1 − 1e-8 quantile: false-failure rate < 3e-8.
    cal = mechanisms.SIPS(10).calibrate(Budget(1.0, 0.2))
    rng = hashing.os_rng()
    for r in cal.rounds:
        weights = np.full((N_TRIALS, 10), 1 / math.sqrt(10))
        count = int(release_mask(weights, r, rng).any(axis=1).sum())
        assert count <= stats.binom.ppf(QUANTILE, N_TRIALS, r.threshold_delta), (count, r)


# --- the report's exact (ε, δ) statement --------------------------------------------------


def test_report_states_the_exact_gaussian_curve_under_a_budget():
    report = SelectItems(mechanisms.SIPS(100), IMDB).report
    eq = {round(e["delta"] / IMDB.delta, 6): e["epsilon"] for e in report["dp_equivalents"]}
    # At the δ asked for: the ε asked for (rounded up, never below).
    assert eq[1.0] == pytest.approx(1.765, abs=1e-9) and eq[1.0] <= 1.765 + 1e-12
    assert eq[10.0] < eq[2.0] < eq[1.0]
    assert 0.1 not in eq  # δ/10 is below the thresholds' δ here: not achievable
    assert report["delta_noise"] + report["threshold_delta"] <= IMDB.delta
    # Each entry matches dp-accounting: PLD ε of the composed rounds at δ′ − δ_thr cost.
    cal = mechanisms.SIPS(100).calibrate(IMDB)
    sigmas = [r.noise_scale for r in cal.rounds]
    cost = cal.threshold_delta
    for e in report["dp_equivalents"]:
        assert pld_epsilon(sigmas, e["delta"] - cost) == pytest.approx(e["epsilon"], abs=2e-3)


def test_zcdp_report_is_tighter_than_the_zcdp_conversion():
    # README example: ρ = 0.1, δ = 1e-5 was stated as ≈ (ε = 1.91, δ = 2e-5)
    # by dp-sips Corollary 9; the exact Gaussian curve gives ε ≈ 1.76.
    budget = ZCDPBudget(0.1, 1e-5)
    report = SelectItems(mechanisms.WeightedGaussian(100), budget).report
    first = report["dp_equivalents"][0]
    assert first["delta"] == pytest.approx(2e-5)
    assert first["epsilon"] == pytest.approx(1.7601, abs=1e-4)
    assert first["epsilon"] < budget.to_dp(2e-5).epsilon == pytest.approx(1.9142, abs=1e-4)
    sigma = 1 / math.sqrt(0.2)
    assert pld_epsilon([sigma], 2e-5 - 1e-5) == pytest.approx(
        first["epsilon"], abs=2e-3)
    # Laplace mechanisms keep the zCDP conversion.
    lap = SelectItems(mechanisms.WeightedLaplace(100), budget).report
    assert lap["dp_equivalents"][0]["epsilon"] == pytest.approx(budget.to_dp(2e-5).epsilon)


def test_gaussian_dp_equivalents_state_a_requested_epsilon_at_its_delta():
    # A μ that meets (ε, δ = 1e-5) with ε its own curve's point, rounded up by the root.
    computed = {e["delta"]: e["epsilon"] for e in gaussian_dp_equivalents(1 / 3.7, 1e-7, 1e-5)}
    asked = computed[1e-5] * (1 - 1e-13)
    stated = {e["delta"]: e["epsilon"]
              for e in gaussian_dp_equivalents(1 / 3.7, 1e-7, 1e-5, requested_epsilon=asked)}
    below, at, *above = sorted(computed)
    assert sorted(stated) == sorted(computed) and below < at == 1e-5 and len(above) == 3
    assert stated[below] == computed[below]  # δ′ < δ: the curve's own point
    assert stated[at] == asked  # δ′ = δ: as asked, exactly
    for delta in above:  # δ′ > δ: never above the requested ε
        assert stated[delta] == min(computed[delta], asked)


def test_dp_equivalents_state_the_requested_epsilon_exactly():
    # The report's (ε, δ) at the requested δ is the requested ε, not its float root
    # (1.0000000000002285 for (ε = 1, δ = 1e-5)); the job copies it into report.json.
    select = SelectItems(mechanisms.WeightedGaussian(max_items_per_user=5), Budget(1, 1e-5))
    at_requested = [e for e in select.report["dp_equivalents"] if e["delta"] == 1e-5]
    assert at_requested and at_requested[0]["epsilon"] == 1.0, select.report["dp_equivalents"]


def test_dp_equivalents_of_ngrams_state_the_requested_epsilon_exactly():
    extract = ExtractNgrams(3, Budget(1, 1e-5), max_items_per_user=5)
    at_requested = [e for e in extract.report["dp_equivalents"] if e["delta"] == 1e-5]
    assert at_requested and at_requested[0]["epsilon"] == 1.0, extract.report["dp_equivalents"]


def test_gaussian_dp_equivalents_round_epsilon_up():
    for e in gaussian_dp_equivalents(1 / 2.0, 1e-6, 1e-5):
        exact = gaussian_mechanism_delta(2.0, e["epsilon"]) + 1e-6
        assert exact <= e["delta"]
    # Nothing at δ′ ≤ the thresholds' cost.
    assert gaussian_dp_equivalents(1.0, 1e-5, 1e-5, factors=(0.5, 1.0)) == []


def test_gaussian_noise_schedule_matches_sips_shape():
    # DPNE already splits μ² by its schedule; SIPS now does the same.
    sigmas = gaussian_noise_schedule(2.0, 3, 0.5)
    assert 1 / math.sqrt(sum(s ** -2 for s in sigmas)) == pytest.approx(2.0, rel=1e-12)


@pytest.mark.parametrize("rounds,ratio", [(1, 1.0), (3, 1 / 3), (7, 0.9), (20, 0.5)])
@pytest.mark.parametrize("budget", [Budget(0.1, 1e-10), IMDB, Budget(20.0, 0.1)], ids=str)
def test_sips_rounds_as_split_keep_delta_noise_exactly(rounds, ratio, budget):
    # The rounds' σ_i, as rounded in floats, compose (1/σ² = Σ 1/σ_i²) to a
    # Gaussian whose exact δ at ε is still ≤ δ_noise; computed without warnings.
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cal = mechanisms.SIPS(100, rounds=rounds, ratio=ratio).calibrate(budget)
    assert gaussian_mechanism_delta(cal.sigma_total, budget.epsilon) <= cal.delta_noise


# -- the report's curve and the split, exactly -------------------------------------------


def _exact_total_delta(mu, threshold_delta, epsilon):
    import mpmath
    with mpmath.workdps(80):
        m, e, t = mpmath.mpf(mu), mpmath.mpf(epsilon), mpmath.mpf(threshold_delta)
        # The thresholds cost δ_thr itself (docs/privacy.md, "The split between noise
        # and thresholds"; it was δ_thr/(1 − δ_thr) before that proof).
        return (mpmath.ncdf(m / 2 - e / m) - mpmath.e ** e * mpmath.ncdf(-m / 2 - e / m)
                + t)


def test_the_curve_at_small_epsilon_takes_few_steps(monkeypatch):
    # A safe-side walk one ulp at a time would take ~1e10 steps at ε′ ≈ 1e-6.
    from beam_dpsu.core import gaussian as acc
    from beam_dpsu.core.calibration import gaussian_dp_equivalents
    calls = []
    original = acc._log_gaussian_delta
    monkeypatch.setattr(acc, "_log_gaussian_delta",
                        lambda *a: calls.append(1) or original(*a))
    c = mechanisms.WeightedGaussian(100).calibrate(Budget(1e-6, 1e-9))
    entries = gaussian_dp_equivalents(c.gaussian_mu, c.threshold_delta, 1e-9)
    assert entries and len(calls) < 5000


@pytest.mark.parametrize("budget", [Budget(1e-3, 1e-7), Budget(1e-12, 1e-5),
                                    Budget(1e-3, 1e-12), Budget(1.765, 4.96e-5)])
def test_every_stated_epsilon_holds_in_exact_arithmetic(budget):
    # Ignoring the float error of δ_G makes ε′ a relative 1e-10 too small, and ε′ = 0
    # must not be claimed after checking only ε = 1e-12.
    from beam_dpsu.core.calibration import gaussian_dp_equivalents
    for mechanism in (mechanisms.WeightedGaussian(1), mechanisms.WeightedGaussian(100)):
        c = mechanism.calibrate(budget)
        for entry in gaussian_dp_equivalents(c.gaussian_mu, c.threshold_delta, budget.delta):
            assert _exact_total_delta(c.gaussian_mu, c.threshold_delta,
                                      entry["epsilon"]) <= entry["delta"]


@pytest.mark.parametrize("epsilon", [1.0, 1e300])
def test_the_delta_split_holds_exactly_not_only_in_floats(epsilon):
    # δ_noise + δ_thr ≤ δ in floats can exceed δ by up to 1.1e-16·δ exactly.
    from fractions import Fraction
    from beam_dpsu import PolicyGaussian
    c = PolicyGaussian(2 ** 63 - 1).calibrate(Budget(epsilon, 4.96e-5))
    t = Fraction(c.threshold_delta)
    # The thresholds cost δ_thr (docs/privacy.md, "The split between noise and thresholds").
    assert Fraction(c.delta_noise) + t <= Fraction(4.96e-5)


# --- kept answers: the solvers are pure, so a job's repeated calibrations reuse them ---

def test_the_analytic_sigma_is_kept_and_equals_a_fresh_solve():
    solve = analytic_gaussian_sigma.__wrapped__
    analytic_gaussian_sigma.cache_clear()
    first = analytic_gaussian_sigma(0.7, 3e-7, 2.0)
    assert analytic_gaussian_sigma(0.7, 3e-7, 2.0) == first == solve(0.7, 3e-7, 2.0)
    assert analytic_gaussian_sigma.cache_info().hits == 1
    for _ in range(2):  # an error is not kept: it is raised again, naming the parameter
        with pytest.raises(ValueError, match="delta"):
            analytic_gaussian_sigma(0.7, 1.5)


# --- the kept answers never stand in for a refusal or another key's answer ---------------

@pytest.mark.parametrize("bad", [True, np.True_], ids=["bool", "numpy-bool"])
def test_a_kept_sigma_is_not_returned_for_a_bool_that_equals_its_key(bad):
    # True == 1 and hashes as 1: once σ(1, δ) is kept, σ(True, δ) must still refuse
    # the bool as a fresh call does, not return the kept σ.
    analytic_gaussian_sigma.cache_clear()
    with pytest.raises(TypeError, match="epsilon"):
        analytic_gaussian_sigma(bad, 0.5)
    analytic_gaussian_sigma(1, 0.5)
    analytic_gaussian_sigma(1.0, 0.5)
    with pytest.raises(TypeError, match="epsilon"):
        analytic_gaussian_sigma(bad, 0.5)
    with pytest.raises(TypeError, match="l2_sensitivity"):
        analytic_gaussian_sigma(1.0, 0.5, bad)


def test_equal_keys_of_other_number_types_get_the_fresh_answer():
    solve = analytic_gaussian_sigma.__wrapped__
    analytic_gaussian_sigma.cache_clear()
    for first, second in [(2, 2.0), (np.float64(0.5), 0.5), (np.int64(3), 3.0),
                          (np.float32(0.25), 0.25)]:
        a = analytic_gaussian_sigma(first, 1e-6)
        b = analytic_gaussian_sigma(second, 1e-6)
        assert a == b == solve(second, 1e-6) and type(a) is type(b) is float


def test_the_tight_split_is_solved_when_the_total_is_not_hashable():
    # Not only the mechanism's hash: a total that is a tight part bound to GW with a
    # mapping of public counts is unhashable, and must not raise TypeError in the cache.
    from beam_dpsu.core import counts_budget
    gw = mechanisms.GreedyWithoutSampling(10, public_counts={"a": 3})
    total = counts_budget.TightSelectionBudget(1.0, 1e-6, for_mechanism=gw)
    plain = mechanisms.WeightedGaussian(10)
    assert counts_budget._solve_tight_scale(total, 0.1, plain, 10) > 1.0
