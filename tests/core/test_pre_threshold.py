"""Pre-threshold k (``beam_dpsu.core.pre_threshold``): golden values, PipelineDP's
semantics, the proof's cases and a statistical check of the lone-item bound; then a
selection's calibration with k (``pre_threshold.calibrations``) and the holder counts
the rule reads (``policies.WeightedHistogramBuilder.holders``,
``sequential.shard_policy_histogram(count_holders=True)``, ``document_blocks``).

The derivations are in the rule's docstring (``pre_threshold.rule``); docs/privacy.md,
Accounting, states the rule.

Golden values of the calibrations: each threshold is the mechanism's own ρ (or, for the
descent policies, the threshold covering unequal weights) plus (k − 1)·w_max, rounded up
(``pre_threshold.release_threshold``, whose own golden tests pin those numbers); the
calibrations must carry exactly those, and k = 1 must change nothing.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import special, stats

import beam_dpsu
from beam_dpsu.core import (checks, max_items_choice, ngram_calibration, policies,
                            pre_threshold, thresholds)
from beam_dpsu.core.budgets import Budget, ZCDPBudget
from beam_dpsu.core.calibration import KeepProbabilityCalibration, RoundsCalibration
from beam_dpsu.core.checks import ParameterError
from beam_dpsu.core.mechanisms import (SIPS, CountGaussian, CountLaplace, GreedyWithoutSampling,
                                       PolicyGaussian, PolicyLaplace, TruncatedGeometric,
                                       WeightedGaussian, WeightedLaplace)
from beam_dpsu.core.pre_threshold import calibrations
from tests.support import histograms

# --- counts: keep probabilities ----------------------------------------------------------


def test_keep_probability_hand_computed():
    """π at ε = ln 2, δ = 0.1 (Desfontaines et al. 2022, Thm 1 recursion by hand):
    π(1..5) = 0.1, 0.3 (2·0.1 + 0.1), 0.7 (1 − ½(1 − 0.3 − 0.1)), 0.9, 1; with k = 3
    every value moves two holders up and n < 3 is never kept."""
    def pi(m):
        return thresholds.truncated_geometric_keep_probability(m, math.log(2.0), 0.1)

    kept = pre_threshold.keep_probability_with_pre_threshold(pi, np.arange(8), 3)
    np.testing.assert_allclose(kept, [0, 0, 0, 0.1, 0.3, 0.7, 0.9, 1.0], atol=1e-15)


def test_pre_threshold_one_is_no_pre_threshold():
    calibration = beam_dpsu.TruncatedGeometric(5).calibrate(beam_dpsu.Budget(1.0, 1e-5))
    n = np.arange(0, 300)
    np.testing.assert_array_equal(
        pre_threshold.keep_probability_with_pre_threshold(calibration.keep_probability, n, 1),
        calibration.keep_probability(n))


def test_the_strategy_is_only_asked_about_kept_counts():
    seen = []

    def pi(m):
        seen.append(np.asarray(m).copy())
        return np.full(np.shape(m), 0.5)

    kept = pre_threshold.keep_probability_with_pre_threshold(pi, [0, 1, 2, 3, 9], 3)
    np.testing.assert_array_equal(kept, [0, 0, 0, 0.5, 0.5])
    assert all(np.all(m >= 1) for m in seen)


def _pipelinedp_keep(epsilon, delta, max_partitions, k):
    pipeline_dp = pytest.importorskip("pipeline_dp")
    from pipeline_dp import partition_selection
    return partition_selection.create_partition_selection_strategy(
        pipeline_dp.PartitionSelectionStrategy.TRUNCATED_GEOMETRIC, epsilon, delta,
        max_partitions, pre_threshold=k)


@pytest.mark.parametrize("epsilon, delta", list(itertools.product(
    [0.1, 0.5, 1.0, 3.0, 10.0], [1e-10, 1e-6, 1e-3, 0.05])))
def test_keep_probability_matches_pipelinedp(epsilon, delta):
    """Golden: PipelineDP 0.3.1's truncated geometric with ``pre_threshold=k``, to 1e-12.

    PipelineDP (PyDP) splits the budget over Δ0 partitions as ε/Δ0 and
    1 − (1 − δ)^{1/Δ0}; those per-item parameters are given to our π here (our
    ``TruncatedGeometric`` uses δ/Δ0 less a float margin, a separate choice), so
    what is compared is the pre-threshold rule and π itself."""
    n = np.arange(0, 400)
    for max_partitions, k in itertools.product([1, 2, 5, 100], [1, 2, 3, 10, 50]):
        strategy = _pipelinedp_keep(epsilon, delta, max_partitions, k)
        expected = np.array([strategy.probability_of_keep(int(x)) for x in n])
        eps_item = epsilon / max_partitions
        delta_item = -math.expm1(math.log1p(-delta) / max_partitions)
        ours = pre_threshold.keep_probability_with_pre_threshold(
            lambda m, e=eps_item, d=delta_item:
                thresholds.truncated_geometric_keep_probability(m, e, d), n, k)
        np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-12,
                                   err_msg=f"Δ0 = {max_partitions}, k = {k}")


def test_shifted_counts_and_eligibility():
    np.testing.assert_array_equal(pre_threshold.shifted_counts([0, 2, 3, 4, 10], 3),
                                  [0, 0, 1, 2, 8])
    np.testing.assert_array_equal(pre_threshold.eligible([0, 2, 3, 4], 3),
                                  [False, False, True, True])


# --- thresholds: golden values -----------------------------------------------------------

@pytest.mark.parametrize("k, weight, shift", [(1, 1.0, 0.0), (2, 1.0, 1.0), (5, 1.0, 4.0),
                                              (3, 0.5, 1.0), (4, 1 / 3, 1.0)])
def test_pre_threshold_shift(k, weight, shift):
    assert pre_threshold.pre_threshold_shift(k, weight) == pytest.approx(shift, rel=1e-15)
    # rounded up, never down
    assert pre_threshold.pre_threshold_shift(k, weight) >= (k - 1) * weight


def test_every_shipped_mechanism_has_a_max_user_weight_of_one():
    """Derivations in ``MAX_USER_WEIGHT``'s comment: every rule adds at most 1 to an item."""
    assert set(pre_threshold.MAX_USER_WEIGHT) == set(beam_dpsu.MECHANISMS)
    assert all(w == 1.0 for w in pre_threshold.MAX_USER_WEIGHT.values())


