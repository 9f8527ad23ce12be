"""Tight total (ε, δ) of a selection and its counts: closed forms vs dp-accounting's PLD.

Every check here is deterministic (no sampling): no false-failure rate.
"""

import math
from fractions import Fraction

import numpy as np
import pytest
from dp_accounting.pld import privacy_loss_distribution as dpa
from scipy import integrate, stats

from beam_dpsu import (Budget, BudgetAccountant, SIPS, WeightedGaussian, WeightedLaplace,
                       ZCDPBudget, count_calibration, split_selection_and_counts)
from beam_dpsu.core import composition, ngram_calibration
from beam_dpsu.core.calibration import Calibration, RoundsCalibration
from beam_dpsu.core.checks import ParameterError
from beam_dpsu.core.counts_budget import composed_guarantees

pytestmark = pytest.mark.pipeline

IMDB = Budget(1.765, 4.96e-5)
# dp-accounting's pessimistic rounding over-states each composed loss by < one
# grid step: Δ0-fold counts by < Δ0·1e-4 in ε (plus the solvers' 1e-9).
def tolerance(d0):
    return d0 * composition.VALUE_DISCRETIZATION_INTERVAL + 1e-6


def gaussian(sigma, threshold_delta=1e-6, sensitivity=1.0, budget=Budget(1.0, 2e-6)):
    return Calibration(noise="gaussian", noise_scale=sigma, release_threshold=5.0,
                       threshold_delta=threshold_delta, sensitivity_norm=2,
                       sensitivity=sensitivity, budget=budget, source="test")


def exact_delta_gaussian_with_losses(mu, losses, probs, epsilon):
    """δ(ε) of N(0,1) vs N(μ,1) composed with a discrete loss, by numerical
    integration over the Gaussian loss L ~ N(μ²/2, μ²) (not the Φ formula)."""
    total = 0.0
    for loss, p in zip(losses, probs):
        if p < 1e-300:
            continue
        cut = epsilon - loss  # (1 − e^{cut − L})_+ is > 0 for L > cut

        def f(z, cut=cut):
            return stats.norm.pdf(z, mu * mu / 2, mu) * -math.expm1(cut - z)

        total += p * integrate.quad(f, cut, cut + 40 * mu + 40, epsabs=1e-14,
                                    epsrel=1e-10, limit=200)[0]
    return total


# --- Gaussian ∘ Gaussian: one Gaussian (closed form) vs PLD -------------------------

def test_composed_gaussians_are_one_gaussian_golden_against_pld():
    sigmas = [2.0, 3.0, 5.0]
    mu = composition.gaussian_composition_mu(sigmas)
    assert mu == pytest.approx(math.sqrt(1 / 4 + 1 / 9 + 1 / 25), rel=1e-15)
    composed = dpa.from_gaussian_mechanism(sigmas[0], value_discretization_interval=1e-4)
    for s in sigmas[1:]:
        composed = composed.compose(dpa.from_gaussian_mechanism(
            s, value_discretization_interval=1e-4))
    one = dpa.from_gaussian_mechanism(1.0 / mu, value_discretization_interval=1e-4)
    for delta in (1e-7, 1e-5, 1e-3):
        eps_pld = composed.get_epsilon_for_delta(delta)
        # Pessimistic PLD ≥ the exact one-Gaussian ε, within 3 grid steps.
        assert one.get_epsilon_for_delta(delta) == pytest.approx(eps_pld, abs=3e-4)
        exact = float(composition._gaussian_delta(mu, eps_pld))
        assert exact <= delta * (1 + 1e-6)


# --- Gaussian selection ∘ discrete Laplace counts: closed form vs PLD -----------------

@pytest.mark.parametrize("d0", [1, 20, 100])
def test_closed_form_matches_dp_accounting_and_is_below_the_sum(d0):
    parts = split_selection_and_counts(IMDB, 0.25)
    sel = WeightedGaussian(100).calibrate(parts.selection)
    cnt = count_calibration(parts.counts, d0)
    closed = composition.composed_epsilon(sel, cnt, IMDB.delta, method="closed_form")
    by_pld = composition.composed_epsilon(sel, cnt, IMDB.delta, method="pld")
    # dp-accounting rounds pessimistically: never below the exact value, and close.
    assert closed - 1e-6 <= by_pld <= closed + tolerance(d0)
    assert by_pld < IMDB.epsilon and closed < IMDB.epsilon  # tighter than ε_s + ε_c
    # And δ at the reported ε, both ways, meets the total δ.
    assert composition.composed_delta(sel, cnt, closed) <= IMDB.delta * (1 + 1e-9)
    assert composition.composed_delta(sel, cnt, by_pld, method="pld") <= IMDB.delta * (1 + 1e-9)


