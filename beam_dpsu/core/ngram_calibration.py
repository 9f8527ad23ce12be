"""DPNE's calibration: σ per level, the thresholds ρ_k, the δ split, the Δ_1 plan.

Pure math (dpne = Kim et al. 2021), fixed when the transform is built: the levels' σ_k
compose to σ* (dpne Theorem 2.1); only level 1 has a threshold event, so δ is split to
minimise ρ_1 (``delta_split``). Δ_1 = "auto": ``calibrate_extraction``; DPSU-even: dpne Table 3.
Proof: docs/explanation/proofs.md#calibrating-the-gaussian-mechanisms.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from fractions import Fraction

# scipy: imported where it is used (beam_dpsu.core's docstring says why).

from beam_dpsu.core import budgets, checks, max_items_choice, thresholds
from beam_dpsu.core.budgets import Budget, ZCDPBudget
from beam_dpsu.core.gaussian import gaussian_noise_schedule, zcdp_gaussian_sigma
from beam_dpsu.core.calibration import GAUSSIAN, Calibration
from beam_dpsu.core.delta_split import split_delta
from beam_dpsu.core.exact_floats import nudged
from beam_dpsu.core.ngram_parameters import NgramParameters
from beam_dpsu.core.pre_threshold.calibrations import raised_threshold

__all__ = ["DPNECalibration", "total_sigma", "gaussian", "calibrate", "calibrate_extraction",
           "dpsu_even_calibration", "spurious_probability"]


def total_sigma(budget, threshold_of) -> tuple[float, float, float | None]:
    """(σ*, δ_thr, δ_noise) under a budget (dpne Theorem 2.1; dp-sips Def. 12): the split
    minimising ``threshold_of(σ*, δ_thr)``, or under zCDP σ* = 1/√(2ρ), δ_thr = δ, None."""
    checks.instance("budget", budget, (Budget, ZCDPBudget), "a Budget or ZCDPBudget")
    checks.require_delta(budget, "DPNE n-gram extraction")
    if isinstance(budget, ZCDPBudget):
        return zcdp_gaussian_sigma(budget.rho), budget.delta, None
    split = split_delta(budget.epsilon, budget.delta, threshold_of)
    return split.sigma_total, split.threshold_delta, split.delta_noise


def gaussian(budget, sigma: float, threshold: float, threshold_delta: float, source: str,
             cutoff=None, delta_noise=None, part_of=None) -> Calibration:
    """A Gaussian calibration of ℓ2 sensitivity 1 (a DPNE level, a DPSU baseline)."""
    return Calibration(noise=GAUSSIAN, noise_scale=sigma, release_threshold=threshold,
                       threshold_delta=threshold_delta, sensitivity_norm=2, sensitivity=1.0,
                       budget=budget, source=source, cutoff=cutoff, delta_noise=delta_noise,
                       part_of=part_of)


@dataclasses.dataclass(frozen=True)
class DPNECalibration:
    """What DPNE's guarantee rests on for one Δ_1: σ*, the δ split, σ_1..σ_T and
    level 1's calibration (levels k ≥ 2 take no other parameter from Δ_1)."""

    max_items_1: int
    sigma_total: float
    threshold_delta: float
    delta_noise: float | None
    sigmas: list
    level1: Calibration

    def to_dict(self) -> dict:
        return {"sigma_total": self.sigma_total,
                **({} if self.delta_noise is None else {"delta_noise": self.delta_noise}),
                "sigmas": list(self.sigmas),
                "level1": {"release_threshold": self.level1.release_threshold,
                           **({} if self.level1.pre_threshold == 1
                              else {"pre_threshold": self.level1.pre_threshold}),
                           "threshold_delta": self.threshold_delta,
                           **({} if self.level1.cutoff is None
                              else {"cutoff": self.level1.cutoff})}}


def _level1_threshold(max_n: int, noise_decay: float, max_items_1: int, sigma_total: float,
                      threshold_delta: float) -> float:
    """ρ_1 at a split: level 1's σ_1 of σ* (dpne Theorem 2.1)."""
    sigma_1 = gaussian_noise_schedule(sigma_total, max_n, noise_decay)[0]
    return thresholds.weighted_gaussian_threshold(sigma_1, threshold_delta, max_items_1)


