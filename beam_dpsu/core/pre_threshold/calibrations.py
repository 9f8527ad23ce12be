"""A selection's calibration with a pre-threshold k: ``calibrate(mechanism, budget, k)``.

A thresholded mechanism's release threshold becomes ρ_k (a policy's cutoff following);
truncated geometric keeps with π(n − (k − 1)); noise and δ split stay the mechanism's.
Rule: ``beam_dpsu.core.pre_threshold.rule``.
"""

from __future__ import annotations

import dataclasses

from beam_dpsu.core.pre_threshold import rule
from beam_dpsu.core import thresholds
from beam_dpsu.core.calibration import Calibration, KeepProbabilityCalibration, RoundsCalibration
from beam_dpsu.core.checks import ParameterError

__all__ = ["calibrate", "with_pre_threshold", "raised_threshold"]


def calibrate(mechanism, budget, pre_threshold: int = 1):
    """``mechanism.calibrate(budget)`` with its thresholds raised for a pre-threshold k."""
    k = rule.check_pre_threshold(pre_threshold)
    return with_pre_threshold(mechanism.calibrate(budget), mechanism, k)


def with_pre_threshold(calibration, mechanism, pre_threshold: int):
    """A mechanism's calibration (of any kind) for a pre-threshold k; unchanged at k = 1."""
    k = rule.check_pre_threshold(pre_threshold)
    if k == 1:
        return calibration
    if isinstance(calibration, KeepProbabilityCalibration):
        return dataclasses.replace(calibration, pre_threshold=k)
    max_items = mechanism.max_items_per_user
    if isinstance(calibration, RoundsCalibration):
        return dataclasses.replace(calibration, rounds=tuple(
            raised_threshold(c, mechanism.name, max_items, k) for c in calibration.rounds))
    return raised_threshold(calibration, mechanism.name, max_items, k,
                            getattr(mechanism, "alpha", None))


def raised_threshold(calibration: Calibration, mechanism: str, max_items_per_user: int,
                     pre_threshold: int, alpha: float | None = None) -> Calibration:
    """One thresholded calibration with ρ_k (and a policy's Γ = ρ_k + α·scale) for the
    mechanism named ``mechanism`` (``pre_threshold.MAX_USER_WEIGHT``'s names) at Δ0."""
    k = rule.check_pre_threshold(pre_threshold)
    if calibration.pre_threshold != 1:
        raise ParameterError("pre_threshold", "is already applied to this calibration")
    threshold = rule.release_threshold(mechanism, k, calibration.noise_scale,
                                       calibration.threshold_delta, max_items_per_user)
    cutoff = calibration.cutoff
    if cutoff is not None:
        if alpha is None:
            raise ParameterError("alpha", "is needed to move a policy's cutoff")
        cutoff = thresholds.policy_cutoff(threshold, calibration.noise_scale, alpha,
                                          max_items_per_user,
                                          thresholds.DESCENT_NORMS.get(mechanism),
                                          calibration.budget)
        cutoff = rule.check_cutoff(mechanism, k, cutoff, threshold)
    return dataclasses.replace(calibration, release_threshold=threshold, cutoff=cutoff,
                               pre_threshold=k)