def test_reported_epsilon_is_not_below_the_true_value_for_two_gaussian_rounds():
    # Two Gaussian rounds (σ 3 and 4: one Gaussian of σ 2.4) plus 5 discrete
    # Laplace counts; the true δ(ε) integrated numerically (independent of the
    # Φ formula and of dp-accounting).
    rounds = RoundsCalibration(rounds=(gaussian(3.0, 2e-6), gaussian(4.0, 3e-6)),
                               budget=ZCDPBudget(0.1, 5e-6), zcdp_budget=ZCDPBudget(0.1, 5e-6),
                               source="test")
    cnt = count_calibration(Budget(0.4), 5)
    a, d0 = 0.4 / 5, 5
    k = np.arange(d0 + 1)
    losses, probs = a * (2 * k - d0), stats.binom.pmf(k, d0, 1 / (1 + math.exp(-a)))
    for total_delta, method in ((1e-5, "closed_form"), (1e-5, "pld"), (1e-3, "auto")):
        eps = composition.composed_epsilon(rounds, cnt, total_delta, method=method)
        true = exact_delta_gaussian_with_losses(1 / 2.4, losses, probs, eps) + 5e-6
        assert true <= total_delta * (1 + 1e-7)
        # ... and not loose: 1 % less ε breaks δ.
        assert exact_delta_gaussian_with_losses(1 / 2.4, losses, probs, 0.99 * eps) + 5e-6 \
            > total_delta


def test_gaussian_delta_formula_holds_for_negative_epsilon():
    # δ_G(ε) for ε < 0 (a composed loss shifts ε below 0) against integration.
    for mu, eps in ((0.5, -0.3), (1.2, -2.0), (0.3, 0.4), (2.0, 5.0)):
        assert float(composition._gaussian_delta(mu, eps)) == pytest.approx(
            exact_delta_gaussian_with_losses(mu, [0.0], [1.0], eps), rel=1e-7, abs=1e-15)


# --- discrete Gaussian counts (zCDP budgets): PLD vs an exact sum ---------------------

def test_discrete_gaussian_counts_pld_is_an_upper_bound_close_to_exact():
    # Δ0 = 3 counts with discrete Gaussian σ² = 3/(2·0.2) = 7.5; Gaussian
    # selection of σ 2. Exact: the counts' loss is (Δ0 − 2S)/(2σ²), S the sum
    # of Δ0 independent discrete Gaussians (pmf by convolution).
    d0, rho = 3, 0.2
    cnt = count_calibration(ZCDPBudget(rho), d0)
    s2 = float(cnt.noise.sigma_squared)
    assert s2 == pytest.approx(7.5)
    x = np.arange(-200, 201)
    one = np.exp(-x.astype(float) ** 2 / (2 * s2))
    one /= one.sum()
    pmf = one
    for _ in range(d0 - 1):
        pmf = np.convolve(pmf, one)
    s = np.arange(len(pmf)) - 200 * d0
    losses = (d0 - 2.0 * s) / (2 * s2)
    sel = gaussian(2.0, threshold_delta=1e-6)
    for total_delta in (1e-6 + 1e-5, 1e-6 + 1e-8):
        eps = composition.composed_epsilon(sel, cnt, total_delta)  # auto: PLD
        exact_delta = float(np.sum(pmf * composition._gaussian_delta(0.5, eps - losses)))
        assert exact_delta + 1e-6 <= total_delta * (1 + 1e-7)
        # Close: the exact ε is within Δ0 + 1 grid steps below.
        lo = eps - tolerance(d0 + 1)
        found = float(np.sum(pmf * composition._gaussian_delta(0.5, lo - losses)))
        assert found + 1e-6 > total_delta


def test_discrete_gaussian_tail_is_the_normal_tail_scipy_stats_gives():
    # P[|X| > ⌈11.6σ⌉] is bounded by 2·P[N(0, 1) > 11.6], computed without loading
    # scipy.stats (start-up time): the same float as stats.norm.sf gives.
    assert composition._discrete_gaussian_tail() == 2.0 * float(stats.norm.sf(11.6))