PHI_INV_99 = 2.3263478740408408  # Φ⁻¹(0.99)


@pytest.mark.parametrize("mechanism, k, scale, delta, max_items, expected", [
    # docs/privacy.md golden values, plus k − 1:
    ("weighted-gaussian", 3, 1.33279, math.exp(-10) / 2, 100, 6.8237 + 2),   # ρ_G = 6.8237
    ("sips", 3, 1.33279, math.exp(-10) / 2, 100, 6.8237 + 2),                # one round
    ("weighted-laplace", 5, 1 / 3, math.exp(-10), 100, 4.6473 + 4),         # ρ_Lap = 4.6473
    ("weighted-laplace", 2, 1 / 3, math.exp(-10), 1, 4.1023 + 1),           # ρ_Lap(Δ0 = 1)
    ("gw", 2, 1 / 1.7, 8.1142e-5, 30, 7.21549 + 1),                          # fixed GW ρ
    # Policy Laplace at k ≥ 2: the plain shift (its new keys get equal increments;
    # ``pre_threshold``, 2.): ρ_Lap(λ = 1, δ = 1e-5, Δ0 = 50) (dpsu Thm B.1) + 3, below
    # GW's 14.76558 + 3.
    ("policy-laplace", 4, 1.0, 1e-5, 50, 14.75180 + 3),
    ("policy-laplace", 3, 1.0, 1e-4, 4, 12.15345),  # GW's base would give 12.26083
    # Policy Gaussian at k ≥ 2: 1 + σ·Φ⁻¹((1 − δ)^{1/Δ0}); σ = 1, δ = 0.01, Δ0 = 1:
    ("policy-gaussian", 2, 1.0, 0.01, 1, 1 + PHI_INV_99 + 1),
    ("count-gaussian", 3, 1.0, 0.01, 1, 1 + PHI_INV_99 + 2),
    # Count Laplace: 1 + λ·ln(1/(2δ)) at Δ0 = 1; λ = 1, δ = ½ gives 1:
    ("count-laplace", 2, 1.0, 0.5, 1, 1.0 + 1),
])
def test_release_threshold_golden(mechanism, k, scale, delta, max_items, expected):
    got = pre_threshold.release_threshold(mechanism, k, scale, delta, max_items)
    assert got == pytest.approx(expected, abs=6e-5)


BUDGET = beam_dpsu.Budget(1.0, 1e-5)
WITH_THRESHOLDS = [beam_dpsu.CountLaplace(10), beam_dpsu.CountGaussian(10),
                   beam_dpsu.WeightedLaplace(100), beam_dpsu.WeightedGaussian(100),
                   beam_dpsu.PolicyLaplace(100), beam_dpsu.PolicyGaussian(100),
                   beam_dpsu.GreedyWithoutSampling(30)]


