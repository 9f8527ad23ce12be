"""SIPS's Δ0 rule under "auto": the model of its rounds (beam_dpsu.core.max_items_rounds), and
the M/T rule of the other mechanisms left as it was."""

import random

import numpy as np
import pytest
from scipy import optimize, special

from beam_dpsu.core import max_items_choice as choice
from beam_dpsu.core import max_items_rounds as rounds
from beam_dpsu.core.budgets import Budget, ZCDPBudget
from beam_dpsu.core.mechanisms import SIPS, PolicyGaussian, WeightedGaussian

ZCDP = ZCDPBudget(0.1, 1e-5)

# Users per size bin (the bins of the default candidates) of the benchmark's data
# sets (docs/benchmarks.md, "Choosing Δ0 privately"): raw counts of public data.
HISTOGRAMS = {
    "imdb": [0, 0, 0, 0, 4, 0, 2, 5, 11, 16, 23, 252, 1412, 792, 2031, 9516, 4814, 10031,
             9989, 2247, 4160, 3348, 1269, 19, 55, 4, 0],
    "askreddit": [197, 147, 180, 165, 158, 275, 221, 98, 424, 257, 153, 357, 296, 84, 149,
                  137, 28, 60, 51, 6, 16, 18, 7, 0, 2, 0, 0],
    "zipf-a": [0, 0, 0, 0, 0, 31, 900, 2316, 18418, 7102, 3544, 6132, 4069, 982, 1752, 1736,
               350, 742, 709, 151, 267, 302, 164, 6, 95, 73, 159],
    "zipf-b": [1, 16, 197, 1069, 3193, 14014, 14192, 4485, 8910, 1923, 716, 841, 295, 34, 65,
               31, 4, 10, 2, 1, 0, 0, 1, 0, 0, 0, 0],
}
# SIPS's best grid step on each (the benchmark's grid curves) and what the M/T rule chose.
SIPS_CHOICE = {"imdb": 100, "askreddit": 100, "zipf-a": 100, "zipf-b": 5}
MASS_OVER_THRESHOLD_CHOICE = {"imdb": 500, "askreddit": 100, "zipf-a": 200, "zipf-b": 20}


def _plan(mechanism, budget=ZCDP):
    return choice.plan_auto(mechanism(max_items_per_user="auto"), budget)


def test_holding_probabilities_sum_to_the_sizes_and_fall_with_the_rank():
    sizes = [1.0, 3.5, 20.0, 700.0, 5000.0]
    p = rounds.holding_probabilities(sizes)
    _, widths = rounds.rank_grid()
    assert p @ widths == pytest.approx(sizes, rel=1e-9)
    assert np.all((p >= 0) & (p <= 1))
    assert np.all(np.diff(p, axis=1) <= 0)  # a less popular item is held less often
    assert np.all(np.diff(p, axis=0) >= 0)  # a larger user holds every item more often


def _reference_released(count, size, thresholds, max_items, exponent, ranks=2_000_000):
    """The model on every integer rank one by one (no grid, no interpolation): one bin."""
    q = np.arange(1, ranks + 1, dtype=np.float64) ** -exponent / special.zeta(exponent)
    lam = optimize.brentq(lambda x: float(-np.expm1(-x * q).sum()) - size, 1e-9, 1e12,
                          xtol=1e-12, rtol=1e-14)
    p = -np.expm1(-lam * q)
    cut = 0
    for t in thresholds:
        left = size - p[:cut].sum()
        weights = count * p * np.sqrt(min(left, max_items)) / left
        above = np.flatnonzero(weights[cut:] >= t)
        cut = max(cut, cut + int(above[-1]) + 1 if len(above) else cut)
    return cut


@pytest.mark.parametrize("max_items,thresholds", [(5, (30.0,)), (50, (30.0,)),
                                                 (50, (60.0, 30.0, 15.0)), (10, (40.0, 12.0))])
def test_the_released_count_golden_against_every_rank_one_by_one(max_items, thresholds):
    # 2,000 users of 50 items, exponent 2 (the tail beyond 2e6 ranks holds < 1e-3 of an
    # item per user): the grid and its interpolation agree with the plain sum (whole
    # ranks) to one rank or 1 %.
    got = rounds.expected_released([2000.0], [50.0], thresholds, max_items, exponent=2.0)
    want = _reference_released(2000.0, 50.0, thresholds, max_items, 2.0)
    assert abs(got - want) <= max(1.0, 0.01 * want), (got, want)


def test_later_rounds_read_the_users_minus_what_earlier_rounds_released():
    # The same last threshold after a first round that released the popular ranks: the
    # users' remaining items are fewer, each gets more weight, and more ranks clear it.
    one = rounds.expected_released([2000.0], [50.0], (15.0,), 50, exponent=2.0)
    two = rounds.expected_released([2000.0], [50.0], (40.0, 15.0), 50, exponent=2.0)
    assert two > one
    # No user, nothing released; the model is a function of the counts it is given.
    assert rounds.expected_released([0.0], [50.0], (15.0,), 50) == 0.0