def test_zcdp_split_states_epsilon_below_the_zcdp_conversion():
    total = ZCDPBudget(0.1, 1e-5)
    parts = split_selection_and_counts(total, 0.25, selection_mechanism=WeightedGaussian(100),
                                       counts_max_items_per_user=20)
    assert [g.delta for g in parts.composed] == pytest.approx([2e-5, 5e-5, 1e-4])
    for g in parts.composed:
        assert g.method == "pld" and g.threshold_delta == 1e-5
        assert g.epsilon == g.tight_epsilon < g.basic_epsilon == total.to_dp(g.delta).epsilon


# --- the split states its tight total ------------------------------------------------

def test_split_with_mechanism_records_a_composed_guarantee_below_the_sum():
    # composition="basic" asked for: the default with a mechanism is the tight split
    # (test_the_default_split_is_tight_where_it_can_be).
    parts = split_selection_and_counts(IMDB, 0.25, selection_mechanism=WeightedGaussian(100),
                                       counts_max_items_per_user=20, composition="basic")
    assert parts.total == IMDB and parts.selection == Budget(1.765 * 0.75, 4.96e-5)
    (g,) = parts.composed
    assert g.delta == IMDB.delta and g.basic_epsilon == IMDB.epsilon
    assert g.method == "closed_form" and g.epsilon == g.tight_epsilon
    assert 1.0 < g.epsilon < IMDB.epsilon  # 1.376 at this split
    report = parts.to_dict()["composed_guarantee"][0]
    assert report["epsilon"] == g.epsilon and report["basic_composition_epsilon"] == 1.765
    # Data-independent and reproducible.
    again = split_selection_and_counts(IMDB, 0.25, selection_mechanism=WeightedGaussian(100),
                                       counts_max_items_per_user=20, composition="basic")
    assert again.composed == parts.composed
    # Without the mechanism nothing is stated beyond the sum.
    assert split_selection_and_counts(IMDB, 0.25).composed == ()
    assert "composed_guarantee" not in split_selection_and_counts(IMDB).to_dict()
    with pytest.raises(ValueError, match="give both"):
        split_selection_and_counts(IMDB, 0.25, selection_mechanism=WeightedGaussian(100))


def test_laplace_selection_spends_all_delta_on_its_threshold_so_the_sum_stands():
    # Under Budget(ε, δ) a Laplace selection's δ is all threshold δ: nothing
    # is left for the privacy-loss part, so the total is the sum.
    parts = split_selection_and_counts(IMDB, 0.25, selection_mechanism=WeightedLaplace(100),
                                       counts_max_items_per_user=20)
    (g,) = parts.composed
    assert g.method == "basic" and g.epsilon == IMDB.epsilon and g.tight_epsilon is None
    # With δ to spare it is bounded by randomized response (pure ε_s) ∘ counts,
    # whose closed form matches dp-accounting, and is below the sum.
    sel = WeightedLaplace(100).calibrate(parts.selection)
    cnt = count_calibration(parts.counts, 20)
    closed = composition.composed_epsilon(sel, cnt, 2 * IMDB.delta, method="closed_form")
    by_pld = composition.composed_epsilon(sel, cnt, 2 * IMDB.delta, method="pld")
    assert closed - 1e-6 <= by_pld <= closed + tolerance(21)
    assert closed < IMDB.epsilon


def test_sips_rounds_compose_as_one_gaussian():
    parts = split_selection_and_counts(IMDB, 0.25)
    sel = SIPS(100).calibrate(parts.selection)
    cnt = count_calibration(parts.counts, 20)
    (g,) = composed_guarantees(parts, sel, cnt)
    assert g.threshold_delta == pytest.approx(sum(r.threshold_delta for r in sel.rounds))
    mu = composition.gaussian_composition_mu([r.noise_scale for r in sel.rounds])
    assert f"mu = {mu:.6g}" in g.description and g.epsilon < IMDB.epsilon


def test_total_delta_at_most_the_threshold_delta_is_refused():
    sel = gaussian(2.0, threshold_delta=1e-5)
    cnt = count_calibration(Budget(0.5), 10)
    with pytest.raises(ValueError, match="must exceed the selection's threshold delta"):
        composition.composed_epsilon(sel, cnt, 1e-5)
    assert composition.composed_guarantee(sel, cnt, 1e-5) is None
    with pytest.raises(ValueError, match="method must be"):
        composition.composed_epsilon(sel, cnt, 1e-4, method="fast")
    with pytest.raises(ValueError, match="no closed form for discrete Gaussian"):
        composition.composed_epsilon(sel, count_calibration(ZCDPBudget(0.1), 10), 1e-4,
                             method="closed_form")