@pytest.mark.parametrize("mechanism", WITH_THRESHOLDS, ids=lambda m: m.name)
def test_k_one_is_each_mechanisms_own_threshold(mechanism):
    found = mechanism.calibrate(BUDGET)
    assert pre_threshold.release_threshold(
        mechanism.name, 1, found.noise_scale, found.threshold_delta,
        mechanism.max_items_per_user) == found.release_threshold


def test_k_one_is_each_sips_rounds_threshold():
    found = beam_dpsu.SIPS(100, rounds=3).calibrate(BUDGET)
    for calibration in found.rounds:
        assert pre_threshold.release_threshold(
            "sips", 1, calibration.noise_scale, calibration.threshold_delta,
            100) == calibration.release_threshold


@pytest.mark.parametrize("mechanism", WITH_THRESHOLDS, ids=lambda m: m.name)
@pytest.mark.parametrize("k", [2, 7])
def test_the_shift_is_k_minus_one_over_a_threshold_covering_the_new_keys(mechanism, k):
    found = mechanism.calibrate(BUDGET)
    got = pre_threshold.release_threshold(mechanism.name, k, found.noise_scale,
                                          found.threshold_delta, mechanism.max_items_per_user)
    if pre_threshold.own_weights_equal(mechanism.name, k):
        assert got == pytest.approx(found.release_threshold + (k - 1), rel=1e-15)
    else:  # the descent policies at k ≥ 2 need a threshold for unequal weights: higher
        assert got > found.release_threshold + (k - 1)


def test_own_weights_are_equal_except_for_policy_gaussian_at_k_above_one():
    for name in pre_threshold.MAX_USER_WEIGHT:
        assert pre_threshold.own_weights_equal(name, 1)
        assert pre_threshold.own_weights_equal(name, 3) == (name != "policy-gaussian")


def test_bad_parameters_are_refused():
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(checks.ParameterError, match="pre_threshold"):
            pre_threshold.check_pre_threshold(bad)
    with pytest.raises(checks.ParameterError, match="mechanism"):
        pre_threshold.max_user_weight("policy-gaussian-l1")
    with pytest.raises(checks.ParameterError, match="keep_probability_with_pre_threshold"):
        pre_threshold.release_threshold("truncated-geometric", 2, 1.0, 1e-5, 1)
    with pytest.raises(checks.ParameterError, match="max_user_weight"):
        pre_threshold.pre_threshold_shift(2, 0.0)


def test_describe_pre_threshold():
    assert pre_threshold.describe_pre_threshold(1).startswith("pre_threshold 1: none")
    text = pre_threshold.describe_pre_threshold(4)
    assert "needs >= 4 distinct holders" in text and "3 times" in text
    assert "policy-gaussian by more" in text  # its base threshold changes too


# --- the Policy Gaussian counterexample to the plain shift -------------------------------

SIGMA_CASE, DELTA_CASE, MAX_ITEMS_CASE = 2.236, 1e-5, 4


def _policy_gaussian_case(k: int, threshold: float):
    """σ = 2.236, δ_thr = 1e-5, Δ0 = 4, α = 3, Γ = ``threshold`` + 3σ (the cutoff follows
    the release threshold, as ``pre_threshold.calibrations`` sets it): k − 1 users {s_j}
    for each j = 1, 2, 3 before x = {u, s1, s2, s3}, k − 1 users {u} after; every item
    of x goes from k − 1 to k holders. Returns x's items' weights under D′."""
    cutoff = thresholds.policy_cutoff(threshold, SIGMA_CASE, 3.0)
    before = [[f"s{j}"] for j in (1, 2, 3) for _ in range(k - 1)]
    extra = ["u", "s1", "s2", "s3"]
    after = [["u"] for _ in range(k - 1)]
    histogram = policies.policy_histogram(before + [extra] + after, policies.l2_descent, cutoff)
    holders_without_x = {item: sum(item in user for user in before + after) for item in extra}
    assert all(n == k - 1 for n in holders_without_x.values())  # all four are new keys
    return np.array([histogram[item] for item in extra])


def _gaussian_release_chance(threshold, weights, sigma):
    return -math.expm1(float(np.sum(stats.norm.logcdf((threshold - weights) / sigma))))


