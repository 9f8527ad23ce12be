"""Golden and validation tests of budgets, conversions and the analytic Gaussian σ."""

import contextlib
import math
import re
import signal
from fractions import Fraction

import pytest

from beam_dpsu.core.budgets import (
    Budget,
    BudgetAccountant,
    BudgetExceededError,
    ZCDPBudget,
    dp_to_zcdp,
    parts_within,
)
from beam_dpsu.core.checks import ParameterError, require_delta
from beam_dpsu.core.counts_budget import split_selection_and_counts
from beam_dpsu.core.gaussian import (
    analytic_gaussian_sigma,
    zcdp_delta_for_epsilon,
    zcdp_to_dp,
)
from tests.support.gaussian_delta import gaussian_mechanism_delta


# --- validation ----------------------------------------------------------------

@pytest.mark.parametrize("eps", [0, -1, float("nan"), float("inf")])
def test_budget_rejects_bad_epsilon(eps):
    with pytest.raises(ValueError, match="epsilon"):
        Budget(eps, 1e-5)


@pytest.mark.parametrize("delta", [1, -0.1, 1.5, float("nan")])
def test_budget_rejects_bad_delta(delta):
    with pytest.raises(ValueError, match=r"delta must satisfy 0 <= delta < 1, got"):
        Budget(1.0, delta)
    with pytest.raises(ValueError, match=r"delta must satisfy 0 <= delta < 1, got"):
        ZCDPBudget(0.1, delta)


def test_pure_budgets_are_accepted_and_split():
    # δ = 0: pure ε-DP (discrete Laplace counts) and pure ρ-zCDP (discrete Gaussian).
    assert Budget(1.0, 0) == Budget(1.0) == Budget(1.0, 0.0)
    assert ZCDPBudget(0.5).delta == 0.0
    parts = Budget(2.0, 0).split([1, 3])
    assert [p.epsilon for p in parts] == [0.5, 1.5] and {p.delta for p in parts} == {0.0}
    # Pure ρ-zCDP implies (ε, δ)-DP for every δ > 0 (dp-sips Corollary 9 at δ_CDP = 0).
    assert ZCDPBudget(0.1, 0).to_dp(1e-5).epsilon == pytest.approx(zcdp_to_dp(0.1, 1e-12, 1e-5),
                                                                   rel=1e-4)


def test_require_delta_names_what_needs_it():
    assert require_delta(Budget(1.0, 1e-6), "x") == Budget(1.0, 1e-6)
    with pytest.raises(ValueError, match=r"mechanism 'sips' needs delta > 0.*pure budget"):
        require_delta(ZCDPBudget(0.1, 0), "mechanism 'sips'")


@pytest.mark.parametrize("rho", [0, -0.1, float("inf")])
def test_zcdp_budget_rejects_bad_rho(rho):
    with pytest.raises(ValueError, match="rho"):
        ZCDPBudget(rho, 1e-5)


def test_budget_rejects_non_numbers():
    with pytest.raises(TypeError, match="epsilon must be a number, got a str$"):
        Budget("1", 1e-5)
    with pytest.raises(TypeError, match="delta"):
        ZCDPBudget(0.1, True)


def test_budgets_are_frozen():
    b = Budget(1.0, 1e-5)
    with pytest.raises(AttributeError):  # dataclasses.FrozenInstanceError
        b.epsilon = 2.0


# --- splitting and accounting ----------------------------------------------------

def test_split_adds_up_exactly():
    parts = Budget(3.0, 1e-5).split([1, 2, 3])
    assert math.fsum(p.epsilon for p in parts) == pytest.approx(3.0, rel=1e-15)
    assert math.fsum(p.delta for p in parts) == pytest.approx(1e-5, rel=1e-15)
    assert parts[0].epsilon == pytest.approx(0.5)
    zparts = ZCDPBudget(0.1, 1e-5).split([1, 1])
    assert [p.rho for p in zparts] == [0.05, 0.05]


@pytest.mark.parametrize("weights", [[], [1, 0], [1, -1], [float("nan")]])
def test_split_rejects_bad_weights(weights):
    with pytest.raises(ValueError, match="split"):
        Budget(1.0, 1e-5).split(weights)


