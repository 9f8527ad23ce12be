"""Noise scale and release threshold of a mechanism under a budget.

``Calibration`` is what a mechanism config computes from a budget when the
pipeline is built: which noise, its scale, the release threshold, and how δ
was spent. ``release_mask`` is the pure noise-and-threshold step that both the
Beam ``NoisyThreshold`` transform and the statistical tests run.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from beam_dpsu import accounting, thresholds
from beam_dpsu.accounting import Budget, ZCDPBudget

__all__ = ["Calibration", "RoundsCalibration", "KeepProbabilityCalibration",
           "laplace_calibration", "gaussian_calibration", "noise", "release_mask"]

LAPLACE = "laplace"
GAUSSIAN = "gaussian"


@dataclasses.dataclass(frozen=True)
class Calibration:
    """The privacy parameters a mechanism runs with, fixed at construction.

    Attributes:
      noise: "laplace" or "gaussian".
      noise_scale: λ (Laplace scale) or σ (Gaussian standard deviation).
      release_threshold: ρ; an item is released iff weight + noise > ρ.
      threshold_delta: the part of δ that bounds the chance of releasing an
        item only the extra user holds (the rest, if any, went to σ).
      sensitivity_norm: 1 or 2, the norm in which one user moves the histogram
        by at most ``sensitivity``.
      sensitivity: the histogram's ℓ_p sensitivity the noise was calibrated to.
      budget: the budget this calibration spends.
      source: where the formulas come from (paper and section).
      cutoff: Γ of a sequential policy (None for the parallel mechanisms).
    """

    noise: str
    noise_scale: float
    release_threshold: float
    threshold_delta: float
    sensitivity_norm: int
    sensitivity: float
    budget: Budget | ZCDPBudget
    source: str
    cutoff: float | None = None

    def __post_init__(self):
        if self.noise not in (LAPLACE, GAUSSIAN):
            raise ValueError(f"noise must be 'laplace' or 'gaussian', got {self.noise!r}")
        if not (math.isfinite(self.noise_scale) and self.noise_scale > 0):
            raise ValueError(f"noise_scale must be finite and > 0, got {self.noise_scale!r}")
        if not math.isfinite(self.release_threshold):
            raise ValueError(f"release_threshold must be finite, got {self.release_threshold!r}")

    def to_dict(self) -> dict:
        return {
            "budget": self.budget.to_dict(),
            "noise": self.noise,
            "noise_scale": self.noise_scale,
            "release_threshold": self.release_threshold,
            "threshold_delta": self.threshold_delta,
            "sensitivity_norm": self.sensitivity_norm,
            "sensitivity": self.sensitivity,
            "source": self.source,
            **({} if self.cutoff is None else {"cutoff": self.cutoff}),
        }


@dataclasses.dataclass(frozen=True)
class RoundsCalibration:
    """The calibration of a mechanism made of several selections (e.g. SIPS rounds).

    Attributes:
      rounds: one ``Calibration`` per round, in order; their budgets compose
        to ``zcdp_budget`` (dp-sips Lemma 6).
      budget: the budget the caller gave.
      zcdp_budget: the δ-approximate ρ-zCDP budget actually split over rounds
        (the caller's, or the largest ρ meeting the caller's (ε, δ)).
      source: where the formulas come from.
    """

    rounds: tuple
    budget: Budget | ZCDPBudget
    zcdp_budget: ZCDPBudget
    source: str

    def to_dict(self) -> dict:
        return {
            "budget": self.budget.to_dict(),
            "zcdp_budget": self.zcdp_budget.to_dict(),
            "source": self.source,
            "rounds": [
                {"round": i, "rho": c.budget.rho, "delta": c.budget.delta,
                 "noise": c.noise, "noise_scale": c.noise_scale,
                 "release_threshold": c.release_threshold}
                for i, c in enumerate(self.rounds)],
        }


@dataclasses.dataclass(frozen=True)
class KeepProbabilityCalibration:
    """A selection that keeps an item held by n users with probability π(n), no noise.

    The truncated-geometric partition selection (Desfontaines et al. 2022):
    each user adds 1 to each of ≤ Δ0 items, and each item is then kept
    independently with probability π(count) computed for (ε/Δ0, δ/Δ0).

    Attributes:
      epsilon_per_item: ε' = ε/Δ0, the ε of one item's keep decision.
      delta_per_item: δ' = δ/Δ0, the δ of one item's keep decision.
      crossover: n1 of Theorem 1: π grows by e^{ε'} per user up to n1 users.
      users_kept_surely: n2 + 1: items held by this many users are always kept.
      max_items_per_user: Δ0.
      budget: the budget this calibration spends.
      source: where the formulas come from.
    """

    epsilon_per_item: float
    delta_per_item: float
    crossover: int
    users_kept_surely: int
    max_items_per_user: int
    budget: Budget
    source: str

    @property
    def threshold_delta(self) -> float:
        """δ: a user alone on t ≤ Δ0 items has one released w.p. 1 − (1 − δ/Δ0)^t ≤ δ."""
        return self.budget.delta

    def keep_probability(self, counts) -> np.ndarray:
        """π(count) for each count (vectorised)."""
        return thresholds.truncated_geometric_keep_probability(
            np.rint(np.asarray(counts, dtype=np.float64)), self.epsilon_per_item,
            self.delta_per_item)

    def keep_mask(self, counts, rng: np.random.Generator) -> np.ndarray:
        """Which items are kept: U < π(count) with U uniform on [0, 1)."""
        pi = self.keep_probability(counts)
        return rng.random(pi.shape) < pi

    def to_dict(self) -> dict:
        return {
            "budget": self.budget.to_dict(),
            "selection": "keep each item with probability pi(users holding it)",
            "epsilon_per_item": self.epsilon_per_item,
            "delta_per_item": self.delta_per_item,
            "crossover": self.crossover,
            "users_kept_surely": self.users_kept_surely,
            "sensitivity_norm": 0,  # ℓ0: a user changes ≤ Δ0 counts, each by 1
            "sensitivity": self.max_items_per_user,
            "source": self.source,
        }


def _laplace_epsilon(budget: Budget | ZCDPBudget) -> float:
    """ε of the Laplace step: ε itself, or √(2ρ) under zCDP.

    Pure ε-DP implies (ε²/2)-zCDP (Bun & Steinke 2016, Prop. 1.4), so
    Laplace noise calibrated to ε = √(2ρ) is ρ-zCDP on the event that no
    item of the extra user alone crosses the threshold (probability ≥ 1 − δ):
    δ-approximate ρ-zCDP as in dp-sips Definition 5.
    """
    if isinstance(budget, Budget):
        return budget.epsilon
    if isinstance(budget, ZCDPBudget):
        return math.sqrt(2.0 * budget.rho)
    raise TypeError(f"budget must be a Budget or ZCDPBudget, got {budget!r}")


def _finite_noise_scale(scale: float, name: str, budget) -> float:
    """``scale`` if it is a positive finite float, else an error naming the budget parameter."""
    if math.isfinite(scale) and scale > 0:
        return scale
    param, value = (("epsilon", budget.epsilon) if isinstance(budget, Budget)
                    else ("rho", budget.rho))
    direction = "small" if scale > 0 else "large"
    raise ValueError(
        f"{param} = {value:g} is too {direction}: the noise scale {name} = {scale:g} is not a "
        f"positive finite float")


def laplace_calibration(budget, max_items_per_user: int, l1_sensitivity: float,
                        threshold_fn, source: str) -> Calibration:
    """Laplace noise λ = Δ1/ε and threshold ``threshold_fn(λ, δ, Δ0)`` (all δ to the threshold)."""
    accounting.require_delta(budget, source)
    lam = _finite_noise_scale(l1_sensitivity / _laplace_epsilon(budget), "lambda", budget)
    return Calibration(
        noise=LAPLACE, noise_scale=lam,
        release_threshold=threshold_fn(lam, budget.delta, max_items_per_user),
        threshold_delta=budget.delta, sensitivity_norm=1, sensitivity=l1_sensitivity,
        budget=budget, source=source)


def gaussian_calibration(budget, max_items_per_user: int, l2_sensitivity: float,
                         threshold_fn, source: str) -> Calibration:
    """Gaussian σ and threshold ``threshold_fn(σ, δ_threshold, Δ0)``.

    Under ``Budget(ε, δ)``: σ is the analytic Gaussian at (ε, δ/2) for the given
    ℓ2 sensitivity and the threshold gets δ/2 (dpsu Theorem 5.1 / B.2).
    Under ``ZCDPBudget(ρ, δ)``: σ = Δ2/√(2ρ) (dp-sips Definition 12) is pure
    ρ-zCDP, so the threshold gets all of δ (dp-sips Theorem 1).
    """
    accounting.require_delta(budget, source)
    if isinstance(budget, Budget):
        sigma = accounting.analytic_gaussian_sigma(budget.epsilon, budget.delta / 2.0,
                                                   l2_sensitivity)
        threshold_delta = budget.delta / 2.0
    elif isinstance(budget, ZCDPBudget):
        sigma = _finite_noise_scale(l2_sensitivity / math.sqrt(2.0 * budget.rho), "sigma", budget)
        threshold_delta = budget.delta
    else:
        raise TypeError(f"budget must be a Budget or ZCDPBudget, got {budget!r}")
    return Calibration(
        noise=GAUSSIAN, noise_scale=sigma,
        release_threshold=threshold_fn(sigma, threshold_delta, max_items_per_user),
        threshold_delta=threshold_delta, sensitivity_norm=2, sensitivity=l2_sensitivity,
        budget=budget, source=source)


def noise(calibration: Calibration, rng: np.random.Generator, size=None):
    """Draws the calibration's noise (Laplace(0, λ) or N(0, σ²))."""
    if calibration.noise == LAPLACE:
        return rng.laplace(0.0, calibration.noise_scale, size)
    return rng.normal(0.0, calibration.noise_scale, size)


def release_mask(weights, calibration: Calibration, rng: np.random.Generator) -> np.ndarray:
    """Which items of a histogram are released: weight + noise > ρ (dpsu Algorithm 1)."""
    weights = np.asarray(weights, dtype=np.float64)
    return weights + noise(calibration, rng, weights.shape) > calibration.release_threshold