def test_the_plain_shift_is_not_enough_for_policy_gaussian():
    """The case in the module docstring (2., Policy Gaussian): at the plain shift
    ρ_G + 13 and its cutoff Γ = ρ_G + 13 + 3σ, x's effective weights (0.710, 0.407,
    0.407, 0.407) are released with chance 1.0036·δ_thr > δ_thr."""
    rho = thresholds.weighted_gaussian_threshold(SIGMA_CASE, DELTA_CASE, MAX_ITEMS_CASE)
    assert rho == pytest.approx(10.70686, abs=1e-5)  # ρ_G (dpsu Thm B.2's max over t ≤ Δ0)
    weights = _policy_gaussian_case(14, rho + 13)
    np.testing.assert_allclose(weights - 13, [0.71004, 0.40655, 0.40655, 0.40655], atol=1e-5)
    chance = _gaussian_release_chance(rho + 13, weights, SIGMA_CASE)
    assert chance / DELTA_CASE == pytest.approx(1.00355, abs=1e-5)
    # With Γ from the un-raised ρ_G (Γ = ρ_G + 3σ) the same users give (0.916, 0.232,
    # 0.232, 0.232) and 1.0171·δ_thr: not what the code computes, which raises Γ with ρ_k.
    old = _policy_gaussian_case(14, rho)
    np.testing.assert_allclose(old - 13, [0.91562, 0.23212, 0.23212, 0.23212], atol=1e-5)
    assert _gaussian_release_chance(rho + 13, old, SIGMA_CASE) / DELTA_CASE == \
        pytest.approx(1.01715, abs=1e-5)


def test_the_module_threshold_covers_the_policy_gaussian_case():
    rho_k = pre_threshold.release_threshold("policy-gaussian", 14, SIGMA_CASE, DELTA_CASE,
                                            MAX_ITEMS_CASE)
    weights = _policy_gaussian_case(14, rho_k)
    assert _gaussian_release_chance(rho_k, weights, SIGMA_CASE) <= DELTA_CASE


def test_policy_gaussian_base_threshold_changes_with_the_pre_threshold():
    """At ε = 1, δ = 1e-4, Δ0 = 3, k = 3 (Budget(1, 1e-4), its δ split kept): 14.485
    without a pre-threshold (ρ_G, dpsu Thm B.2), 16.908 with k = 3, above 14.485 + 2:
    the base threshold becomes 1 + σ·Φ⁻¹((1 − δ_thr)^{1/Δ0}) (dpsu §1.1's count
    threshold; module docstring, 2.)."""
    budget = beam_dpsu.Budget(1.0, 1e-4)
    plain = beam_dpsu.PolicyGaussian(3).calibrate(budget)
    raised = calibrations.calibrate(beam_dpsu.PolicyGaussian(3), budget, 3)
    assert plain.release_threshold == pytest.approx(14.48495, abs=1e-5)
    assert raised.release_threshold == pytest.approx(16.90760, abs=1e-5)
    assert raised.release_threshold == pytest.approx(thresholds.count_gaussian_threshold(
        plain.noise_scale, plain.threshold_delta, 3) + 2, rel=1e-15)
    assert raised.cutoff == pytest.approx(raised.release_threshold + 3 * plain.noise_scale)


# --- Policy Laplace: the new keys' increments are equal, so the plain shift holds --------

LIST_OF_ITEMS = st.lists(st.sampled_from([f"w{i}" for i in range(6)]), min_size=1, max_size=4,
                         unique=True)

PL_SCALE, PL_DELTA, PL_MAX_ITEMS = 1.0, 1e-5, 4


def _policy_laplace_extra_increments(before, extra, k):
    """Γ = ρ_k + 3λ as the calibration sets it; x's ℓ1-descent increments after ``before``."""
    rho_k = pre_threshold.release_threshold("policy-laplace", k, PL_SCALE, PL_DELTA,
                                            PL_MAX_ITEMS)
    cutoff = thresholds.policy_cutoff(rho_k, PL_SCALE, 3.0)
    histogram = policies.policy_histogram(before, policies.l1_descent, cutoff)
    current = np.array([histogram.get(item, 0.0) for item in extra])
    return rho_k, cutoff, policies.l1_descent(current, cutoff)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(LIST_OF_ITEMS, max_size=20), LIST_OF_ITEMS, st.lists(LIST_OF_ITEMS, max_size=8),
       st.integers(2, 6))
def test_policy_laplace_gives_the_new_keys_equal_increments(before, extra, after, k):
    """The lemma of ``pre_threshold``, 2.: a key of x that has k − 1 other holders (a new
    key, U) has at most k − 1 earlier holders, each of weight ≤ 1, so its gap to
    Γ = ρ_k + α·λ exceeds ρ′ ≥ 1 ≥ the water level: every key of U gets the water level,
    and Σ_U ≤ 1 gives each at most 1/|U|."""
    others = before + after
    new = [i for i, item in enumerate(extra) if sum(item in user for user in others) == k - 1]
    _, _, increments = _policy_laplace_extra_increments(before, extra, k)
    if not new:
        return
    on_new = increments[new]
    assert np.all(on_new == on_new[0])  # equal, bit for bit
    assert on_new[0] * len(new) <= 1.0 + 1e-12


