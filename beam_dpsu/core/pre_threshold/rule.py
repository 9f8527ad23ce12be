"""Pre-threshold k: an item is released only if at least k distinct users hold it.

PipelineDP's (and Google's) ``pre_threshold``: on top of the DP selection, an
item whose number of holders n (distinct users whose *bounded* list holds it;
per round for SIPS) is below k is never released. k = 1 is no pre-threshold.
This module is the mathematics only: which keep probability and which release
threshold make the selection with a pre-threshold as private as without.

Notation: D′ = D ∪ {x}; n(u) the holders of item u; h_i(u) ≥ 0 the weight user
i gives u; H(u) = Σ_i h_i(u) the histogram the mechanism builds (unchanged by
the pre-threshold: a sequential policy still visits every listed item); w_max
the largest weight one user can give one item (``MAX_USER_WEIGHT``).

**Keys.** With a pre-threshold the noised keys are K(D) = {u : n_D(u) ≥ k}.
Since n_{D′}(u) = n_D(u) + [u ∈ L_x], K(D) ⊆ K(D′) and the new keys
U = K(D′) ∖ K(D) = {u ∈ L_x : n_D(u) = k − 1} are at most Δ0 items of x
(docs/privacy.md, invariant 8 holds). Unlike without a pre-threshold, a key of
U is also held by k − 1 other users.

**Counts** (truncated geometric; Count Laplace/Gaussian). Let
m(u) = max(n(u) − (k − 1), 0). m is 1-Lipschitz in n and m = 0 exactly when
n < k, so one user still moves each of ≤ Δ0 values m by at most 1 (the
sensitivity stays 1 per item), and an item with m = 0 is an item no strategy
with π(0) = 0 releases. Running the strategy on m instead of n is therefore
private at the same (ε, δ): keep iff n ≥ k and the strategy keeps n − (k − 1)
(``keep_probability_with_pre_threshold``; PipelineDP 0.3.1's
``probability_of_keep`` with ``pre_threshold=k``). For Count Laplace/Gaussian,
m + Z > ρ with n ≥ k is n + Z > ρ + (k − 1): the shift below with w_max = 1.

**Weighted and policy mechanisms.** Release u iff n(u) ≥ k and
H(u) + Z_u > ρ_k, with ρ_k = ρ′ + (k − 1)·w_max (``release_threshold``). Proof:

1. *ε on K(D).* Both neighbours noise H on K(D); restricting to K(D) does not
   increase ‖H(D′) − H(D)‖_p, so the noise on K(D) is private as without a
   pre-threshold (the ε, or δ_noise, part is unchanged).
2. *δ on U.* A key u of U has k holders, x and k − 1 others, each other giving
   h_i(u) ≤ w_max, so H_{D′}(u) − (k − 1)·w_max ≤ h_x(u) and
   P[H_{D′}(u) + Z_u > ρ_k] ≤ P[h_x(u) + Z_u > ρ′]. The noise of U's keys is
   independent, so P[some key of U released] ≤ 1 − Π_{u∈U} F(ρ′ − h_x(u)): the
   lone-user chance of a user whose own keys are U at x's weights. It is
   ≤ δ_thr when ρ′ covers those weights:
   * parallel rules (count, weighted Laplace/Gaussian, each SIPS round, DPNE
     level 1): x gives all t = |L_x| items the same weight w(t) and |U| ≤ t,
     so the chance is ≤ 1 − F(ρ′ − w(t))^t ≤ δ_thr, the t-term of the
     mechanism's own ρ. So ρ′ = ρ.
   * GW: its ρ covers every weighting w ≥ 0, Σ w ≤ 1 on ≤ Δ0 keys
     (docs/privacy.md, the GW fix, step 3), which x's greedy increments are.
     So ρ′ = ρ.
   * Policy Gaussian with k ≥ 2: x's increments on U need **not** be equal (a key
     of U may carry earlier holders' weight, so its gap to Γ is smaller, and
     ℓ2-descent follows the gaps), and ρ_G assumes equal weights (docs/privacy.md,
     invariant 12). The plain shift fails: σ = 2.236, δ_thr = 1e-5, Δ0 = 4, α = 3,
     k = 14, 13 users {s_j} for each j = 1, 2, 3 before x = {u, s_1, s_2, s_3} and
     13 users {u} after it, Γ = ρ_G + 13 + 3σ: x's effective weights are (0.710,
     0.407, 0.407, 0.407), released with chance 1.0036·δ_thr at ρ_G + 13
     (``tests/core/test_pre_threshold.py``). So ρ′ = 1 + σ·Φ⁻¹((1 − δ_thr)^{1/Δ0}),
     which covers every weighting with increments ≤ 1 on ≤ Δ0 keys, since
     1 − Π Φ((ρ′ − w_u)/σ) grows with every w_u.
   * Policy Laplace: the plain shift, ρ′ = ρ_Lap (full proof: docs/privacy.md,
     Pre-threshold). A key u of U has k − 1 other holders, so at most k − 1 before
     x, each adding ≤ 1: x meets it with gap Γ − H(u) ≥ ρ_k + α·λ − (k − 1) ≥ ρ′.
     ℓ1-descent adds min(G_v, L) (water level L) with Σ ≤ 1, so with ρ′ ≥ 1,
     min(G_u, L) ≤ 1 ≤ G_u: every key of U gets the same increment w (L, or G_u = 1
     when it is U's only key), and |U|·w ≤ 1. So the chance is
     1 − F(ρ′ − w)^{|U|} ≤ 1 − F(ρ′ − 1/|U|)^{|U|} ≤ δ_thr, the |U|-term of ρ_Lap.
     ρ_Lap ≥ 1 whenever δ_thr ≤ ½ (its t = 1 term is 1 + λ·ln(1/(2δ_thr))); where
     it is not, GW's threshold (every ℓ1 weighting) is used.
   (At k = 1 the own keys start at 0 and both descents give them equal
   increments: ρ′ = ρ.)
3. Conditioned on no key of U being released the outputs are the K(D) parts,
   private by 1.; with 2. this is the mechanism's (ε, δ) as without a
   pre-threshold (proof of ``beam_dpsu.core.calibration``).

The policy's cutoff Γ should be computed from ρ_k (Γ = ρ_k + α·scale): Γ is
data-independent, so any value keeps the proof, but a policy never lifts an
item above Γ, and below ρ_k only noise could release it.

**What k costs.** No k makes a release impossible: an item held by n ≥ k users
who each give it w_max has weight n·w_max, the margin over ρ_k that n − k + 1
such holders give over ρ′. A pre-threshold k costs k − 1 full-weight holders
per item, and items with fewer than k holders are never released
(``describe_pre_threshold``).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Callable

import numpy as np

from beam_dpsu.core import checks, thresholds
from beam_dpsu.core.exact_floats import rounded_up

__all__ = [
    "MAX_USER_WEIGHT",
    "check_pre_threshold",
    "eligible",
    "shifted_counts",
    "keep_probability_with_pre_threshold",
    "max_user_weight",
    "pre_threshold_shift",
    "own_weights_equal",
    "release_threshold",
    "describe_pre_threshold",
]

#: The largest weight one user gives one item, per mechanism (its kebab-case name):
#:
#: * count-laplace, count-gaussian, truncated-geometric: +1 per held item;
#: * weighted-laplace: 1/|W| ≤ 1; weighted-gaussian: 1/√|W| ≤ 1 (|W| ≥ 1);
#: * sips: each round is Weighted Gaussian, 1/√|W_r| ≤ 1 (per round);
#: * policy-laplace: ℓ1-descent adds min(G_u, λ) ≥ 0 with Σ ≤ 1, so ≤ 1;
#: * policy-gaussian: ℓ2-descent adds G/max(‖G‖₂, 1) with ‖·‖₂ ≤ 1, so ≤ 1
#:   (and ≥ 0: no item is ever above Γ);
#: * gw: a greedy increment is at most the user's remaining budget, ≤ 1.
#:
#: Sharding (``shards=P``) sums histograms of disjoint users: unchanged.
MAX_USER_WEIGHT: dict[str, float] = {
    "count-laplace": 1.0,
    "count-gaussian": 1.0,
    "truncated-geometric": 1.0,
    "weighted-laplace": 1.0,
    "weighted-gaussian": 1.0,
    "sips": 1.0,
    "policy-laplace": 1.0,
    "policy-gaussian": 1.0,
    "gw": 1.0,
}

# Sequential policies whose own-key weights can be unequal once k ≥ 2 (module docstring,
# 2.): ℓ2-descent's increments follow the gaps; ℓ1-descent's are equal on the new keys.
_UNEQUAL_AT_K_ABOVE_ONE = ("policy-gaussian",)


def check_pre_threshold(pre_threshold) -> int:
    """k: an int >= 1 (1 is no pre-threshold)."""
    return checks.integer("pre_threshold", pre_threshold, 1)


def eligible(holders, pre_threshold: int) -> np.ndarray:
    """Which items may be released at all: n ≥ k (vectorised over the holder counts n)."""
    k = check_pre_threshold(pre_threshold)
    return np.asarray(holders) >= k


def shifted_counts(holders, pre_threshold: int) -> np.ndarray:
    """m = max(n − (k − 1), 0): the counts a count strategy runs on (module docstring)."""
    k = check_pre_threshold(pre_threshold)
    return np.maximum(np.asarray(holders, dtype=np.float64) - (k - 1), 0.0)


def keep_probability_with_pre_threshold(keep_probability: Callable[[np.ndarray], np.ndarray],
                                        holders, pre_threshold: int) -> np.ndarray:
    """π_k(n) = π(n − (k − 1)) if n ≥ k, else 0 (vectorised over n).

    ``keep_probability`` is the strategy's π on counts (an array in, an array
    out), e.g. ``KeepProbabilityCalibration.keep_probability`` or
    ``lambda n: thresholds.truncated_geometric_keep_probability(n, ε′, δ′)``;
    it is called on m = n − (k − 1) ≥ 1 only. Private at the strategy's own
    (ε′, δ′) per item (module docstring, "Counts"); PipelineDP's
    ``pre_threshold`` semantics.
    """
    n = np.asarray(holders, dtype=np.float64)
    keep = eligible(n, pre_threshold)
    m = np.where(keep, shifted_counts(n, pre_threshold), 1.0)  # π evaluated where kept only
    return np.where(keep, np.asarray(keep_probability(m), dtype=np.float64), 0.0)


def max_user_weight(mechanism: str) -> float:
    """w_max of a mechanism by its kebab-case name (``MAX_USER_WEIGHT``)."""
    if mechanism not in MAX_USER_WEIGHT:
        raise checks.ParameterError(
            "mechanism", f"has no pre-threshold rule: {mechanism!r} is not one of "
            f"{sorted(MAX_USER_WEIGHT)}")
    return MAX_USER_WEIGHT[mechanism]


def pre_threshold_shift(pre_threshold: int, max_user_weight: float) -> float:
    """(k − 1)·w_max, rounded up: how far a pre-threshold k raises a release threshold."""
    k = check_pre_threshold(pre_threshold)
    weight = checks.positive("max_user_weight", max_user_weight)
    return rounded_up((k - 1) * Fraction(weight))


def own_weights_equal(mechanism: str, pre_threshold: int) -> bool:
    """Whether the extra user's new keys get equal weights (so the mechanism's own ρ
    covers them): always but for Policy Gaussian at k ≥ 2 (module docstring; for
    Policy Laplace where ρ_Lap ≥ 1, which ``release_threshold`` checks)."""
    max_user_weight(mechanism)
    return check_pre_threshold(pre_threshold) == 1 or mechanism not in _UNEQUAL_AT_K_ABOVE_ONE


def _base_threshold(mechanism: str, k: int, noise_scale: float, threshold_delta: float,
                    max_items_per_user: int) -> float:
    """ρ′: the lone-user threshold that covers the extra user's weights on the new keys."""
    if mechanism == "count-laplace":
        return thresholds.count_laplace_threshold(noise_scale, threshold_delta,
                                                  max_items_per_user)
    if mechanism == "count-gaussian":
        return thresholds.count_gaussian_threshold(noise_scale, threshold_delta,
                                                   max_items_per_user)
    if mechanism == "gw":
        return thresholds.gw_threshold(noise_scale, threshold_delta, max_items_per_user)
    if mechanism == "policy-laplace" and k > 1:
        # The plain shift needs every new key's gap to Γ >= 1, which ρ_Lap >= 1 gives
        # (always for δ_thr <= ½); else GW's threshold covers every ℓ1 weighting.
        rho = thresholds.weighted_laplace_threshold(noise_scale, threshold_delta,
                                                    max_items_per_user)
        return rho if rho >= 1.0 else thresholds.gw_threshold(
            noise_scale, threshold_delta, max_items_per_user)
    if mechanism == "policy-gaussian" and k > 1:
        return thresholds.count_gaussian_threshold(noise_scale, threshold_delta,
                                                   max_items_per_user)
    if mechanism in ("weighted-laplace", "policy-laplace"):
        return thresholds.weighted_laplace_threshold(noise_scale, threshold_delta,
                                                     max_items_per_user)
    if mechanism in ("weighted-gaussian", "policy-gaussian", "sips"):
        return thresholds.weighted_gaussian_threshold(noise_scale, threshold_delta,
                                                      max_items_per_user)
    raise checks.ParameterError(
        "mechanism", f"{mechanism!r} keeps items with a probability, not above a threshold: "
        "use keep_probability_with_pre_threshold")


