"""max_items_per_user="auto": the share that calibrates the size histogram's noise is
the share taken from the selection's budget, and the report and the accountant state
exactly that (docs/privacy.md, "Choosing Δ0 privately", "The auto share", invariant 4).

With SIPS's default share (1.5 %) too, every path that spends a share is checked from
what actually runs: the noise drawn on the bins (``size_noise`` of the plan's part) and
the calibrations the selection or the counts read, composed in exact arithmetic."""

import json
import math
from fractions import Fraction

import apache_beam as beam
import pytest

import beam_dpsu
from beam_dpsu.core import max_items_choice as choice
from beam_dpsu.core import ngram_calibration
from beam_dpsu.core.budgets import BudgetAccountant
from beam_dpsu.core.mechanisms import (SIPS, CountGaussian, CountLaplace, GreedyWithoutSampling,
                                       PolicyGaussian, PolicyLaplace, WeightedGaussian,
                                       WeightedLaplace)
from tests.support.gaussian_delta import gaussian_mechanism_delta

pytestmark = pytest.mark.pipeline

ZCDP = beam_dpsu.ZCDPBudget(0.1, 1e-5)
DP = beam_dpsu.Budget(1.0, 1e-5)
CANDIDATES = (1, 10, 100)


def _histogram_part(noise) -> Fraction:
    """What the bins' noise spends, read off the noise itself: ε = 1/scale for
    discrete Laplace (sensitivity 1), ρ = 1/(2σ²) for discrete Gaussian."""
    if isinstance(noise, beam_dpsu.DiscreteGaussian):
        return 1 / (2 * Fraction(noise.sigma_squared))
    return 1 / Fraction(noise.scale)


def _amount(budget) -> Fraction:
    return Fraction(budget.rho if isinstance(budget, beam_dpsu.ZCDPBudget) else budget.epsilon)


def _assert_split_as_run(total, share, plan, plan_report, selection_budgets, rest):
    """The histogram's noise spends share·total, the selection's calibrations spend the
    rest (at most), the sum is within the total, and the report says so in numbers."""
    hist = _histogram_part(choice.size_noise(plan.size_budget))
    # The noise is calibrated to the share's part, exactly (not to some other share).
    assert float(hist) == pytest.approx(_amount(total) * share, rel=1e-15)
    for budget in selection_budgets:
        assert budget == rest
        assert hist + _amount(budget) <= _amount(total)  # sequential composition, exact
        # Nothing left unspent but rounding: the selection takes the rest.
        assert float(hist + _amount(budget)) == pytest.approx(_amount(total), rel=1e-15)
        assert budget.delta == total.delta
    # The report states the share as a number, and the parts as run.
    assert plan_report["share"] == share and isinstance(plan_report["share"], float)
    hist_report = plan_report["size_histogram"]["budget"]
    assert hist_report == plan.size_budget.to_dict()
    assert hist_report["delta"] == 0.0
    assert json.loads(json.dumps(plan_report)) == plan_report
    assert "default" not in json.dumps(plan_report) and "null" not in json.dumps(
        plan_report["size_histogram"])


SHARES = [(SIPS, None, 0.015), (SIPS, 0.05, 0.05), (SIPS, 0.2, 0.2),
          (WeightedGaussian, None, 0.05), (PolicyGaussian, None, 0.05),
          (WeightedGaussian, 0.015, 0.015), (PolicyLaplace, None, 0.05),
          (WeightedLaplace, None, 0.05), (CountGaussian, None, 0.05),
          (CountLaplace, None, 0.05), (GreedyWithoutSampling, None, 0.05)]


@pytest.mark.parametrize("total", [ZCDP, DP], ids=["zcdp", "dp"])
@pytest.mark.parametrize("mechanism,given,share", SHARES)
def test_select_items_spends_the_share_it_calibrates_and_reports_it(mechanism, given, share,
                                                                     total):
    auto = choice.AutoMaxItems(share=given, candidates=CANDIDATES)
    accountant = BudgetAccountant(total)
    select = beam_dpsu.SelectItems(mechanism(max_items_per_user=auto), total,
                                   accountant=accountant)
    plan = select.auto_plan
    assert plan.auto.share == share
    report = select.report
    _assert_split_as_run(total, share, plan, report["max_items_per_user"],
                         [c.budget for c in select.auto_plan.calibrations], plan.selection_budget)
    # The mechanism's own entry states the same share, and the accountant the total.
    assert report["mechanism"]["max_items_per_user"]["share"] == share
    # The accountant is charged the total once: the split lives in the report.
    assert accountant.spent() == {k: v for k, v in total.to_dict().items() if k != "type"}