def test_counts_loss_closed_form_is_the_binomial_of_dp_accountings_discrete_laplace():
    # One count's discrete Laplace loss is ±a; Δ0 of them: a(2K − Δ0), K binomial.
    cnt = count_calibration(Budget(0.5), 10)
    assert cnt.noise.scale == Fraction(20)
    pair, _ = composition._counts_pair(cnt)

    def ours(e):
        return float(np.sum(pair.prob * -np.expm1(np.minimum(e - pair.loss, 0.0))))

    theirs = dpa.from_discrete_laplace_mechanism(
        0.05, sensitivity=1, value_discretization_interval=1e-4).self_compose(10)
    for eps in (0.0, 0.1, 0.25, 0.4):
        assert theirs.get_delta_for_epsilon(eps) == pytest.approx(ours(eps), rel=1e-9, abs=1e-12)


# --- the tight split: parts scaled up while the pair as run meets the total -----------

def test_tight_split_meets_the_total_checked_by_integration():
    accountant = BudgetAccountant(IMDB)
    parts = split_selection_and_counts(IMDB, 0.25, accountant,
                                       selection_mechanism=WeightedGaussian(100),
                                       counts_max_items_per_user=20, composition="tight")
    basic = split_selection_and_counts(IMDB, 0.25)
    assert parts.scale > 1.2  # 1.279: the selection gets ε 1.69 instead of 1.32
    assert (parts.selection.epsilon, parts.selection.delta) == (
        basic.selection.epsilon * parts.scale, IMDB.delta)
    assert (parts.counts.epsilon, parts.counts.delta) == (basic.counts.epsilon * parts.scale, 0.0)
    assert accountant.remaining() == {"epsilon": 0.0, "delta": 0.0}  # the total, once
    (g,) = parts.composed
    assert g.tight_epsilon <= IMDB.epsilon and g.epsilon == g.tight_epsilon
    # Basic composition of the scaled parts is c·ε: not a bound on the total.
    assert g.basic_epsilon == pytest.approx(parts.scale * IMDB.epsilon)
    assert parts.to_dict()["composition"].startswith("tight")
    # Independently: the true δ at the total ε, by numerical integration, ≤ δ.
    sel = WeightedGaussian(100).calibrate(parts.selection)
    a, d0 = parts.counts.epsilon / 20, 20
    k = np.arange(d0 + 1)
    true = exact_delta_gaussian_with_losses(
        1 / sel.noise_scale, a * (2 * k - d0), stats.binom.pmf(k, d0, 1 / (1 + math.exp(-a))),
        IMDB.epsilon) + sel.threshold_delta
    assert true <= IMDB.delta * (1 + 1e-7)
    # ... and the scale is the largest: 0.1 % more breaks the total.
    sel_more = WeightedGaussian(100).calibrate(Budget(parts.selection.epsilon * 1.001, IMDB.delta))
    cnt_more = count_calibration(Budget(parts.counts.epsilon * 1.001, 0.0), 20)
    assert composition.composed_epsilon(sel_more, cnt_more, IMDB.delta) > IMDB.epsilon


def test_the_default_share_is_written_out_in_the_signature():
    import inspect

    from beam_dpsu.core.counts_budget import DEFAULT_COUNTS_SHARE
    default = inspect.signature(split_selection_and_counts).parameters["counts_share"].default
    assert default == DEFAULT_COUNTS_SHARE == 0.25


def test_the_default_split_is_tight_where_it_can_be():
    # As the jobs split with --with-counts (pipelines.settings.budget_parts_from_args).
    for mechanism in (WeightedGaussian(100), SIPS(100)):
        default = split_selection_and_counts(IMDB, 0.25, selection_mechanism=mechanism,
                                             counts_max_items_per_user=20)
        tight = split_selection_and_counts(IMDB, 0.25, selection_mechanism=mechanism,
                                           counts_max_items_per_user=20, composition="tight")
        assert default == tight and default.scale > 1.2
    # Basic where a tight split cannot be made: no mechanism, a zCDP total, no slack.
    basic = split_selection_and_counts(IMDB, 0.25, composition="basic")
    assert split_selection_and_counts(IMDB, 0.25) == basic and basic.scale == 1.0
    z = ZCDPBudget(0.1, 1e-5)
    assert split_selection_and_counts(z, 0.25, selection_mechanism=WeightedGaussian(100),
                                      counts_max_items_per_user=20).scale == 1.0
    lap = split_selection_and_counts(IMDB, 0.25, selection_mechanism=WeightedLaplace(100),
                                     counts_max_items_per_user=20)
    assert lap.scale == 1.0 and lap.selection == basic.selection


