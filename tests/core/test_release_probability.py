"""Statistical tests: an item held by one user alone is released w.p. ≤ δ.

A dataset of a single user holding t items is the worst case of the privacy
proofs (dpsu eq. 4.1, 5.1; dp-sips App. A): the extra user's items are the
only ones outside the neighbour's support. We run the pure noise-and-threshold
core (``release_mask``, the function the Beam transform calls) N times and
compare the number of runs that release anything against Binomial(N, δ_thr),
where δ_thr is the part of δ the threshold was given.

False-failure rate: each check fails by chance only if a Binomial(N, p ≤ δ_thr)
count exceeds its upper quantile.
the 1 − 1e-8 quantile is used, so the 24 sampled checks below fail by chance
with probability < 3e-7 in all.
"""

import numpy as np
import pytest
from scipy import stats

from beam_dpsu.core import mechanisms

from beam_dpsu.core import hashing
from beam_dpsu.core.budgets import Budget, ZCDPBudget
from beam_dpsu.core.calibration import release_mask

N_TRIALS = 20_000
QUANTILE = 1 - 1e-8
MAX_ITEMS = 10

MECHANISMS = [mechanisms.CountLaplace(MAX_ITEMS), mechanisms.CountGaussian(MAX_ITEMS),
              mechanisms.WeightedLaplace(MAX_ITEMS), mechanisms.WeightedGaussian(MAX_ITEMS)]
BUDGETS = [Budget(1.0, 0.2), ZCDPBudget(0.5, 0.1)]


def released_any(weights_per_item, n_items, calibration, rng, n_trials=N_TRIALS):
    weights = np.full((n_trials, n_items), weights_per_item)
    return int(release_mask(weights, calibration, rng).any(axis=1).sum())


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=lambda m: m.name)
@pytest.mark.parametrize("budget", BUDGETS, ids=lambda b: type(b).__name__)
@pytest.mark.parametrize("n_items", [1, 3, MAX_ITEMS])
def test_single_user_items_released_with_probability_at_most_delta(mechanism, budget, n_items):
    calibration = mechanism.calibrate(budget)
    rng = hashing.os_rng()
    count = released_any(mechanism.item_weight(n_items), n_items, calibration, rng)
    bound = stats.binom.ppf(QUANTILE, N_TRIALS, calibration.threshold_delta)
    assert count <= bound, (count, bound, calibration)
    assert calibration.threshold_delta <= budget.delta


@pytest.mark.parametrize("mechanism", MECHANISMS, ids=lambda m: m.name)
def test_exact_single_user_release_probability_is_at_most_delta(mechanism):
    # The same bound in closed form, at every t ≤ Δ0: 1 − F(ρ − w(t))^t ≤ δ_thr.
    for budget in BUDGETS:
        cal = mechanism.calibrate(budget)
        dist = (stats.laplace(scale=cal.noise_scale) if cal.noise == "laplace"
                else stats.norm(scale=cal.noise_scale))
        probs = [1 - dist.cdf(cal.release_threshold - mechanism.item_weight(t)) ** t
                 for t in range(1, MAX_ITEMS + 1)]
        assert max(probs) <= cal.threshold_delta * (1 + 1e-9)
        # and the threshold is not wastefully high: the worst t meets δ_thr closely.
        assert max(probs) >= cal.threshold_delta * 0.5


def test_statistical_test_has_teeth():
    # A threshold lowered by one noise scale releases single-user items far more
    # often than δ; the same check must catch it. Chance of a miss < 1e-12.
    mechanism = mechanisms.WeightedLaplace(MAX_ITEMS)
    cal = mechanism.calibrate(Budget(1.0, 0.2))
    import dataclasses
    weak = dataclasses.replace(cal, release_threshold=cal.release_threshold - cal.noise_scale)
    # At the worst case t = Δ0 (where the max in ρ_Lap is attained here) the
    # release probability becomes ≈ 0.46 against δ_thr = 0.2.
    count = released_any(mechanism.item_weight(MAX_ITEMS), MAX_ITEMS, weak, hashing.os_rng())
    assert count > stats.binom.ppf(QUANTILE, N_TRIALS, cal.threshold_delta)