@pytest.mark.parametrize("total", [ZCDP, DP], ids=["zcdp", "dp"])
def test_sips_auto_without_a_share_composes_its_noise_to_the_total(total):
    # The brief's case: SIPS, "auto", no share. What runs: discrete noise on the bins
    # at 1.5 % of the total, and the rounds' Gaussian noise at the rest (zCDP: the
    # rounds' ρ_i = 1/(2σ_i²) as drawn; DP: one Gaussian of σ_total at (ε_sel, δ_noise)).
    select = beam_dpsu.SelectItems(SIPS(max_items_per_user="auto"), total)
    plan = select.auto_plan
    hist = _histogram_part(choice.size_noise(plan.size_budget))
    assert float(hist) == pytest.approx(0.015 * float(_amount(total)), rel=1e-15)
    for calibration in select.auto_plan.calibrations:
        if isinstance(total, beam_dpsu.ZCDPBudget):
            rounds = sum(1 / (2 * Fraction(c.noise_scale) ** 2) for c in calibration.rounds)
            # Within the total exactly (σ_i is rounded up: gaussian.zcdp_gaussian_sigma),
            # and nothing left unspent.
            assert hist + rounds <= _amount(total)
            assert float(hist + rounds) == pytest.approx(float(_amount(total)), rel=1e-12)
            assert Fraction(calibration.zcdp_budget.rho) + hist <= _amount(total)
            assert math.fsum(c.threshold_delta for c in calibration.rounds) <= total.delta
        else:
            eps_sel = calibration.budget.epsilon
            assert hist + Fraction(eps_sel) <= _amount(total)
            assert gaussian_mechanism_delta(calibration.sigma_total, eps_sel) \
                <= calibration.delta_noise
            assert Fraction(calibration.delta_noise) + Fraction(
                calibration.threshold_delta) <= Fraction(total.delta)
    report = select.report
    assert report["max_items_per_user"]["share"] == 0.015
    assert report["mechanism"]["max_items_per_user"]["share"] == 0.015


@pytest.mark.parametrize("total", [ZCDP, DP], ids=["zcdp", "dp"])
@pytest.mark.parametrize("given,share", [(None, 0.05), ("auto", 0.05), (0.015, 0.015),
                                         (0.3, 0.3)])
def test_count_released_spends_the_share_it_calibrates_and_reports_it(given, share, total):
    # The counts' own auto keeps 5 % whatever the selection's mechanism (SIPS included).
    pure = (beam_dpsu.ZCDPBudget(total.rho, 0.0) if isinstance(total, beam_dpsu.ZCDPBudget)
            else beam_dpsu.Budget(total.epsilon, 0.0))
    auto = given if given == "auto" else choice.AutoMaxItems(share=given,
                                                             candidates=CANDIDATES)
    p = beam.Pipeline()  # built only, never run
    released = p | beam.Create(["a"])
    counter = beam_dpsu.CountReleased(released, pure, max_items_per_user=auto,
                                      accountant=BudgetAccountant(pure))
    plan = counter.auto_plan
    assert plan.auto.share == share
    _assert_split_as_run(pure, share, plan, counter.report["max_items_per_user"],
                         [k.budget for k in counter.calibrations_by_candidate.values()],
                         plan.counts_budget)
    # Each candidate's count noise spends exactly the counts' part.
    for c, k in counter.calibrations_by_candidate.items():
        noise = k.noise
        spent = (c / (2 * Fraction(noise.sigma_squared))
                 if isinstance(noise, beam_dpsu.DiscreteGaussian) else c / Fraction(noise.scale))
        assert spent <= _amount(plan.counts_budget)


@pytest.mark.parametrize("total", [ZCDP, DP], ids=["zcdp", "dp"])
@pytest.mark.parametrize("given,share", [(None, 0.05), (0.015, 0.015)])
def test_extract_ngrams_spends_the_share_it_calibrates_and_reports_it(given, share, total):
    auto = choice.AutoMaxItems(share=given, candidates=CANDIDATES)
    extract = beam_dpsu.ExtractNgrams(2, total, max_items_per_user=auto)
    plan = extract.auto_plan
    assert plan.auto.share == share
    report = extract.report
    _assert_split_as_run(total, share, plan, report["max_items_per_user"],
                         [plan.selection_budget], plan.selection_budget)
    # DPNE at every candidate is calibrated at the selection's part: σ* from it.
    for c in extract._calibrations:
        expected = ngram_calibration.calibrate(
            plan.selection_budget, 2, extract.params.noise_decay, c.max_items_1,
            extract.params.level1, extract.params.alpha, extract.params.pre_threshold)
        assert c.sigma_total == expected.sigma_total


@pytest.mark.parametrize("mechanism", [WeightedGaussian(10), SIPS(10)])
def test_zcdp_gaussian_sigma_is_never_below_what_its_rho_pays_for(mechanism):
    # Invariant 4 keeps splits exact (parts_within, size_noise's Fraction scales) and
    # the (ε, δ) path rounds σ up; the zCDP path should too: 1/(2σ²) ≤ ρ exactly.
    # Deterministic: these ρ were found to round σ down (about half of all ρ do).
    for rho in (0.1, 0.1 * 0.985, 0.3, 0.7, 1.9):
        calibration = mechanism.calibrate(beam_dpsu.ZCDPBudget(rho, 1e-5))
        for c in getattr(calibration, "rounds", [calibration]):
            assert 1 / (2 * Fraction(c.noise_scale) ** 2) <= Fraction(c.budget.rho), (rho, c)