def test_accountant_refuses_overspending():
    acc = BudgetAccountant(ZCDPBudget(0.1, 1e-5))
    for part in ZCDPBudget(0.1, 1e-5).split([1, 1, 1]):
        acc.spend(part)
    assert acc.remaining()["rho"] == pytest.approx(0.0, abs=1e-15)
    with pytest.raises(BudgetExceededError, match="rho=0.001 would exceed the total rho=0.1"):
        acc.spend(ZCDPBudget(0.001, 1e-9))
    with pytest.raises(TypeError, match="cannot spend a Budget from a ZCDPBudget"):
        acc.spend(Budget(1.0, 1e-9))


def test_accountant_shows_the_exact_remainder_and_it_is_spendable():
    # 99 parts of 0.01: the floats' exact sum is 0.99000000000000002…, so the float 0.01
    # (0.0100000000000000002…) no longer fits. What remains is shown exactly (the largest
    # float that fits), not as 0.01 after a float sum of 0.9900000000000007.
    acc = BudgetAccountant(Budget(1.0, 1e-5))
    for _ in range(99):
        acc.spend(Budget(0.01, 1e-7))
    left = acc.remaining()["epsilon"]
    exact = Fraction(1.0) - 99 * Fraction(0.01)
    assert Fraction(left) <= exact < Fraction(math.nextafter(left, 1.0))
    assert left < 0.01 and f"epsilon={left!r}" in repr(acc)
    assert acc.spent()["epsilon"] == float(99 * Fraction(0.01))  # 0.99, not 0.9900000000000007
    with pytest.raises(BudgetExceededError, match=re.escape(
            f"(already spent 0.99): at most epsilon={left!r} remains")):
        acc.spend(Budget(0.01, 1e-7))
    acc.spend(Budget(left, acc.remaining()["delta"]))  # the remainder shown is spendable
    assert acc.remaining() == {"epsilon": 0.0, "delta": 0.0}


def test_accountant_spends_the_parts_of_a_split_whole():
    # Budget.split's parts sum to the total exactly (parts_within), so all of them fit.
    acc = BudgetAccountant(Budget(1.0, 1e-5))
    acc.spend_all(*Budget(1.0, 1e-5).split([1] * 100))
    assert 0.0 <= acc.remaining()["epsilon"] < 1e-15


# --- the accountant: no tolerance (docs/privacy.md, invariant 4) -------------------
# Spending past the total by any amount is an error: with a tolerance, parts that sum
# past the total would all be spent.

@pytest.mark.parametrize("epsilon", [1.000000000999, math.nextafter(1.0, 2.0), 1.0 + 1e-12])
def test_spending_past_the_total_epsilon_by_any_amount_is_an_error(epsilon):
    accountant = BudgetAccountant(Budget(1.0, 1e-6))
    with pytest.raises(BudgetExceededError):
        accountant.spend(Budget(epsilon, 1e-6))


def test_spending_past_the_total_delta_by_any_amount_is_an_error():
    accountant = BudgetAccountant(Budget(1.0, 1e-6))
    with pytest.raises(BudgetExceededError):
        accountant.spend(Budget(1.0, 1e-6 * (1.0 + 1e-10)))


def test_spending_past_a_zcdp_total_by_any_amount_is_an_error():
    accountant = BudgetAccountant(ZCDPBudget(0.1, 1e-5))
    with pytest.raises(BudgetExceededError):
        accountant.spend(ZCDPBudget(0.1 * (1.0 + 1e-10), 1e-5))


def test_parts_that_sum_past_the_total_in_sequence_are_refused():
    accountant = BudgetAccountant(Budget(1.0, 1e-6))
    accountant.spend(Budget(0.5, 5e-7))
    with pytest.raises(BudgetExceededError):
        accountant.spend(Budget(0.5 + 1e-12, 5e-7))
    with pytest.raises(BudgetExceededError):
        accountant.spend_all(Budget(0.25, 2e-7), Budget(0.25 + 1e-12, 3e-7))


def test_the_spent_total_is_compared_exactly():
    # 0.1 + 0.9 rounds to 1.0 in floats, but the two floats sum to more than 1.
    a, b = 0.1, 0.9
    assert a + b == 1.0 and Fraction(a) + Fraction(b) > 1
    accountant = BudgetAccountant(Budget(1.0, 1e-6))
    with pytest.raises(BudgetExceededError):
        accountant.spend_all(Budget(a, 5e-7), Budget(b, 5e-7))