@pytest.mark.parametrize("share", [None, 0.05])
@pytest.mark.parametrize("name", sorted(HISTOGRAMS))
def test_the_sips_rule_picks_sips_best_grid_step_golden(name, share):
    # Golden: SIPS's best Δ0 of the benchmark's grid on each data set, from the size
    # histogram alone (exact counts, then 30 seeded noisy draws at SIPS's default 1.5 %
    # share and at 5 %: fixed seeds, so this cannot fail by chance).
    plan = choice.plan_auto(SIPS(max_items_per_user=choice.AutoMaxItems(share=share)), ZCDP)
    counts = np.asarray(HISTOGRAMS[name])
    assert plan.choose(counts) == SIPS_CHOICE[name]
    picks = [plan.choose(choice.noisy_size_histogram(counts, plan.size_budget,
                                                     random.Random(seed)))
             for seed in range(30)]
    if name == "askreddit":  # 3,486 users: the curve is flat from 50 to 200
        assert set(picks) <= {50, 100, 200} and picks.count(100) >= 20
    elif name == "zipf-a" and share is None:  # 200 within 0.6 % of 100 on SIPS's grid
        assert set(picks) <= {100, 200} and picks.count(100) >= 25
    else:
        assert set(picks) == {SIPS_CHOICE[name]}


@pytest.mark.parametrize("mechanism", [WeightedGaussian, PolicyGaussian])
@pytest.mark.parametrize("name", sorted(HISTOGRAMS))
def test_weighted_and_policy_gaussian_keep_the_mass_over_threshold_rule(mechanism, name):
    plan = _plan(mechanism)
    assert plan.round_thresholds == ()
    assert plan.choose(np.asarray(HISTOGRAMS[name])) == MASS_OVER_THRESHOLD_CHOICE[name]
    assert plan.to_dict()["rule"].startswith("argmax over candidates of M(Δ0)/T(Δ0)")


def test_sips_scored_as_one_round_would_take_a_larger_step():
    # Why the rounds' model: scored by M/T (T of the last round), SIPS would take
    # IMDb's 500, one grid step above its best.
    plan = _plan(SIPS)
    as_one_round = choice.AutoPlan(**{**plan.__dict__, "round_thresholds": ()})
    assert as_one_round.choose(np.asarray(HISTOGRAMS["imdb"])) == 500
    assert plan.choose(np.asarray(HISTOGRAMS["imdb"])) == 100


def test_users_all_of_one_size_keep_fewer_in_the_last_round():
    # 10,000 users of 20 items: the first rounds take the popular items, so the last
    # round reads users of fewer than 20 and a smaller Δ0 (lower thresholds) wins.
    plan = _plan(SIPS)
    assert plan.choose(choice.size_counts([20] * 10_000, np.array(plan.edges))) == 10


def test_the_sips_plan_reports_the_rounds_thresholds_and_its_rule():
    plan = _plan(SIPS, Budget(1.765, 4.96e-5))
    report = plan.to_dict()
    assert "max_items_rounds" in report["rule"] and "Zipf" in report["rule"]
    assert len(report["round_thresholds"]) == len(plan.candidates)
    at_100 = SIPS(max_items_per_user=100).calibrate(plan.selection_budget)
    assert report["round_thresholds"][plan.candidates.index(100)] == [
        r.release_threshold for r in at_100.rounds]


@pytest.mark.parametrize("budget", [Budget(1e-300, 1e-5), ZCDPBudget(1e-300, 1e-5)])
def test_noise_beyond_the_users_picks_the_smallest_candidate(budget):
    # As the M/T rule: where no candidate's mass stands above the noise, the histogram
    # tells nothing and the smallest candidate is taken (seeded draw: cannot fail).
    plan = _plan(SIPS, budget)
    counts = choice.size_counts([50] * 1000, np.asarray(plan.edges))
    noisy = choice.noisy_size_histogram(counts, plan.size_budget, random.Random(0))
    assert plan.choose(counts) == 1 and plan.choose(noisy) == 1


def test_noise_in_the_empty_top_bins_cannot_push_sips_above_the_mass_over_threshold_choice():
    # 3,001 users of 3 items (as tests/beam/test_auto_beam.py) at ρ = 5: a few noise
    # users in the bins of 200-1000 items would hold the rare ranks far more often than
    # 3,000 users of 3, and the model alone then takes Δ0 = 100. The M/T choice, its mass
    # taken two noise deviations low, bounds SIPS's (fixed counts: cannot fail).
    plan = choice.plan_auto(SIPS(max_items_per_user=choice.AutoMaxItems(
        candidates=(1, 2, 5, 100))), ZCDPBudget(5.0, 1e-5))
    # A draw of the noisy histogram (random.Random(1)): a user or two in the bins above 3.
    counts = np.array([-2.0, 3, 3000, 1, 1, 1, 2, 0, 1, 1, 0, -2, 1, 1, 0])
    unbounded = choice.AutoPlan(**{**plan.__dict__, "round_thresholds": ()})
    assert unbounded.choose(counts) == 5
    scores = [rounds.expected_released(counts, plan_sizes(plan), t, c)
              for c, t in zip(plan.candidates, plan.round_thresholds)]
    assert plan.candidates[int(np.argmax(scores))] == 100  # the model alone
    assert plan.choose(counts) == 5


def plan_sizes(plan):
    """The size each bin's users are read at (as ``AutoPlan.proxy``)."""
    lower = np.asarray(plan.edges, dtype=float)
    upper = np.append(lower[1:] - 1.0, lower[-1])
    return np.sqrt(lower * upper)