def test_the_library_splits_selection_and_counts_as_the_job_does():
    # By default the library splits as the job does, tightly where it can: split basic,
    # the docs' SIPS + CountReleased pipeline released 30 items where the job, splitting
    # tightly, released 40-44.
    from types import SimpleNamespace

    from pipelines.settings import budget_parts_from_args
    total, mechanism = Budget(1.0, 1e-5), SIPS(max_items_per_user=20)
    args = SimpleNamespace(with_counts=True, counts_share=None, counts_max_items_per_user=None)
    job = budget_parts_from_args(args, total, mechanism, 20)
    library = split_selection_and_counts(total, selection_mechanism=mechanism,
                                         counts_max_items_per_user=20)
    assert library == job and library.scale > 1.0


def test_tight_split_keeps_the_sum_where_there_is_no_slack_and_under_zcdp():
    lap = split_selection_and_counts(IMDB, 0.25, selection_mechanism=WeightedLaplace(100),
                                     counts_max_items_per_user=20, composition="tight")
    assert lap.scale == 1.0 and lap.selection == split_selection_and_counts(IMDB).selection
    assert lap.to_dict()["composition"].startswith("basic")
    accountant = BudgetAccountant(ZCDPBudget(0.1, 1e-5))
    z = split_selection_and_counts(ZCDPBudget(0.1, 1e-5), 0.25, accountant,
                                   selection_mechanism=WeightedGaussian(100),
                                   counts_max_items_per_user=20, composition="tight")
    assert z.scale == 1.0 and z.selection == split_selection_and_counts(z.total).selection
    assert accountant.remaining()["rho"] == pytest.approx(0.0, abs=1e-15)
    with pytest.raises(ValueError, match="needs selection_mechanism"):
        split_selection_and_counts(IMDB, 0.25, composition="tight")
    with pytest.raises(ValueError, match="composition must be"):
        split_selection_and_counts(IMDB, 0.25, composition="pld")


# --- huge Δ0: rounded up, or bounded by the counts' pure ε ---------------------------

def test_binomial_on_bins_only_overstates_delta():
    n, a = 20000, 0.25 / 20000
    p = 1 / (1 + math.exp(-a))
    k_exact = np.arange(n + 1.0)
    exact = composition._Discrete(a * (2 * k_exact - n), stats.binom.pmf(k_exact, n, p))
    k, prob = composition._binomial_rounded_up(n, p)
    assert len(k) <= 4001 and prob.sum() == pytest.approx(1.0, abs=1e-12)
    binned = composition._Discrete(a * (2 * k - n), prob)
    for eps in (0.2, 0.5, 0.8):
        d_exact = composition._closed_form_delta(composition._Gaussian(0.4), exact, eps)
        d_binned = composition._closed_form_delta(composition._Gaussian(0.4), binned, eps)
        assert d_exact <= d_binned <= d_exact * 1.01


def test_huge_counts_fall_back_to_their_pure_epsilon_not_to_nan():
    # At Δ0 = 2^63 − 1 the binomial masses can be NaN: every "δ ≤ target" test then
    # passes, and the tight split scales the parts by 1024.
    parts = split_selection_and_counts(Budget(1.0, 1e-6), 0.25,
                                       selection_mechanism=WeightedGaussian(100),
                                       counts_max_items_per_user=2 ** 63 - 1,
                                       composition="tight")
    assert 1.0 < parts.scale < 1.05
    (g,) = parts.composed
    assert "bounded by their pure epsilon" in g.description and g.tight_epsilon <= 1.0
    big = count_calibration(Budget(0.25), 10 ** 12)
    sel = WeightedGaussian(100).calibrate(Budget(0.75, 1e-6))
    assert composition.composed_epsilon(sel, big, 1e-6) < 1.0  # the binned binomial
    counts = count_calibration(ZCDPBudget(0.1), 2000)
    assert composition.composed_guarantee(sel, counts, 1e-5) is None


# -- tight parts: valid for their configuration only, and exact in δ ---------------------