@pytest.mark.parametrize("epsilon", [0.1, 0.3, 1.0, 1.7, 3.0, 10.0])
def test_the_librarys_own_splits_fit_its_accountant(epsilon):
    """An exact accountant must still take every split the library makes: parts such as
    (1 − 0.1)·ε and 0.1·ε sum, exactly, a few ulps past the total unless the split
    rounds them down."""
    total = Budget(epsilon, 1e-5)
    for share in (0.01, 0.05, 0.1, 0.2, 0.25, 0.3, 0.5, 0.7, 0.9):
        split_selection_and_counts(total, share, accountant=BudgetAccountant(total))
    for n in (2, 3, 5, 7, 10):
        BudgetAccountant(total).spend_all(*total.split([1.0] * n))
    zcdp = ZCDPBudget(epsilon / 10.0, 1e-5)
    for n in (3, 7):
        BudgetAccountant(zcdp).spend_all(*zcdp.split([1.0] * n))


# --- parts_within: at once, or a clear error ------------------------------------------
# parts_within (docs/privacy.md, invariant 4) rounds the parts down until they fit the
# total; where no valid part exists it must say so at once, not search for ever.

@contextlib.contextmanager
def _within(seconds: int):
    """Fails the test (instead of hanging the suite) if the body runs past ``seconds``."""
    def expire(*_):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_parts_within_refuses_a_part_with_no_room_at_once():
    with _within(5), pytest.raises(ParameterError, match="part 1 of the total 1.0"):
        parts_within(1.0, [1.0, 1e-17], rounded=[1])


@pytest.mark.parametrize("total, share", [(Budget(1.0, 1e-6), 1e-17),
                                          (ZCDPBudget(0.5, 1e-6), 1e-300)])
def test_a_counts_share_too_small_for_floats_is_a_clear_error(total, share):
    with _within(5), pytest.raises(ParameterError) as error:
        split_selection_and_counts(total, counts_share=share)
    assert error.value.param == "counts_share" and "too small" in str(error.value)


@pytest.mark.parametrize("total", [Budget(0.15, 1e-6), ZCDPBudget(0.15, 1e-6)])
def test_a_small_counts_share_splits_exactly_at_once(total):
    with _within(5):
        parts = split_selection_and_counts(total, counts_share=1e-9)
    field = "epsilon" if isinstance(total, Budget) else "rho"
    selection, counts = getattr(parts.selection, field), getattr(parts.counts, field)
    assert Fraction(selection) + Fraction(counts) <= Fraction(getattr(total, field))
    assert counts == pytest.approx(0.15e-9, rel=1e-6)


def test_parts_within_rounds_a_few_ulps_of_excess_by_about_an_ulp():
    # 0.1 + 0.9 rounds to 1.0 in floats, but the floats' exact sum is above 1.
    fitted = parts_within(1.0, [0.1, 0.9])
    assert sum(map(Fraction, fitted)) <= 1
    assert fitted[0] == math.nextafter(0.1, 0) and fitted[1] == math.nextafter(0.9, 0)
    assert parts_within(1.0, [0.25, 0.75]) == [0.25, 0.75]  # within: as given


# --- analytic Gaussian ------------------------------------------------------------

def test_analytic_gaussian_golden():
    # docs/privacy.md: σ(ε=3, δ/2 with δ=e^-10, L2=1) = 1.33279.
    assert analytic_gaussian_sigma(3.0, math.exp(-10) / 2) == pytest.approx(1.33279, abs=5e-6)


def test_analytic_gaussian_scales_with_sensitivity():
    s1 = analytic_gaussian_sigma(1.0, 1e-6, 1.0)
    assert analytic_gaussian_sigma(1.0, 1e-6, 10.0) == pytest.approx(10 * s1, rel=1e-12)


def test_analytic_gaussian_beats_classical_bound():
    # Balle & Wang: the analytic σ is below the classical √(2 ln(1.25/δ))/ε for ε < 1.
    for eps in (0.1, 0.5, 0.9):
        classical = math.sqrt(2 * math.log(1.25 / 1e-5)) / eps
        assert analytic_gaussian_sigma(eps, 1e-5) < classical


@pytest.mark.parametrize("eps", [0.01, 0.1, 1.0, 5.0, 20.0])
@pytest.mark.parametrize("delta", [1e-12, 1e-8, 1e-3, 0.1, 0.5])
def test_analytic_gaussian_is_tight_over_range(eps, delta):
    sigma = analytic_gaussian_sigma(eps, delta)
    # σ meets δ exactly (to 1e-9 relative), and 0.1% less noise would not.
    assert gaussian_mechanism_delta(sigma, eps) == pytest.approx(delta, rel=1e-9)
    assert gaussian_mechanism_delta(sigma * 0.999, eps) > delta


# --- zCDP ↔ (ε, δ) (dp-sips App. B) ------------------------------------------------

