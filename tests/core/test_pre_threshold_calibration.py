"""A selection's calibration with a pre-threshold k (``beam_dpsu.core.pre_threshold_calibration``)
and the holder counts the rule reads (``policies.WeightedHistogramBuilder.holders``,
``sequential.shard_policy_histogram(count_holders=True)``, ``docblocks``).

Golden values: each threshold is the mechanism's own ρ (or, for the descent policies,
the threshold covering unequal weights) plus (k − 1)·w_max, rounded up
(``pre_threshold.release_threshold``, whose own golden tests pin those numbers); here
the calibrations must carry exactly those, and k = 1 must change nothing.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_dpsu.core import max_items_choice, ngram_calibration, policies, pre_threshold, \
    pre_threshold_calibration, thresholds
from beam_dpsu.core.budgets import Budget, ZCDPBudget
from beam_dpsu.core.calibration import KeepProbabilityCalibration, RoundsCalibration
from beam_dpsu.core.checks import ParameterError
from beam_dpsu.core.mechanisms import (SIPS, CountGaussian, CountLaplace, GreedyWithoutSampling,
                                       PolicyGaussian, PolicyLaplace, TruncatedGeometric,
                                       WeightedGaussian, WeightedLaplace)

BUDGET = Budget(1.765, 4.96e-5)  # dp-sips's IMDb budget

THRESHOLDED = [CountLaplace(10), CountGaussian(10), WeightedLaplace(10), WeightedGaussian(10),
               PolicyLaplace(10), PolicyGaussian(10), GreedyWithoutSampling(max_items_per_user=10)]
ALL = THRESHOLDED + [SIPS(max_items_per_user=10), TruncatedGeometric(10)]


@pytest.mark.parametrize("mechanism", ALL, ids=lambda m: m.name)
def test_k_one_changes_nothing(mechanism):
    assert pre_threshold_calibration.calibrate(mechanism, BUDGET, 1) == mechanism.calibrate(BUDGET)


@pytest.mark.parametrize("mechanism", THRESHOLDED, ids=lambda m: m.name)
@pytest.mark.parametrize("k", [2, 5, 50])
def test_the_threshold_is_the_rules(mechanism, k):
    plain = mechanism.calibrate(BUDGET)
    raised = pre_threshold_calibration.calibrate(mechanism, BUDGET, k)
    assert raised.release_threshold == pre_threshold.release_threshold(
        mechanism.name, k, plain.noise_scale, plain.threshold_delta, 10)
    # Only the threshold (and a policy's cutoff) moves: same noise, same δ split.
    assert (raised.noise_scale, raised.threshold_delta, raised.delta_noise, raised.budget) == (
        plain.noise_scale, plain.threshold_delta, plain.delta_noise, plain.budget)
    assert raised.pre_threshold == k and raised.to_dict()["pre_threshold"] == k
    assert raised.release_threshold >= plain.release_threshold + (k - 1)
    if plain.cutoff is not None:
        assert raised.cutoff == thresholds.policy_cutoff(
            raised.release_threshold, plain.noise_scale, mechanism.alpha)


def test_golden_weighted_gaussian():
    """WG at (1.765, 4.96e-5), Δ0 = 10: ρ_5 = ρ + 4 exactly (ρ ≈ 9.9727, the
    weighted-Gaussian threshold of dp-sips App. A at that σ and δ_thr)."""
    plain = WeightedGaussian(10).calibrate(BUDGET)
    raised = pre_threshold_calibration.calibrate(WeightedGaussian(10), BUDGET, 5)
    assert plain.release_threshold == pytest.approx(9.972712251364742, rel=1e-12)
    assert raised.release_threshold == pytest.approx(13.972712251364742, rel=1e-12)
    assert raised.release_threshold >= plain.release_threshold + 4


def test_policy_gaussian_at_k_two_uses_the_threshold_for_unequal_weights():
    plain = PolicyGaussian(10).calibrate(BUDGET)
    raised = pre_threshold_calibration.calibrate(PolicyGaussian(10), BUDGET, 2)
    covering = thresholds.count_gaussian_threshold(plain.noise_scale, plain.threshold_delta, 10)
    assert raised.release_threshold == pytest.approx(covering + 1, rel=1e-15)
    assert raised.release_threshold > plain.release_threshold + 1


def test_sips_raises_every_round():
    mechanism = SIPS(max_items_per_user=10)
    plain = mechanism.calibrate(BUDGET)
    raised = pre_threshold_calibration.calibrate(mechanism, BUDGET, 4)
    assert isinstance(raised, RoundsCalibration) and raised.pre_threshold == 4
    for before, after in zip(plain.rounds, raised.rounds):
        assert after.release_threshold == pre_threshold.release_threshold(
            "sips", 4, before.noise_scale, before.threshold_delta, 10)
        assert after.noise_scale == before.noise_scale
    assert raised.sigma_total == plain.sigma_total
    assert raised.to_dict()["pre_threshold"] == 4


def test_truncated_geometric_keeps_with_shifted_counts():
    plain = TruncatedGeometric(10).calibrate(BUDGET)
    raised = pre_threshold_calibration.calibrate(TruncatedGeometric(10), BUDGET, 6)
    assert isinstance(raised, KeepProbabilityCalibration) and raised.pre_threshold == 6
    n = np.arange(0, 400)
    expected = np.where(n >= 6, plain.keep_probability(np.maximum(n - 5, 0)), 0.0)
    np.testing.assert_array_equal(raised.keep_probability(n), expected)
    assert raised.weight_threshold() == plain.weight_threshold() + 5
    assert raised.to_dict()["pre_threshold"] == 6 and "pre_threshold" not in plain.to_dict()


def test_applied_once():
    raised = pre_threshold_calibration.calibrate(WeightedGaussian(10), BUDGET, 3)
    with pytest.raises(ParameterError, match="pre_threshold is already applied"):
        pre_threshold_calibration.raised_threshold(raised, "weighted-gaussian", 10, 3)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2", None])
def test_bad_pre_threshold_is_refused(bad):
    with pytest.raises(ParameterError, match="pre_threshold must be an int >= 1"):
        pre_threshold_calibration.calibrate(WeightedGaussian(10), BUDGET, bad)


def test_auto_scores_every_candidate_at_its_raised_threshold():
    mechanism = WeightedGaussian(max_items_choice.AutoMaxItems())
    plain = max_items_choice.plan_auto(mechanism, BUDGET)
    raised = max_items_choice.plan_auto(mechanism, BUDGET, 7)
    assert raised.candidates == plain.candidates
    for before, after in zip(plain.weight_thresholds, raised.weight_thresholds):
        assert after == pytest.approx(before + 6, rel=1e-12)


@pytest.mark.parametrize("level1", ["weighted-gaussian", "policy-gaussian"])
def test_dpne_level_one_is_raised_and_the_rest_unchanged(level1):
    plain = ngram_calibration.calibrate(BUDGET, 3, 1.0, 10, level1, 3.0)
    raised = ngram_calibration.calibrate(BUDGET, 3, 1.0, 10, level1, 3.0, pre_threshold=3)
    assert raised.sigmas == plain.sigmas and raised.sigma_total == plain.sigma_total
    assert raised.level1.release_threshold == pre_threshold.release_threshold(
        level1, 3, plain.level1.noise_scale, plain.threshold_delta, 10)
    assert raised.to_dict()["level1"]["pre_threshold"] == 3
    # At k = 1 the rule gives level 1's own threshold back (the same formula).
    assert pre_threshold.release_threshold(
        level1, 1, plain.level1.noise_scale, plain.threshold_delta, 10) == pytest.approx(
        plain.level1.release_threshold, rel=1e-15)


def test_zcdp_budgets_are_raised_too():
    budget = ZCDPBudget(0.1, 1e-5)
    plain = WeightedGaussian(100).calibrate(budget)
    raised = pre_threshold_calibration.calibrate(WeightedGaussian(100), budget, 10)
    assert raised.release_threshold >= plain.release_threshold + 9
    assert math.isclose(raised.release_threshold, plain.release_threshold + 9, rel_tol=1e-12)


# --- the holder counts and the key set ------------------------------------------------------

users_strategy = st.lists(st.lists(st.sampled_from("abcdefgh"), max_size=5, unique=True),
                          max_size=12)


# Data generation, not the test, is what a loaded machine slows down.
@settings(suppress_health_check=[HealthCheck.too_slow])
@given(users=users_strategy)
def test_builder_holders_count_users(users):
    builder = policies.WeightedHistogramBuilder(policies.weighted_gaussian_weight)
    for items in users:
        builder.add_distinct(items)
    expected: dict = {}
    for items in users:
        for item in items:
            expected[item] = expected.get(item, 0) + 1
    assert builder.holders() == expected
    assert set(builder.histogram()) == set(expected)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(users=users_strategy, extra=st.lists(st.sampled_from("abcdefghij"), max_size=5,
                                               unique=True), k=st.integers(1, 5))
def test_the_eligible_keys_grow_only_by_the_new_users_items(users, extra, k):
    """K(D) = {u : n_D(u) ≥ k}: adding a user x keeps every key and adds only items of
    x (docs/privacy.md, invariant 8), whatever k."""
    def keys(dataset):
        builder = policies.WeightedHistogramBuilder(policies.weighted_gaussian_weight)
        for items in dataset:
            builder.add_distinct(items)
        return {item for item, n in builder.holders().items() if n >= k}

    before, after = keys(users), keys(users + [extra])
    assert before <= after
    assert after - before <= set(extra)


def test_dataclass_fields_default_to_no_pre_threshold():
    for cls in (KeepProbabilityCalibration,):
        field = {f.name: f for f in dataclasses.fields(cls)}["pre_threshold"]
        assert field.default == 1