def test_a_tight_part_is_refused_with_another_mechanism_or_counts_max_items():
    # A tight split's parts sum past the total (c·ε) and compose to it only for the
    # mechanism and counts Δ0 they were computed for; used with WeightedLaplace, or
    # counts at Δ0 = 1, the composed ε would be 1.11 / 1.078 > 1.
    import apache_beam as beam
    from beam_dpsu import CountReleased, SelectItems
    mechanism = WeightedGaussian(100)
    parts = split_selection_and_counts(Budget(1.0, 1e-6), 0.1, selection_mechanism=mechanism,
                                       counts_max_items_per_user=100, composition="tight")
    assert parts.scale > 1.0
    SelectItems(WeightedGaussian(100), parts.selection)  # the mechanism it was computed for
    with pytest.raises(ValueError, match="tight split"):
        SelectItems(WeightedLaplace(100), parts.selection)
    with pytest.raises(ValueError, match="tight split"):
        SelectItems(WeightedGaussian(30), parts.selection)
    released = beam.Pipeline() | beam.Create(["a"])
    CountReleased(released, parts.counts, max_items_per_user=100)
    with pytest.raises(ValueError, match="tight split"):
        CountReleased(released, parts.counts, max_items_per_user=1)



@pytest.mark.parametrize("resplit", ["Budget.split", "split_selection_and_counts",
                                     "BudgetAccountant"])
def test_a_tight_part_cannot_be_laundered_by_splitting_it_again(resplit):
    # The selection's tight part is c·(1 − s)·ε, more than its basic share; it composes
    # with the counts to ε only for WeightedGaussian(100). Split again, its pieces are
    # plain Budgets: SIPS(10) at all of them plus the counts spend c·ε > ε by basic
    # composition (c = 1.21 here), with no tight proof for SIPS.
    from beam_dpsu import SelectItems
    parts = split_selection_and_counts(Budget(1.0, 1e-6), 0.25,
                                       selection_mechanism=WeightedGaussian(10),
                                       counts_max_items_per_user=10, composition="tight")
    assert parts.scale > 1.2
    with pytest.raises(ValueError, match="tight split"):
        if resplit == "Budget.split":
            pieces = parts.selection.split([1, 1])
            for piece in pieces:
                SelectItems(SIPS(10), piece)
        elif resplit == "split_selection_and_counts":
            again = split_selection_and_counts(parts.selection, 0.5)
            SelectItems(SIPS(10), again.selection)
        else:
            accountant = BudgetAccountant(parts.selection)
            SelectItems(SIPS(10), Budget(parts.selection.epsilon, 1e-6),
                        accountant=accountant)


def test_discrete_gaussian_composition_is_not_below_the_exact_delta():
    # dp-accounting's composition is exact only to ~1e-16 in δ; at ZCDPBudget(3, 1e-10)
    # an ε taken from it would give a true δ of 2.00000095e-10.
    mechanism = WeightedGaussian(100)
    parts = split_selection_and_counts(ZCDPBudget(3.0, 1e-10), 0.5,
                                       selection_mechanism=mechanism,
                                       counts_max_items_per_user=1)
    selection = mechanism.calibrate(parts.selection)
    counts = count_calibration(parts.counts, 1)
    pair, _, _ = composition._selection_pair(selection)
    mu, s2 = pair.mu, float(counts.noise.sigma_squared)
    xs = np.arange(-60, 61)
    weights = np.exp(-xs * xs / (2 * s2))
    weights /= weights.sum()
    epsilon = 18.0697660868
    # δ of the Gaussian pair at each shifted ε, by the Φ formula in high precision.
    import mpmath
    with mpmath.workdps(40):
        exact = mpmath.fsum(
            mpmath.mpf(float(w)) * (mpmath.ncdf(mu / 2 - (epsilon - (1 - 2 * x) / (2 * s2)) / mu)
                                    - mpmath.e ** (epsilon - (1 - 2 * x) / (2 * s2))
                                    * mpmath.ncdf(-mu / 2
                                                  - (epsilon - (1 - 2 * x) / (2 * s2)) / mu))
            for x, w in zip(xs, weights))
    assert composition._Composition(selection, counts).loss_delta(epsilon) >= float(exact)