# dp-sips Table 4: (ρ, δ_CDP) ↦ (ε, δ_DP) with δ_DP ≈ 5e-5; the paper rounds ε up
# to 3 significant figures and prints the δ_DP that the rounded ε gives.
TABLE_4 = [(0.001, 0.14, 5.00e-5), (0.005, 0.338, 5.08e-5), (0.01, 0.495, 4.99e-5),
           (0.05, 1.2, 4.99e-5), (0.1, 1.765, 4.96e-5), (0.5, 4.41, 4.90e-5)]


@pytest.mark.parametrize("rho,eps,delta_dp", TABLE_4)
def test_zcdp_to_dp_table_4(rho, eps, delta_dp):
    assert zcdp_to_dp(rho, 1e-5, 5e-5) == pytest.approx(eps, rel=0.005)
    implied = 1e-5 + (1 - 1e-5) * zcdp_delta_for_epsilon(rho, eps)
    assert implied == pytest.approx(delta_dp, rel=0.01)


def test_zcdp_to_dp_design_golden():
    # docs/privacy.md: ρ = 0.1, δ = 1e-5 ↦ (ε = 1.765, δ ≈ 4.96e-5); ρ = 0.5 ↦ (4.41, 4.90e-5).
    assert ZCDPBudget(0.1, 1e-5).to_dp(4.96e-5).epsilon == pytest.approx(1.765, abs=0.001)
    assert ZCDPBudget(0.5, 1e-5).to_dp(4.90e-5).epsilon == pytest.approx(4.41, abs=0.01)


# dp-sips Table 5: ε fixed at 0.62, (ρ, δ_CDP, δ_DP).
TABLE_5 = [(0.005, 1e-9, 1.04e-9), (0.0055, 1e-8, 1.02e-8), (0.006, 1e-7, 1.01e-7),
           (0.007, 1e-6, 1.01e-6), (0.0083, 1e-5, 1.01e-5), (0.01, 1e-4, 1.01e-4),
           (0.013, 1e-3, 1.01e-3)]


@pytest.mark.parametrize("rho,delta_cdp,delta_dp", TABLE_5)
def test_conversions_table_5(rho, delta_cdp, delta_dp):
    assert zcdp_to_dp(rho, delta_cdp, delta_dp) == pytest.approx(0.62, abs=0.01)
    # The inverse recovers the table's ρ to its printed precision (2 significant figures).
    assert dp_to_zcdp(0.62, delta_dp, delta_cdp).rho == pytest.approx(rho, rel=0.03)


def test_gw_budget_of_table_2():
    # dp-sips Table 2: GW at ε = 1.7, δ = 8.1142e-5 "implies 1e-5-approximate 0.1-zCDP",
    # i.e. 0.1-zCDP with δ_CDP = 1e-5 is (1.7, ≤ 8.1142e-5)-DP.
    assert 1e-5 + zcdp_delta_for_epsilon(0.1, 1.7) <= 8.1142e-5
    assert dp_to_zcdp(1.7, 8.1142e-5, 1e-5).rho >= 0.1


@pytest.mark.parametrize("eps,delta_dp,delta_cdp", [(1.0, 1e-6, 1e-7), (3.0, 1e-5, 5e-6),
                                                    (0.3, 1e-9, 1e-10)])
def test_dp_to_zcdp_is_largest_rho_meeting_target(eps, delta_dp, delta_cdp):
    rho = dp_to_zcdp(eps, delta_dp, delta_cdp).rho

    def implied(r):
        return delta_cdp + (1 - delta_cdp) * zcdp_delta_for_epsilon(r, eps)

    assert implied(rho) <= delta_dp
    assert implied(rho * 1.001) > delta_dp
    assert zcdp_to_dp(rho, delta_cdp, delta_dp) == pytest.approx(eps, rel=1e-6)


def test_conversion_rejects_delta_dp_below_delta_cdp():
    with pytest.raises(ValueError, match="delta_dp must exceed delta_cdp"):
        zcdp_to_dp(0.1, 1e-5, 1e-6)


def test_pure_budget_converts_to_zcdp():
    # Bun & Steinke 2016 Prop. 1.4: ε-DP ⇒ (ε²/2)-zCDP; a pure-DP aggregation
    # can then be accounted beside a zCDP selection.
    from beam_dpsu.core.budgets import Budget, ZCDPBudget
    assert Budget(1.0).to_zcdp() == ZCDPBudget(0.5, 0.0)
    with pytest.raises(ValueError, match="only a pure budget"):
        Budget(1.0, 1e-6).to_zcdp()