def release_threshold(mechanism: str, pre_threshold: int, noise_scale: float,
                      threshold_delta: float, max_items_per_user: int) -> float:
    """ρ_k = ρ′ + (k − 1)·w_max for a mechanism by name, its noise scale (λ or σ; for
    SIPS one round's σ_r and δ_r) and its threshold δ, rounded up.

    ρ′ is the mechanism's own threshold, except for Policy Gaussian at k ≥ 2,
    whose new keys can get unequal weights: there 1 + σ·Φ⁻¹((1 − δ)^{1/Δ0}),
    which covers every weighting (module docstring). Policy Laplace's new keys
    get equal increments, so its ρ′ is ρ_Lap (GW's threshold in the corner
    ρ_Lap < 1, δ > ½). At k = 1 this is the mechanism's threshold.
    """
    k = check_pre_threshold(pre_threshold)
    base = _base_threshold(mechanism, k, noise_scale, threshold_delta, max_items_per_user)
    shift = pre_threshold_shift(k, max_user_weight(mechanism))
    if shift == 0.0:
        return base
    total = rounded_up(Fraction(base) + Fraction(shift))
    if not math.isfinite(total):
        raise checks.ParameterError(
            "pre_threshold", f"= {k} makes the release threshold overflow a float")
    return total


def describe_pre_threshold(pre_threshold: int) -> str:
    """What a pre-threshold k does, for reports and logs (no k makes a release impossible)."""
    k = check_pre_threshold(pre_threshold)
    if k == 1:
        return "pre_threshold 1: none (an item needs 1 holder, as without it)"
    return (f"pre_threshold {k}: an item needs >= {k} distinct holders after bounding, then "
            f"the DP selection with its release threshold raised by {k - 1} times the "
            "largest weight one user gives an item (for policy-gaussian by more: its base "
            "threshold becomes the one for unequal weights)")