def test_a_tight_counts_part_cannot_be_laundered_by_converting_it_to_zcdp():
    # Budget.split, split_selection_and_counts and BudgetAccountant refuse a tight
    # part; Budget.to_zcdp must too, or it makes the counts' part (δ = 0) a plain
    # ZCDPBudget that CountReleased takes at any Δ0: discrete Gaussian counts at its ρ
    # beside the selection's tight part compose to ε = 1.66 at δ = 1e-6 for a total of
    # ε = 1.
    parts = split_selection_and_counts(Budget(1.0, 1e-6), 0.25,
                                       selection_mechanism=WeightedGaussian(10),
                                       counts_max_items_per_user=10, composition="tight")
    selection = WeightedGaussian(10).calibrate(parts.selection)
    assert composition.composed_epsilon(
        selection, count_calibration(ZCDPBudget(parts.counts.epsilon ** 2 / 2), 10),
        1e-6) > 1.5
    with pytest.raises(ValueError, match="tight split"):
        parts.counts.to_zcdp()
    assert Budget(parts.counts.epsilon).to_zcdp().rho > 0  # a plain pure budget converts


# -- a tight part outside SelectItems and CountReleased ---------------------------------
# A part of a composition="tight" split is valid only for the mechanism it was computed
# for (docs/privacy.md, "Selection plus counts"): the n-gram transforms, taking it for
# another configuration, would spend past the total.

TIGHT_TOTAL = Budget(10.0, 1e-3)


def tight_split(selection_max_items: int, counts_max_items: int):
    """A tight split of TIGHT_TOTAL for Weighted Gaussian at Δ = ``selection_max_items``
    and counts at Δ0 = ``counts_max_items``, half of ε each before scaling."""
    parts = split_selection_and_counts(
        TIGHT_TOTAL, 0.5, selection_mechanism=WeightedGaussian(selection_max_items),
        counts_max_items_per_user=counts_max_items, composition="tight")
    assert parts.scale > 1.0  # a tight split indeed: the parts' ε sum past the total
    return parts


# (WG Δ of the split, counts Δ0, DPNE levels T, DPNE Δ_1) and the δ at ε = 10 of DPNE's
# levels composed with the counts, were the part taken:
TIGHT_PART_CASES = {
    # a part for WG(1000) given to DPNE at Δ_1 = 1: δ = 1.0616e-3, 1.062× the total
    "WG(1000) part, DPNE T=1 at 1": (1000, 10, 1, 1),
    # the same Δ, but three levels: δ = 1.000093e-3, 9.3e-5 relative over the total
    "WG(100) part, DPNE T=3 at 100": (100, 1, 3, 100),
}


@pytest.mark.parametrize("case", sorted(TIGHT_PART_CASES))
def test_extract_ngrams_refuses_a_tight_part_made_for_another_mechanism(case):
    from beam_dpsu import ExtractNgrams
    selection_max_items, counts_max_items, levels, level1_max_items = TIGHT_PART_CASES[case]
    parts = tight_split(selection_max_items, counts_max_items)
    with pytest.raises(ValueError, match="tight"):
        ExtractNgrams(levels, parts.selection, max_items_per_user=level1_max_items)


@pytest.mark.parametrize("variant", ["dpsu-even", "dpsu-all"])
def test_ngrams_by_dpsu_refuses_a_tight_part_made_for_another_mechanism(variant):
    from beam_dpsu.ngram_baselines import NgramsByDPSU
    parts = tight_split(100, 1)
    with pytest.raises(ValueError, match="tight"):
        NgramsByDPSU(variant, 3, parts.selection, max_items_per_user=100)


def dpne_as_one_gaussian(extract, budget) -> Calibration:
    """DPNE's selection as what its levels compose to: one Gaussian of σ* with level 1's
    threshold event (docs/privacy.md, DPNE)."""
    return Calibration(
        noise="gaussian", noise_scale=extract.sigma_total,
        release_threshold=extract.level1_calibration.release_threshold,
        threshold_delta=extract.threshold_delta, sensitivity_norm=2, sensitivity=1.0,
        budget=budget, source="test: DPNE's levels composed to sigma*")


@pytest.mark.parametrize("case", sorted(TIGHT_PART_CASES))
def test_dpne_with_counts_on_a_tight_split_stays_within_the_total_or_is_refused(case):
    """What the refusal prevents: ExtractNgrams + CountReleased on the two parts spend
    more δ at the total ε than the total (the numbers in TIGHT_PART_CASES)."""
    from beam_dpsu import ExtractNgrams
    selection_max_items, counts_max_items, levels, level1_max_items = TIGHT_PART_CASES[case]
    parts = tight_split(selection_max_items, counts_max_items)
    try:
        extract = ExtractNgrams(levels, parts.selection, max_items_per_user=level1_max_items)
    except ValueError:
        return  # refused: nothing is spent
    counts = count_calibration(parts.counts, counts_max_items)
    spent = composition.composed_delta(dpne_as_one_gaussian(extract, parts.selection), counts,
                                       TIGHT_TOTAL.epsilon)
    assert spent <= TIGHT_TOTAL.delta