def _laplace_release_chance(threshold, weights, scale):
    return -math.expm1(float(np.sum(_laplace_log_cdf((threshold - weights) / scale))))


def _policy_laplace_new_key_chance(before, extra, after, k):
    """P[some new key of x is released] at ρ_k under D′, exactly (Laplace CDFs)."""
    rho_k = pre_threshold.release_threshold("policy-laplace", k, PL_SCALE, PL_DELTA,
                                            PL_MAX_ITEMS)
    cutoff = thresholds.policy_cutoff(rho_k, PL_SCALE, 3.0)
    histogram = policies.policy_histogram(before + [extra] + after, policies.l1_descent,
                                          cutoff)
    others = before + after
    new = np.array([histogram[item] for item in extra
                    if sum(item in user for user in others) == k - 1])
    return _laplace_release_chance(rho_k, new, PL_SCALE) if new.size else 0.0


def test_policy_laplace_uses_gw_base_only_where_its_own_threshold_is_below_one():
    """The plain shift's proof needs ρ_Lap ≥ 1 (every new key's gap to Γ ≥ 1), which
    holds whenever δ_thr ≤ ½; at λ = 10, δ_thr = 0.99, Δ0 = 4, ρ_Lap ≈ −2.88."""
    assert pre_threshold.release_threshold("policy-laplace", 2, 10.0, 0.9, 4) == \
        pytest.approx(thresholds.weighted_laplace_threshold(10.0, 0.9, 4) + 1, rel=1e-15)
    assert thresholds.weighted_laplace_threshold(10.0, 0.99, 4) < 1.0
    assert pre_threshold.release_threshold("policy-laplace", 2, 10.0, 0.99, 4) == \
        pytest.approx(thresholds.gw_threshold(10.0, 0.99, 4) + 1, rel=1e-15)


def test_policy_laplace_refuses_a_cutoff_below_its_release_threshold():
    """The plain shift needs every new key's gap Γ − (k − 1) to be at least the water
    level 1, which Γ ≥ ρ_k gives: below ρ_k at k ≥ 2 the cutoff is refused, the message
    naming the cutoff and the threshold (parameters only)."""
    rho_k = pre_threshold.release_threshold("policy-laplace", 3, PL_SCALE, PL_DELTA,
                                            PL_MAX_ITEMS)
    with pytest.raises(ValueError) as refused:
        pre_threshold.check_cutoff("policy-laplace", 3, rho_k - 0.5, rho_k)
    assert isinstance(refused.value, ParameterError) and refused.value.param == "cutoff"
    message = str(refused.value)
    assert message.startswith("cutoff ") and "release threshold" in message
    assert f"{rho_k - 0.5:.6g}" in message and f"{rho_k:.6g}" in message
    # Γ = ρ_k (α = 0) keeps the proof.
    assert pre_threshold.check_cutoff("policy-laplace", 3, rho_k, rho_k) == rho_k
    # Only the plain shift reads Γ: at k = 1 the own keys start at 0, and the other
    # rules' ρ′ covers every weighting.
    for mechanism, k in (("policy-laplace", 1), ("policy-gaussian", 3), ("gw", 3)):
        assert pre_threshold.check_cutoff(mechanism, k, rho_k - 0.5, rho_k) == rho_k - 0.5


@pytest.mark.parametrize("k", [2, 3, 14])
def test_policy_laplace_plain_shift_holds_on_the_policy_gaussian_counterexample(k):
    """The structure that breaks the plain shift for Policy Gaussian (k − 1 users {s_j}
    before x = {u, s1, s2, s3}, k − 1 users {u} after) leaves Policy Laplace's new keys at
    equal increments, released with chance ≤ δ_thr at ρ_Lap + (k − 1)."""
    before = [[f"s{j}"] for j in (1, 2, 3) for _ in range(k - 1)]
    extra = ["u", "s1", "s2", "s3"]
    after = [["u"] for _ in range(k - 1)]
    _, _, increments = _policy_laplace_extra_increments(before, extra, k)
    assert np.all(increments == 0.25)
    assert _policy_laplace_new_key_chance(before, extra, after, k) <= PL_DELTA * (1 + 1e-9)


