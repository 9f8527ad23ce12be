"""Pre-threshold k: an item is released only if at least k distinct users hold it.

PipelineDP's ``pre_threshold``, on top of the DP selection (holders counted after
bounding; k = 1 is none). The mathematics only: a count strategy keeps
m = n − (k − 1), a thresholded mechanism releases above ρ_k = ρ′ + (k − 1)·w_max.
Proof: docs/explanation/proofs.md#pre-threshold.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Callable

import numpy as np

from beam_dpsu.core import checks, thresholds
from beam_dpsu.core.exact_floats import rounded_up

__all__ = ["MAX_USER_WEIGHT", "check_pre_threshold", "eligible", "shifted_counts",
           "keep_probability_with_pre_threshold", "max_user_weight", "pre_threshold_shift",
           "own_weights_equal", "release_threshold", "check_cutoff", "describe_pre_threshold"]

#: The largest weight one user gives one item, per mechanism (its kebab-case name);
#: why each is 1: docs/explanation/bounding.md#pre-threshold.
MAX_USER_WEIGHT: dict[str, float] = dict.fromkeys(
    ("count-laplace", "count-gaussian", "truncated-geometric", "weighted-laplace",
     "weighted-gaussian", "sips", "policy-laplace", "policy-gaussian", "gw"), 1.0)

# Sequential policies whose own-key weights can be unequal once k ≥ 2: ℓ2-descent's
# increments follow the gaps; ℓ1-descent's are equal on the new keys.
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
    """π_k(n) = π(n − (k − 1)) if n ≥ k, else 0 (vectorised over n; PipelineDP's semantics),
    ``keep_probability`` the strategy's π on counts, called on m ≥ 1 only."""
    n = np.asarray(holders, dtype=np.float64)
    keep = eligible(n, pre_threshold)
    m = np.where(keep, shifted_counts(n, pre_threshold), 1.0)  # π evaluated where kept only
    return np.where(keep, np.asarray(keep_probability(m), dtype=np.float64), 0.0)


def max_user_weight(mechanism: str) -> float:
    """w_max of a mechanism by its kebab-case name (``MAX_USER_WEIGHT``)."""
    if mechanism not in MAX_USER_WEIGHT:
        raise checks.ParameterError("mechanism", f"has no pre-threshold rule: {mechanism!r} is not "
                                    f"one of {sorted(MAX_USER_WEIGHT)}")
    return MAX_USER_WEIGHT[mechanism]


def pre_threshold_shift(pre_threshold: int, max_user_weight: float) -> float:
    """(k − 1)·w_max, rounded up: how far a pre-threshold k raises a release threshold."""
    k = check_pre_threshold(pre_threshold)
    weight = checks.positive("max_user_weight", max_user_weight)
    return rounded_up((k - 1) * Fraction(weight))


def own_weights_equal(mechanism: str, pre_threshold: int) -> bool:
    """Whether the extra user's new keys get equal weights: all but Policy Gaussian at k ≥ 2."""
    max_user_weight(mechanism)
    return check_pre_threshold(pre_threshold) == 1 or mechanism not in _UNEQUAL_AT_K_ABOVE_ONE


def _base_threshold(mechanism: str, k: int, noise_scale: float, threshold_delta: float,
                    max_items_per_user: int) -> float:
    """ρ′: the lone-user threshold that covers the extra user's weights on the new keys."""
    args = (noise_scale, threshold_delta, max_items_per_user)
    if mechanism == "count-laplace":
        return thresholds.count_laplace_threshold(*args)
    if mechanism == "count-gaussian" or (mechanism == "policy-gaussian" and k > 1):
        return thresholds.count_gaussian_threshold(*args)
    if mechanism == "gw":
        return thresholds.gw_threshold(*args)
    if mechanism == "policy-laplace" and k > 1:
        # The plain shift needs every new key's gap to Γ >= 1, which ρ_Lap >= 1 gives
        # (always for δ_thr <= ½); else GW's threshold covers every ℓ1 weighting.
        rho = thresholds.weighted_laplace_threshold(*args)
        return rho if rho >= 1.0 else thresholds.gw_threshold(*args)
    if mechanism in ("weighted-laplace", "policy-laplace"):
        return thresholds.weighted_laplace_threshold(*args)
    if mechanism in ("weighted-gaussian", "policy-gaussian", "sips"):
        return thresholds.weighted_gaussian_threshold(*args)
    raise checks.ParameterError(
        "mechanism", f"{mechanism!r} keeps items with a probability, not above a threshold: "
        "use keep_probability_with_pre_threshold")


def release_threshold(mechanism: str, pre_threshold: int, noise_scale: float,
                      threshold_delta: float, max_items_per_user: int) -> float:
    """ρ_k = ρ′ + (k − 1)·w_max for a mechanism by name, its noise scale (λ or σ; for
    SIPS one round's σ_r and δ_r) and its threshold δ, rounded up.

    ρ′ is the mechanism's own threshold, but for Policy Gaussian at k ≥ 2 (and Policy
    Laplace where ρ_Lap < 1): docs/explanation/proofs.md#pre-threshold.
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


def check_cutoff(mechanism: str, pre_threshold: int, cutoff: float,
                 release_threshold: float) -> float:
    """A policy's cutoff Γ, checked where the proof reads it: Policy Laplace at k ≥ 2 needs
    Γ ≥ ρ_k (docs/explanation/proofs.md#pre-threshold, "Policy Laplace").

    Args:
      mechanism: the mechanism's kebab-case name.
      pre_threshold: k.
      cutoff: Γ.
      release_threshold: ρ_k (``release_threshold``).

    Returns:
      ``cutoff``, unchanged.

    Raises:
      ParameterError: about ``cutoff``, if Policy Laplace at k ≥ 2 has Γ < ρ_k.
    """
    k = check_pre_threshold(pre_threshold)
    if mechanism == "policy-laplace" and k > 1 and not cutoff >= release_threshold:
        raise checks.ParameterError(
            "cutoff", f"= {cutoff:.6g} is below the release threshold {release_threshold:.6g}: "
                      f"policy-laplace at pre_threshold = {k} needs cutoff >= release threshold "
                      "(every new key's gap to the cutoff at least the water level)")
    return cutoff


def describe_pre_threshold(pre_threshold: int) -> str:
    """What a pre-threshold k does, for reports and logs (no k makes a release impossible)."""
    k = check_pre_threshold(pre_threshold)
    if k == 1:
        return "pre_threshold 1: none (an item needs 1 holder, as without it)"
    return (f"pre_threshold {k}: an item needs >= {k} distinct holders after bounding, then "
            f"the DP selection with its release threshold raised by {k - 1} times the "
            "largest weight one user gives an item (for policy-gaussian by more: its base "
            "threshold becomes the one for unequal weights)")