def test_select_items_and_count_released_refuse_a_tight_part_of_another_configuration():
    """The guard the n-gram transforms must have, as these two have it."""
    import apache_beam as beam
    from beam_dpsu import CountReleased, SelectItems
    parts = tight_split(100, 10)
    with pytest.raises(ValueError, match="tight"):
        SelectItems(WeightedGaussian(1000), parts.selection)
    pipeline = beam.Pipeline()
    released = pipeline | beam.Create(["a"])
    with pytest.raises(ValueError, match="tight"):
        CountReleased(released, parts.counts, max_items_per_user=5)


# -- DPNE's level-1 calibration composed with counts -------------------------------------
# DPNE's ``level1_calibration`` is level 1 alone (σ_1): composed with counts it would
# state μ = 1/σ_1 instead of DPNE's μ = 1/σ* (docs/privacy.md, DPNE: the levels compose
# to σ*), an ε below the true one.

DPNE_COUNTS_TOTAL = Budget(1.765, 4.96e-5)


def dpne_with_counts():
    from beam_dpsu import ExtractNgrams
    parts = split_selection_and_counts(DPNE_COUNTS_TOTAL, 0.25)
    extract = ExtractNgrams(3, parts.selection)
    counts = count_calibration(parts.counts, 10)
    truth = composition.composed_guarantee(dpne_as_one_gaussian(extract, parts.selection),
                                           counts, DPNE_COUNTS_TOTAL.delta)
    return parts, extract, counts, truth.epsilon


def test_dpne_with_counts_composes_to_its_golden_epsilon():
    """Golden: DPNE (T = 3) on 3/4 of (1.765, 4.96e-5) with counts (Δ0 = 10) on 1/4
    composes, as one Gaussian of σ* plus discrete Laplace counts, to ε ≈ 1.4231."""
    *_, truth = dpne_with_counts()
    assert truth == pytest.approx(1.4231, abs=5e-4)
    assert truth < DPNE_COUNTS_TOTAL.epsilon


def test_composed_with_dpne_level1_is_refused_or_not_below_the_true_epsilon():
    """Level 1 alone would state ε = 0.8668 against the true 1.4231."""
    parts, extract, counts, truth = dpne_with_counts()
    try:
        stated = parts.composed_with(extract.level1_calibration, counts)
    except (ValueError, TypeError):
        return
    assert all(g.epsilon >= truth * (1 - 1e-9) for g in stated.composed)


def test_composed_guarantee_of_dpne_level1_is_refused_or_not_below_the_true_epsilon():
    parts, extract, counts, truth = dpne_with_counts()
    try:
        stated = composition.composed_guarantee(extract.level1_calibration, counts,
                                                DPNE_COUNTS_TOTAL.delta)
    except (ValueError, TypeError):
        return
    assert stated is None or stated.epsilon >= truth * (1 - 1e-9)


# -- composition: a part of a mechanism is refused on every entry point -------------------
# ``part_of`` marks a calibration that is one part of a mechanism (DPNE's level 1, a
# DPSU-even level): composed alone, it would state too little.

def _parts_of_mechanisms():
    dpne = ngram_calibration.calibrate(Budget(1.0, 1e-6), 3, 1.0, 10, "weighted-gaussian", 3.0)
    even = ngram_calibration.dpsu_even_calibration(Budget(1.0, 1e-6), 3, 10)
    return [dpne.level1, even]


@pytest.mark.parametrize("entry", [
    lambda sel, cnt: composition.composed_epsilon(sel, cnt, 1e-6),
    lambda sel, cnt: composition.composed_delta(sel, cnt, 1.25),
    lambda sel, cnt: composition.composed_guarantee(sel, cnt, 1e-6),
], ids=["composed_epsilon", "composed_delta", "composed_guarantee"])
def test_every_composition_entry_point_refuses_a_part_of_a_mechanism(entry):
    """composed_epsilon(DPNE level 1, counts) would state ε = 0.646 where the three
    levels as run (one Gaussian of σ*) give 1.060."""
    counts = count_calibration(Budget(0.25, 0.0), 10)
    for part in _parts_of_mechanisms():
        assert part.part_of is not None
        with pytest.raises(ParameterError, match="compose the whole mechanism"):
            entry(part, counts)