@pytest.mark.parametrize("k", [2, 5])
def test_policy_laplace_plain_shift_is_attained(k):
    """The bound is tight: x's t new keys, each with k − 1 later holders at weight 1, at
    the t that sets ρ_Lap (here t = Δ0 = 4 at δ = 1e-5, λ = 1): the chance is δ_thr."""
    extra = [f"w{i}" for i in range(PL_MAX_ITEMS)]
    after = [[item] for item in extra for _ in range(k - 1)]
    chance = _policy_laplace_new_key_chance([], extra, after, k)
    assert chance == pytest.approx(PL_DELTA, rel=1e-9)


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(LIST_OF_ITEMS, max_size=20), LIST_OF_ITEMS, st.lists(LIST_OF_ITEMS, max_size=8),
       st.integers(2, 6))
def test_policy_laplace_new_keys_are_released_at_most_delta(before, extra, after, k):
    """The exact tail over x's new keys at the plain shift ρ_Lap + (k − 1), small cases."""
    assert _policy_laplace_new_key_chance(before, extra, after, k) <= PL_DELTA * (1 + 1e-9)


# --- property: the new keys' release chance at ρ_k, every mechanism ----------------------

ITEMS = st.sampled_from([f"w{i}" for i in range(6)])
LIST = st.lists(ITEMS, min_size=1, max_size=4, unique=True)
MAX_ITEMS = 4
DELTA = 1e-5


def _laplace_log_cdf(z: np.ndarray) -> np.ndarray:
    return np.where(z < 0, z - math.log(2.0), np.log1p(-0.5 * np.exp(-np.abs(z))))


def _histogram(mechanism: str, lists, scale: float, rho_k: float) -> dict:
    if mechanism == "count-gaussian":
        return histograms.weighted_histogram(lists, policies.count_weight)
    if mechanism == "weighted-laplace":
        return histograms.weighted_histogram(lists, policies.weighted_laplace_weight)
    if mechanism in ("weighted-gaussian", "sips"):
        return histograms.weighted_histogram(lists, policies.weighted_gaussian_weight)
    update = {"policy-laplace": policies.l1_descent, "policy-gaussian": policies.l2_descent,
              "gw": policies.greedy_update}[mechanism]
    return policies.policy_histogram(lists, update, thresholds.policy_cutoff(rho_k, scale, 3.0))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(LIST, max_size=16), LIST, st.integers(0, 16), st.integers(2, 5),
       st.sampled_from(["count-gaussian", "weighted-laplace", "weighted-gaussian", "sips",
                        "policy-laplace", "policy-gaussian", "gw"]))
def test_new_keys_are_released_with_chance_at_most_delta(users, extra, position, k, mechanism):
    """D′ = D ∪ {x}: the keys that reach k holders only with x (never eligible under D)
    are released, at ρ_k, with probability ≤ δ_thr (exact, not sampled)."""
    position = min(position, len(users))
    lists = users[:position] + [extra] + users[position:]
    scale = 1.0
    rho_k = pre_threshold.release_threshold(mechanism, k, scale, DELTA, MAX_ITEMS)
    histogram = _histogram(mechanism, lists, scale, rho_k)
    holders = {item: sum(item in user for user in users) for item in extra}
    new = np.array([histogram[item] for item in extra if holders[item] == k - 1])
    if not new.size:
        return
    z = (rho_k - new) / scale
    laplace = mechanism in ("weighted-laplace", "policy-laplace", "gw")
    log_none = np.sum(_laplace_log_cdf(z) if laplace else stats.norm.logcdf(z))
    assert -math.expm1(float(log_none)) <= DELTA * (1 + 1e-9)


# --- statistical: an item that only the extra user lifts to k holders --------------------

TRIALS = 200_000
# A release count above this bound has probability ≤ 1e-7 under Binomial(TRIALS, δ_thr),
# so with a fresh seed this test fails falsely with probability ≤ 1e-7 (< 1e-6).
FALSE_FAILURE = 1e-7


@pytest.mark.parametrize("mechanism, own_items", [
    ("weighted-gaussian", 1), ("weighted-gaussian", 4), ("weighted-laplace", 4),
    ("count-gaussian", 1)])