def calibrate(budget, max_n: int, noise_decay: float, max_items_1: int, level1: str,
              alpha: float, pre_threshold: int = 1) -> DPNECalibration:
    """DPNE's calibration at Δ_1 = ``max_items_1`` (dpne Theorem 2.1), level 1's threshold
    (and cutoff) raised for a pre-threshold k on the unigrams (``core.pre_threshold``)."""
    sigma_total, threshold_delta, delta_noise = total_sigma(
        budget, functools.partial(_level1_threshold, max_n, noise_decay, max_items_1))
    sigmas = gaussian_noise_schedule(sigma_total, max_n, noise_decay)
    rho_1 = thresholds.weighted_gaussian_threshold(sigmas[0], threshold_delta, max_items_1)
    cutoff = (thresholds.policy_cutoff(rho_1, sigmas[0], alpha, max_items_1,
                                       thresholds.DESCENT_NORMS[level1], budget)
              if level1 == "policy-gaussian" else None)
    # With T > 1 levels, σ_1 alone is not DPNE's guarantee: marked, so composition refuses it.
    part_of = (None if max_n == 1 else f"DPNE level 1 of {max_n} levels, which compose to one "
               f"Gaussian of sigma* = {sigma_total:.6g}")
    level1_calibration = gaussian(budget, sigmas[0], rho_1, threshold_delta,
                                  "dpne Theorem 2.1", cutoff, delta_noise, part_of)
    if pre_threshold != 1:
        level1_calibration = raised_threshold(level1_calibration, level1, max_items_1,
                                              pre_threshold, alpha)
    return DPNECalibration(max_items_1, sigma_total, threshold_delta, delta_noise, sigmas,
                           level1_calibration)


def calibrate_extraction(params: NgramParameters, budget
                         ) -> tuple[max_items_choice.AutoPlan | None, list]:
    """(the Δ_1 plan or None, DPNE's calibration per candidate Δ_1): one calibration for a
    fixed Δ_1; for "auto", the budget split and DPNE calibrated at every candidate Δ_1
    under the selection's part (eagerly; no data)."""
    def at(max_items_1: int, part) -> DPNECalibration:
        return calibrate(part, params.max_n, params.noise_decay, max_items_1, params.level1,
                         params.alpha, params.pre_threshold)

    if params.level1_auto is None:
        return None, [at(params.max_items[0], budget)]
    if isinstance(budget, (Budget, ZCDPBudget)):
        checks.require_delta(budget, "DPNE n-gram extraction")
    auto = params.level1_auto.with_share(max_items_choice.DEFAULT_SHARE)
    size_budget, selection_budget = max_items_choice.split_budget(budget, auto.spent)
    calibrations = list(max_items_choice.calibrate_candidates(
        auto, lambda c: at(c, selection_budget), "DPNE calibrates",
        "the selection's part of the budget").values())
    return max_items_choice.AutoPlan(
        auto=auto, size_budget=size_budget, selection_budget=selection_budget,
        candidates=tuple(c.max_items_1 for c in calibrations),
        weight_thresholds=tuple(c.level1.release_threshold for c in calibrations),
        edges=tuple(int(e) for e in max_items_choice.size_bin_edges(auto.candidates)),
        mechanism_name=f"dpne level 1 ({params.level1})", user_mass="sqrt(m)"), calibrations


def _even_level_threshold(max_n: int, max_items: int, sigma_total: float,
                          threshold_delta: float) -> float:
    """DPSU-even's common threshold at a split: σ = √T·σ*, δ_thr/T each."""
    return thresholds.weighted_gaussian_threshold(
        sigma_total * math.sqrt(max_n), threshold_delta / max_n, max_items)


def dpsu_even_calibration(budget, max_n: int, max_items: int) -> Calibration:
    """DPSU-even (dpne Table 3): T Gaussian selections of σ = √T·σ* (Proposition 2.3), each
    threshold with δ_thr/T; the δ split minimises that common threshold."""
    sigma_total, threshold_delta, delta_noise = total_sigma(
        budget, functools.partial(_even_level_threshold, max_n, max_items))
    # Exactly within the split: T·δ_k ≤ δ_thr and T/σ² ≤ 1/σ*² (σ rounded up).
    sigma = nudged(sigma_total * math.sqrt(max_n),
                   lambda s: Fraction(s) ** 2 >= max_n * Fraction(sigma_total) ** 2, math.inf)
    delta_k = min(budgets.parts_within(threshold_delta, [threshold_delta / max_n] * max_n))
    part_of = (None if max_n == 1 else f"one of the {max_n} DPSU-even selections, which "
               f"compose to one Gaussian of sigma* = {sigma_total:.6g}")
    threshold = thresholds.weighted_gaussian_threshold(sigma, delta_k, max_items)
    return gaussian(budget, sigma, threshold, delta_k, "dpne Table 3 (DPSU-even); Proposition 2.3",
                    delta_noise=delta_noise, part_of=part_of)


def spurious_probability(rho: float, sigma: float) -> float:
    """Φ(−ρ_k/σ_k): the chance that a zero-weight valid k-gram crosses ρ_k (dpne App. A;
    0 when ρ_k is +inf: no valid k-gram)."""
    from scipy import special
    return float(special.ndtr(-rho / sigma)) if math.isfinite(rho) else 0.0
