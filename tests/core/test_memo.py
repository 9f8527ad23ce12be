"""Kept answers of pure functions (beam_dpsu.core.memo): the same floats and errors as a
fresh call, for every function that keeps them."""

import functools
import math

import numpy as np
import pytest

from beam_dpsu.core import composition, max_items_rounds, memo, ngram_calibration, thresholds
from beam_dpsu.core.budgets import Budget, ZCDPBudget, geometric_split_weights
from beam_dpsu.core.delta_split import split_delta
from beam_dpsu.core.checks import ParameterError
from beam_dpsu.core.counts_budget import count_calibration
from beam_dpsu.core.gaussian import gaussian_noise_schedule
from beam_dpsu.core.mechanisms import SIPS, PolicyGaussian, WeightedGaussian

IMDB = Budget(1.765, 4.96e-5)


# -- the key ----------------------------------------------------------------------------

def test_values_that_compare_equal_but_compute_differently_get_different_keys():
    for a, b in [(1, 1.0), (1, True), (0.0, -0.0), (1.0, np.float64(1.0)), (2, np.int64(2)),
                 ((1, 2.0), (1, 2)), (np.array([0.0]), np.array([-0.0])),
                 (np.array([1.0]), np.array([1.0], dtype=np.float32))]:
        assert memo.exact_key(a) != memo.exact_key(b), (a, b)
    assert memo.exact_key(1.5, (2, "x")) == memo.exact_key(1.5, (2, "x"))
    assert memo.exact_key(functools.partial(math.pow, 2.0)) == \
        memo.exact_key(functools.partial(math.pow, 2.0))
    assert memo.exact_key(functools.partial(math.pow, 2.0)) != \
        memo.exact_key(functools.partial(math.pow, 2))


def test_values_that_may_change_have_no_key():
    d0 = 5
    closure = lambda s: s * d0  # noqa: E731
    for value in ([1.0], {"a": 1}, closure, functools.partial(closure, 1.0), object(),
                  Budget(1.0, 1e-6).to_dict):
        with pytest.raises(TypeError, match="no exact key"):
            memo.exact_key(value)


def test_kept_tells_zero_from_minus_zero_and_int_from_float():
    @memo.kept(maxsize=8)
    def sign_and_type(x):
        return math.copysign(1.0, x), type(x).__name__

    assert sign_and_type(0.0) == (1.0, "float")
    assert sign_and_type(-0.0) == (-1.0, "float")
    assert sign_and_type(0) == (1.0, "int")
    assert sign_and_type(False) == (1.0, "bool")


def test_kept_runs_again_after_an_error_and_for_values_without_a_key():
    calls = []

    @memo.kept(maxsize=8)
    def fails_once(x):
        calls.append(x)
        if len(calls) == 1:
            raise ValueError("first call")
        return [x]

    with pytest.raises(ValueError, match="first call"):
        fails_once(1.0)
    assert fails_once(1.0) == [1.0] and fails_once(1.0) == [1.0]
    assert len(calls) == 2  # the error was not kept; the answer was
    fails_once([2.0])
    fails_once([2.0])
    assert len(calls) == 4  # a list has no key: run each time


# -- every kept function: the same floats as the uncached one -------------------------

def _old_closures(d0, max_n=3, noise_decay=1.0):
    """The objectives as closures, as they were before they became partials."""
    w_last = geometric_split_weights(3, 1 / 3)[-1]
    return {
        "weighted-gaussian": lambda s, d: thresholds.weighted_gaussian_threshold(s, d, d0),
        "sips": lambda s, d: thresholds.weighted_gaussian_threshold(
            s / math.sqrt(w_last), d * w_last, d0),
        "dpne": lambda s, d: thresholds.weighted_gaussian_threshold(
            gaussian_noise_schedule(s, max_n, noise_decay)[0], d, d0),
        "dpsu-even": lambda s, d: thresholds.weighted_gaussian_threshold(
            s * math.sqrt(max_n), d / max_n, d0),
    }