@pytest.mark.parametrize("rho", [0.1, 0.1 * 0.985, 0.3, 0.7, 1.9, 1e-300, 5e-324, 1e300])
@pytest.mark.parametrize("l2_sensitivity", [1.0, math.sqrt(7), 100.0])
def test_zcdp_sigma_is_rounded_up_and_laplace_epsilon_down(rho, l2_sensitivity):
    # σ = Δ/√(2ρ) rounded to nearest pays a few ulps more than ρ for about half of all
    # ρ (0.1 is one): rounded up, Δ²/(2σ²) ≤ ρ exactly, one float up at most;
    # and ε = √(2ρ) for the Laplace step has ε²/2 ≤ ρ exactly.
    from fractions import Fraction
    from beam_dpsu.core.gaussian import zcdp_gaussian_sigma, zcdp_laplace_epsilon
    sigma = zcdp_gaussian_sigma(rho, l2_sensitivity)
    nearest = l2_sensitivity / math.sqrt(2.0 * rho)
    if math.isfinite(sigma) and sigma > 0:
        assert Fraction(l2_sensitivity) ** 2 / (2 * Fraction(sigma) ** 2) <= Fraction(rho)
        assert sigma in (nearest, math.nextafter(nearest, math.inf))
    else:
        assert sigma == nearest  # left for the caller to refuse, naming rho
    epsilon = zcdp_laplace_epsilon(rho)
    if math.isfinite(epsilon) and epsilon > 0:
        assert Fraction(epsilon) ** 2 / 2 <= Fraction(rho)
        assert epsilon in (math.sqrt(2.0 * rho), math.nextafter(math.sqrt(2.0 * rho), 0.0))


def test_zcdp_sigma_at_rho_three_tenths_is_the_float_above_the_nearest():
    # A case that rounded down before the fix: 1/√0.6 to nearest is below the exact value.
    from fractions import Fraction
    from beam_dpsu.core.gaussian import zcdp_gaussian_sigma
    nearest = 1.0 / math.sqrt(0.6)
    assert 1 / (2 * Fraction(nearest) ** 2) > Fraction(0.3)
    assert zcdp_gaussian_sigma(0.3) == math.nextafter(nearest, math.inf)


@pytest.mark.parametrize("rho", [0.1, 0.3, 0.7, 1.9])
def test_count_gaussian_zcdp_sigma_pays_for_the_exact_sensitivity_sqrt_delta0(rho):
    # Count Gaussian's ℓ2 sensitivity is √Δ0, given as the float nearest it, which is
    # below √Δ0 for about half of all Δ0 (3 is one); a σ rounded up for that float
    # lets Δ0/(2σ²) pass ρ by an ulp, and states μ = Δ2/σ in the composition for the
    # smaller sensitivity.
    from fractions import Fraction
    from beam_dpsu import ZCDPBudget
    from beam_dpsu.core.mechanisms import CountGaussian
    assert Fraction(math.sqrt(3)) ** 2 < 3
    for d0 in range(1, 200):
        calibration = CountGaussian(d0).calibrate(ZCDPBudget(rho, 1e-6))
        assert Fraction(calibration.sensitivity) ** 2 >= d0, d0
        assert Fraction(d0) / (2 * Fraction(calibration.noise_scale) ** 2) <= Fraction(rho), d0


@pytest.mark.parametrize("epsilon", [round(0.1 * k, 1) for k in range(1, 31)])
def test_sips_rounds_under_a_dp_budget_compose_within_the_gaussian_paid_for(epsilon):
    # Under Budget(ε, δ) SIPS's rounds share one analytic Gaussian σ_total in μ²; with
    # ρ = 1/(2σ_total²) rounded to nearest, the rounds (σ_i rounded up for ρ_i,
    # Σ ρ_i ≤ ρ) could compose to μ² = Σ 1/σ_i² an ulp above 1/σ_total².
    from fractions import Fraction
    from beam_dpsu import Budget
    from beam_dpsu.core.mechanisms import SIPS
    mechanism = SIPS(max_items_per_user=30)
    budget = Budget(epsilon, 1e-5)
    sigma_total = mechanism._delta_split(budget).sigma_total
    calibration = mechanism.calibrate(budget)
    paid = 1 / Fraction(sigma_total) ** 2
    assert 2 * Fraction(calibration.zcdp_budget.rho) <= paid
    assert sum(1 / Fraction(r.noise_scale) ** 2 for r in calibration.rounds) <= paid
