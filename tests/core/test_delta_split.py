"""The δ split between one Gaussian σ and the thresholds (``beam_dpsu.core.delta_split``).

``split_delta`` minimises the release threshold over δ_noise + δ_thr = δ: checked
against a brute-force grid of the split, the even split, and its own bounds.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beam_dpsu.core import mechanisms
from beam_dpsu.core.budgets import Budget, geometric_split_weights
from beam_dpsu.core.delta_split import split_delta
from beam_dpsu.core.gaussian import analytic_gaussian_sigma
from beam_dpsu.core.thresholds import weighted_gaussian_threshold
from tests.support.hypothesis_profiles import examples
from tests.support.gaussian_delta import gaussian_mechanism_delta

IMDB = Budget(1.765, 4.96e-5)


def brute_force_min(epsilon, delta, objective, l2=1.0, points=801):
    """min of the objective over a fine grid of δ_thr/δ in (0, 1)."""
    best = math.inf
    for share in np.linspace(0.001, 0.999, points):
        d_thr = delta * share
        d_noise = delta - d_thr
        if d_noise <= 0:
            continue
        best = min(best, objective(analytic_gaussian_sigma(epsilon, d_noise, l2), d_thr))
    return best


@pytest.mark.parametrize("epsilon,delta,d0", [(1.765, 4.96e-5, 100), (3.0, math.exp(-10), 100),
                                              (1.0, 0.2, 10), (0.1, 1e-6, 1), (8.0, 1e-9, 1000)])
def test_split_is_the_grid_optimum(epsilon, delta, d0):
    objective = lambda s, d: weighted_gaussian_threshold(s, d, d0)  # noqa: E731
    split = split_delta(epsilon, delta, objective)
    grid = brute_force_min(epsilon, delta, objective)
    assert split.objective <= grid + 1e-6 * grid
    # and the optimum is genuinely better than (or equal to) the even split.
    even = objective(analytic_gaussian_sigma(epsilon, delta - delta / 2),
                     delta / 2)
    assert split.objective <= even
    assert split.delta_noise + split.threshold_delta <= delta


def test_sips_split_is_the_grid_optimum_of_the_last_round():
    mechanism = mechanisms.SIPS(100)
    cal = mechanism.calibrate(IMDB)
    w = geometric_split_weights(3, 1 / 3)[-1]
    objective = lambda s, d: weighted_gaussian_threshold(s / math.sqrt(w), d * w, 100)  # noqa
    assert cal.rounds[-1].release_threshold <= brute_force_min(1.765, 4.96e-5, objective) + 1e-5


def test_split_is_deterministic_and_bounded():
    calls = []

    def objective(sigma, d):
        calls.append(d)
        return weighted_gaussian_threshold(sigma, d, 100)

    first = split_delta(1.765, 4.96e-5, objective)
    assert len(calls) <= 17 + 45  # the grid plus a bounded Brent search
    assert split_delta(1.765, 4.96e-5, objective) == first


@settings(max_examples=examples(60), deadline=None)
@given(epsilon=st.floats(0.01, 20), log_delta=st.floats(math.log(1e-12), math.log(0.5)),
       d0=st.sampled_from([1, 2, 10, 100, 1000]))
def test_split_is_feasible_and_no_worse_than_even_at_extremes(epsilon, log_delta, d0):
    delta = math.exp(log_delta)
    objective = lambda s, d: weighted_gaussian_threshold(s, d, d0)  # noqa: E731
    split = split_delta(epsilon, delta, objective)
    assert split.delta_noise > 0 and 0 < split.threshold_delta < delta
    assert split.delta_noise + split.threshold_delta <= delta
    assert math.isfinite(split.objective)
    # δ_thr = δ/2 (the grid's middle point), with its end-to-end cost.
    even = objective(analytic_gaussian_sigma(epsilon, delta - delta / 2),
                     delta / 2)
    assert split.objective <= even * (1 + 1e-12)
    # σ is the analytic Gaussian at δ_noise: its exact δ is not above δ_noise.
    assert gaussian_mechanism_delta(split.sigma_total, epsilon) <= split.delta_noise * (1 + 1e-9)