def test_items_lifted_to_k_holders_by_one_user_are_released_at_most_delta(mechanism,
                                                                          own_items):
    """D: k − 1 users hold each of x's items, each at weight 1 (alone in their lists, the
    largest weight a user gives an item). Under D the items have k − 1 < k holders and are
    never released; under D′ = D ∪ {x} (x's own items at its weight w(t)) they are, with
    noise, released with probability ≤ δ_thr at ρ_k, δ_thr = 0.05 (a large δ, so that the
    bound is seen in 200,000 trials)."""
    k, scale, delta = 5, 0.5, 0.05
    weight = {"weighted-gaussian": 1 / math.sqrt(own_items), "weighted-laplace": 1 / own_items,
              "count-gaussian": 1.0}[mechanism]
    rho_k = pre_threshold.release_threshold(mechanism, k, scale, delta, own_items)
    assert not pre_threshold.eligible(k - 1, k)  # under D: never released
    weights = np.full(own_items, (k - 1) * 1.0 + weight)  # under D′
    rng = np.random.default_rng(7)
    noise = (rng.laplace(0.0, scale, (TRIALS, own_items)) if mechanism == "weighted-laplace"
             else rng.normal(0.0, scale, (TRIALS, own_items)))
    released = int(np.sum(np.any(weights + noise > rho_k, axis=1)))
    assert released <= stats.binom.isf(FALSE_FAILURE, TRIALS, delta)
    # Teeth: at the unshifted threshold the same items are released almost surely.
    rho = pre_threshold.release_threshold(mechanism, 1, scale, delta, own_items)
    assert int(np.sum(np.any(weights + noise > rho, axis=1))) > 0.99 * TRIALS


def test_the_gaussian_lone_item_bound_is_tight():
    """At Δ0 = 1 the bound is exact: P[k + Z > ρ_k] = Φ̄((ρ − 1)/σ) = δ_thr."""
    k, sigma, delta = 5, 0.5, 0.05
    rho_k = pre_threshold.release_threshold("weighted-gaussian", k, sigma, delta, 1)
    assert special.ndtr(-(rho_k - k) / sigma) == pytest.approx(delta, rel=1e-12)


# --- a selection's calibration with k (``pre_threshold.calibrations``) -------------------

IMDB_BUDGET = Budget(1.765, 4.96e-5)  # dp-sips's IMDb budget

THRESHOLDED = [CountLaplace(10), CountGaussian(10), WeightedLaplace(10), WeightedGaussian(10),
               PolicyLaplace(10), PolicyGaussian(10), GreedyWithoutSampling(max_items_per_user=10)]
ALL = THRESHOLDED + [SIPS(max_items_per_user=10), TruncatedGeometric(10)]


@pytest.mark.parametrize("mechanism", ALL, ids=lambda m: m.name)
def test_k_one_changes_nothing(mechanism):
    assert calibrations.calibrate(mechanism, IMDB_BUDGET, 1) == mechanism.calibrate(IMDB_BUDGET)


@pytest.mark.parametrize("mechanism", THRESHOLDED, ids=lambda m: m.name)
@pytest.mark.parametrize("k", [2, 5, 50])
def test_the_threshold_is_the_rules(mechanism, k):
    plain = mechanism.calibrate(IMDB_BUDGET)
    raised = calibrations.calibrate(mechanism, IMDB_BUDGET, k)
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


@pytest.mark.parametrize("budget", [IMDB_BUDGET, Budget(0.1, 1e-9), Budget(0.1, 0.99)],
                         ids=["imdb", "small-delta", "gw-corner"])
@pytest.mark.parametrize("max_items", [1, 10])
@pytest.mark.parametrize("alpha", [0.0, 3.0])
@pytest.mark.parametrize("k", [2, 50])
def test_policy_laplace_cutoffs_always_pass_the_check(monkeypatch, budget, max_items, alpha,
                                                      k):
    """Γ = ρ_k + α·λ with α ≥ 0 is never below ρ_k: the check sees every Policy Laplace
    cutoff the calibration sets (here α = 0 too, and GW's base where ρ_Lap < 1) and
    passes it."""
    checked = []
    real = pre_threshold.rule.check_cutoff

    def check_cutoff(*args):
        checked.append(args)
        return real(*args)

    monkeypatch.setattr(calibrations.rule, "check_cutoff", check_cutoff)
    raised = calibrations.calibrate(PolicyLaplace(max_items, alpha=alpha), budget, k)
    assert checked == [("policy-laplace", k, raised.cutoff, raised.release_threshold)]
    assert raised.cutoff >= raised.release_threshold


def test_policy_laplace_auto_candidates_pass_the_check(monkeypatch):
    checked = []
    real = pre_threshold.rule.check_cutoff
    monkeypatch.setattr(calibrations.rule, "check_cutoff",
                        lambda *args: checked.append(args) or real(*args))
    plan = max_items_choice.plan_auto(PolicyLaplace(max_items_choice.AutoMaxItems()),
                                      IMDB_BUDGET, 4)
    assert len(checked) == len(plan.candidates)
    assert all(name == "policy-laplace" and k == 4 and cutoff >= threshold
               for name, k, cutoff, threshold in checked)