@pytest.mark.parametrize("budget", [IMDB, Budget(0.1, 1e-9), Budget(8.0, 0.3)])
@pytest.mark.parametrize("d0", [1, 100])
def test_kept_splits_equal_the_closures_they_replaced(budget, d0):
    old = {name: split_delta(budget.epsilon, budget.delta, objective)
           for name, objective in _old_closures(d0).items()}
    objective = functools.partial(thresholds.weighted_gaussian_threshold,
                                  max_items_per_user=d0)
    assert split_delta(budget.epsilon, budget.delta, objective) == \
        split_delta.__wrapped__(budget.epsilon, budget.delta, objective) == \
        old["weighted-gaussian"]
    wg = old["weighted-gaussian"]
    for _ in range(2):  # the second time from the kept answers
        for mechanism in (WeightedGaussian(d0), PolicyGaussian(d0)):
            c = mechanism.calibrate(budget)
            assert (c.noise_scale, c.release_threshold, c.threshold_delta, c.delta_noise) == (
                wg.sigma_total, wg.objective, wg.threshold_delta, wg.delta_noise)
        assert SIPS(d0)._delta_split(budget) == old["sips"]
        dpne = ngram_calibration.calibrate(budget, 3, 1.0, d0, "weighted-gaussian", 3.0)
        assert (dpne.sigma_total, dpne.threshold_delta, dpne.delta_noise,
                dpne.level1.release_threshold) == (
            old["dpne"].sigma_total, old["dpne"].threshold_delta, old["dpne"].delta_noise,
            old["dpne"].objective)
        even = ngram_calibration.dpsu_even_calibration(budget, 3, d0)
        assert even.delta_noise == old["dpsu-even"].delta_noise


_OBJECTIVE_CALLS = []


def _counted_threshold(d0, sigma, threshold_delta):
    _OBJECTIVE_CALLS.append(sigma)
    return thresholds.weighted_gaussian_threshold(sigma, threshold_delta, d0)


def test_a_split_is_kept_for_a_partial_and_solved_again_for_a_closure():
    objective = functools.partial(_counted_threshold, 7)
    first = split_delta(0.77, 3.3e-7, objective)
    solved = len(_OBJECTIVE_CALLS)
    assert solved >= 17  # the grid at least
    assert split_delta(0.77, 3.3e-7, functools.partial(_counted_threshold, 7)) == first
    assert len(_OBJECTIVE_CALLS) == solved  # kept: not solved again
    assert split_delta(0.77, 3.3e-7, lambda s, d: objective(s, d)) == first
    assert len(_OBJECTIVE_CALLS) == 2 * solved  # a closure: solved again


def test_a_split_that_fails_fails_again_with_the_same_message():
    objective = functools.partial(thresholds.weighted_gaussian_threshold, max_items_per_user=0)
    messages = []
    for _ in range(2):
        with pytest.raises(ParameterError, match="max_items_per_user") as error:
            split_delta(1.0, 1e-6, objective)
        messages.append(str(error.value))
    assert messages[0] == messages[1]


def test_kept_holding_probabilities_are_bit_identical_and_a_fresh_copy():
    sizes = [1.0, 3.5, 20.0, 700.0, 5000.0]
    fresh = max_items_rounds._holding_probabilities.__wrapped__(np.asarray(sizes), 1.3)
    first = max_items_rounds.holding_probabilities(sizes)
    first[:] = -1.0  # the caller's own copy
    again = max_items_rounds.holding_probabilities(np.asarray(sizes))
    assert again.tobytes() == fresh.tobytes()
    assert max_items_rounds.holding_probabilities(sizes, 1.1).tobytes() == \
        max_items_rounds._holding_probabilities.__wrapped__(np.asarray(sizes), 1.1).tobytes()


def test_kept_compositions_equal_a_fresh_one():
    selection = WeightedGaussian(10).calibrate(ZCDPBudget(0.05, 1e-6))
    counts = count_calibration(ZCDPBudget(0.02), 10)
    interval = composition.VALUE_DISCRETIZATION_INTERVAL
    pair = composition._selection_pair(selection)[0]
    fresh = composition._composed_pld.__wrapped__(pair, counts, interval)
    kept = composition._composed_pld(pair, counts, interval)
    assert kept is composition._composed_pld(pair, counts, interval)
    for eps in (0.0, 0.5, 1.0, 3.0):
        assert kept.get_delta_for_epsilon(eps) == fresh.get_delta_for_epsilon(eps)
    guarantees = [composition.composed_guarantee(selection, counts, d) for d in (1e-5, 1e-4)]
    assert guarantees == [composition.composed_guarantee(selection, counts, d)
                          for d in (1e-5, 1e-4)]
    assert kept.get_epsilon_for_delta(1e-5) == fresh.get_epsilon_for_delta(1e-5)