def test_golden_weighted_gaussian():
    """WG at (1.765, 4.96e-5), Δ0 = 10: ρ_5 = ρ + 4 exactly (ρ ≈ 9.9727, the
    weighted-Gaussian threshold of dp-sips App. A at that σ and δ_thr)."""
    plain = WeightedGaussian(10).calibrate(IMDB_BUDGET)
    raised = calibrations.calibrate(WeightedGaussian(10), IMDB_BUDGET, 5)
    assert plain.release_threshold == pytest.approx(9.972712251364742, rel=1e-12)
    assert raised.release_threshold == pytest.approx(13.972712251364742, rel=1e-12)
    assert raised.release_threshold >= plain.release_threshold + 4


def test_policy_gaussian_at_k_two_uses_the_threshold_for_unequal_weights():
    plain = PolicyGaussian(10).calibrate(IMDB_BUDGET)
    raised = calibrations.calibrate(PolicyGaussian(10), IMDB_BUDGET, 2)
    covering = thresholds.count_gaussian_threshold(plain.noise_scale, plain.threshold_delta, 10)
    assert raised.release_threshold == pytest.approx(covering + 1, rel=1e-15)
    assert raised.release_threshold > plain.release_threshold + 1


def test_sips_raises_every_round():
    mechanism = SIPS(max_items_per_user=10)
    plain = mechanism.calibrate(IMDB_BUDGET)
    raised = calibrations.calibrate(mechanism, IMDB_BUDGET, 4)
    assert isinstance(raised, RoundsCalibration) and raised.pre_threshold == 4
    for before, after in zip(plain.rounds, raised.rounds):
        assert after.release_threshold == pre_threshold.release_threshold(
            "sips", 4, before.noise_scale, before.threshold_delta, 10)
        assert after.noise_scale == before.noise_scale
    assert raised.sigma_total == plain.sigma_total
    assert raised.to_dict()["pre_threshold"] == 4


def test_truncated_geometric_keeps_with_shifted_counts():
    plain = TruncatedGeometric(10).calibrate(IMDB_BUDGET)
    raised = calibrations.calibrate(TruncatedGeometric(10), IMDB_BUDGET, 6)
    assert isinstance(raised, KeepProbabilityCalibration) and raised.pre_threshold == 6
    n = np.arange(0, 400)
    expected = np.where(n >= 6, plain.keep_probability(np.maximum(n - 5, 0)), 0.0)
    np.testing.assert_array_equal(raised.keep_probability(n), expected)
    assert raised.weight_threshold() == plain.weight_threshold() + 5
    assert raised.to_dict()["pre_threshold"] == 6 and "pre_threshold" not in plain.to_dict()


def test_applied_once():
    raised = calibrations.calibrate(WeightedGaussian(10), IMDB_BUDGET, 3)
    with pytest.raises(ParameterError, match="pre_threshold is already applied"):
        calibrations.raised_threshold(raised, "weighted-gaussian", 10, 3)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2", None])
def test_bad_pre_threshold_is_refused(bad):
    with pytest.raises(ParameterError, match="pre_threshold must be an int >= 1"):
        calibrations.calibrate(WeightedGaussian(10), IMDB_BUDGET, bad)


def test_auto_scores_every_candidate_at_its_raised_threshold():
    mechanism = WeightedGaussian(max_items_choice.AutoMaxItems())
    plain = max_items_choice.plan_auto(mechanism, IMDB_BUDGET)
    raised = max_items_choice.plan_auto(mechanism, IMDB_BUDGET, 7)
    assert raised.candidates == plain.candidates
    for before, after in zip(plain.weight_thresholds, raised.weight_thresholds):
        assert after == pytest.approx(before + 6, rel=1e-12)


@pytest.mark.parametrize("level1", ["weighted-gaussian", "policy-gaussian"])
def test_dpne_level_one_is_raised_and_the_rest_unchanged(level1):
    plain = ngram_calibration.calibrate(IMDB_BUDGET, 3, 1.0, 10, level1, 3.0)
    raised = ngram_calibration.calibrate(IMDB_BUDGET, 3, 1.0, 10, level1, 3.0, pre_threshold=3)
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
    raised = calibrations.calibrate(WeightedGaussian(100), budget, 10)
    assert raised.release_threshold >= plain.release_threshold + 9
    assert math.isclose(raised.release_threshold, plain.release_threshold + 9, rel_tol=1e-12)


# --- the holder counts and the key set ---------------------------------------------------

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
