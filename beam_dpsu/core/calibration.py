"""Noise scale and release threshold of a mechanism under a budget.

``Calibration`` is what a mechanism config computes from a budget when the pipeline
is built; ``release_mask`` is the noise-and-threshold step that ``NoisyThreshold`` and
the statistical tests run. Gaussian mechanisms split δ = δ_noise + δ_thr.
Proof: docs/explanation/proofs.md#calibrating-the-gaussian-mechanisms.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from fractions import Fraction

import numpy as np
# scipy: imported where it is used (beam_dpsu.core's docstring says why).

from beam_dpsu.core import checks, gaussian, thresholds
from beam_dpsu.core.pre_threshold import keep_probability_with_pre_threshold
from beam_dpsu.core.budgets import Budget, ZCDPBudget
from beam_dpsu.core.checks import ParameterError
from beam_dpsu.core.delta_split import split_delta
from beam_dpsu.core.exact_floats import rounded_down

__all__ = ["Calibration", "RoundsCalibration", "KeepProbabilityCalibration",
           "gaussian_dp_equivalents", "laplace_calibration", "gaussian_calibration", "noise",
           "release_mask"]

LAPLACE = "laplace"
GAUSSIAN = "gaussian"


@dataclasses.dataclass(frozen=True)
class Calibration:
    """The privacy parameters a mechanism runs with, fixed at construction.

    Attributes:
      noise: "laplace" or "gaussian".
      noise_scale: λ (Laplace scale) or σ (Gaussian standard deviation).
      release_threshold: ρ; an item is released iff weight + noise > ρ.
      threshold_delta: the part of δ bounding the release of items only the extra user holds.
      sensitivity_norm: 1 or 2, the norm of ``sensitivity``.
      sensitivity: the histogram's ℓ_p sensitivity the noise was calibrated to.
      budget: the budget this calibration spends.
      source: where the formulas come from (paper and section).
      cutoff: Γ of a sequential policy (None for the parallel mechanisms).
      delta_noise: Gaussian under ``Budget(ε, δ)``: the δ of σ (δ = this + threshold_delta).
      part_of: what this is one part of (e.g. DPNE's level 1; ``composition`` refuses it).
      pre_threshold: k ≥ 1: released only if at least k users hold it (1: none).
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
    delta_noise: float | None = None
    part_of: str | None = None
    pre_threshold: int = 1

    def __post_init__(self):
        checks.one_of("noise", self.noise, (LAPLACE, GAUSSIAN), "'laplace' or 'gaussian'")
        if not (math.isfinite(self.noise_scale) and self.noise_scale > 0):
            raise ParameterError("noise_scale", f"must be finite and > 0, got {self.noise_scale!r}")
        if not math.isfinite(self.release_threshold):
            raise ParameterError("release_threshold",
                                 f"must be finite, got {self.release_threshold!r}")

    @property
    def gaussian_mu(self) -> float | None:
        """μ = Δ2/σ of the Gaussian noise (μ-GDP, Dong, Roth & Su 2022), None for Laplace."""
        return self.sensitivity / self.noise_scale if self.noise == GAUSSIAN else None

    def weight_threshold(self) -> float:
        """T: the weight released with probability ½ (``max_items_choice``): ρ."""
        return self.release_threshold

    def to_dict(self) -> dict:
        return {
            "budget": self.budget.to_dict(), "noise": self.noise, "noise_scale": self.noise_scale,
            "release_threshold": self.release_threshold, "threshold_delta": self.threshold_delta,
            **({} if self.delta_noise is None else {"delta_noise": self.delta_noise}),
            "sensitivity_norm": self.sensitivity_norm, "sensitivity": self.sensitivity,
            "source": self.source,
            **({} if self.cutoff is None else {"cutoff": self.cutoff}),
            **({} if self.pre_threshold == 1 else {"pre_threshold": self.pre_threshold}),
        }


@dataclasses.dataclass(frozen=True)
class RoundsCalibration:
    """The calibration of a mechanism made of several selections (e.g. SIPS rounds).

    Attributes:
      rounds: one ``Calibration`` per round, composing to ``zcdp_budget`` (dp-sips Lemma 6).
      budget: the budget the caller gave.
      zcdp_budget: the zCDP budget split over rounds (under ``Budget``: ρ = 1/(2σ_total²)).
      source: where the formulas come from.
      delta_noise: under ``Budget(ε, δ)``, the δ of the rounds' one analytic Gaussian.
    """

    rounds: tuple
    budget: Budget | ZCDPBudget
    zcdp_budget: ZCDPBudget
    source: str
    delta_noise: float | None = None

    @property
    def threshold_delta(self) -> float:
        """Σ δ_r: the chance that some item only the extra user holds is released."""
        return math.fsum(c.threshold_delta for c in self.rounds)

    @property
    def sigma_total(self) -> float:
        """σ of the one Gaussian mechanism the rounds compose to: 1/σ² = Σ 1/σ_r²."""
        return 1.0 / math.sqrt(math.fsum(c.gaussian_mu ** 2 for c in self.rounds))

    @property
    def gaussian_mu(self) -> float:
        return 1.0 / self.sigma_total

    @property
    def pre_threshold(self) -> int:
        """k of every round (each round's holders are counted among its own users)."""
        return self.rounds[0].pre_threshold

    def weight_threshold(self) -> float:
        """T of the last (largest-budget) round, whose threshold is the largest."""
        return self.rounds[-1].release_threshold

    def to_dict(self) -> dict:
        return {
            "budget": self.budget.to_dict(), "zcdp_budget": self.zcdp_budget.to_dict(),
            "sigma_total": self.sigma_total, "threshold_delta": self.threshold_delta,
            **({} if self.delta_noise is None else {"delta_noise": self.delta_noise}),
            "source": self.source,
            **({} if self.pre_threshold == 1 else {"pre_threshold": self.pre_threshold}),
            "rounds": [{"round": i, "rho": c.budget.rho, "delta": c.budget.delta, "noise": c.noise,
                        "noise_scale": c.noise_scale, "release_threshold": c.release_threshold}
                       for i, c in enumerate(self.rounds)],
        }


@dataclasses.dataclass(frozen=True)
class KeepProbabilityCalibration:
    """A selection that keeps an item held by n users with probability π(n), no noise.

    The truncated-geometric partition selection (Desfontaines et al. 2022) at (ε/Δ0, δ/Δ0).

    Attributes:
      epsilon_per_item: ε' = ε/Δ0 of one item's keep decision.
      delta_per_item: δ' = δ/Δ0 (less a float margin) of one item's keep decision.
      crossover: n1 of Theorem 1: π grows by e^{ε'} per user up to n1 users.
      users_kept_surely: n2 + 1: items held by this many users are always kept.
      max_items_per_user: Δ0.
      budget: the budget this calibration spends.
      source: where the formulas come from.
      pre_threshold: k ≥ 1: kept with π(n − (k − 1)) if n ≥ k users hold it, else never.
    """

    epsilon_per_item: float
    delta_per_item: float
    crossover: int
    users_kept_surely: int
    max_items_per_user: int
    budget: Budget
    source: str
    pre_threshold: int = 1

    @property
    def threshold_delta(self) -> float:
        """δ: a user alone on t ≤ Δ0 items has one released w.p. 1 − (1 − δ/Δ0)^t ≤ δ."""
        return self.budget.delta

    def keep_probability(self, counts) -> np.ndarray:
        """π(count) for each count; with a pre-threshold k, π(count − (k − 1)), 0 below k."""
        return keep_probability_with_pre_threshold(
            self._keep_probability_of_strategy, np.rint(np.asarray(counts, dtype=np.float64)),
            self.pre_threshold)

    def _keep_probability_of_strategy(self, counts: np.ndarray) -> np.ndarray:
        return thresholds.truncated_geometric_keep_probability(
            counts, self.epsilon_per_item, self.delta_per_item)

    def keep_mask(self, counts, rng: np.random.Generator) -> np.ndarray:
        """Which items are kept: U < π(count) with U uniform on [0, 1)."""
        pi = self.keep_probability(counts)
        return rng.random(pi.shape) < pi

    def weight_threshold(self) -> float:
        """The smallest count kept with probability ≥ ½ (shifted by k − 1 for a pre-threshold)."""
        below_half = bisect.bisect_left(  # how many of the counts 1, 2, … have π < ½
            range(1, self.users_kept_surely), True,
            key=lambda n: self._keep_probability_of_strategy(np.array([float(n)]))[0] >= 0.5)
        return float(below_half + self.pre_threshold)  # count 1 + below_half, shifted by k − 1

    def to_dict(self) -> dict:
        return {
            "budget": self.budget.to_dict(),
            "selection": "keep each item with probability pi(users holding it)",
            "epsilon_per_item": self.epsilon_per_item, "delta_per_item": self.delta_per_item,
            "crossover": self.crossover, "users_kept_surely": self.users_kept_surely,
            "sensitivity_norm": 0,  # ℓ0: a user changes ≤ Δ0 counts, each by 1
            "sensitivity": self.max_items_per_user, "source": self.source,
            **({} if self.pre_threshold == 1 else {"pre_threshold": self.pre_threshold}),
        }


def _finite_noise_scale(scale: float, name: str, budget) -> float:
    """``scale`` if it is a positive finite float, else an error naming the budget parameter."""
    if math.isfinite(scale) and scale > 0:
        return scale
    param = "epsilon" if isinstance(budget, Budget) else "rho"
    direction = "small" if scale > 0 else "large"
    raise ParameterError(
        param, f"= {getattr(budget, param):g} is too {direction}: the noise scale {name} = "
               f"{scale:g} is not a positive finite float")


def laplace_calibration(budget, max_items_per_user: int, l1_sensitivity: float,
                        threshold_fn, source: str) -> Calibration:
    """Laplace noise λ = Δ1/ε and threshold ``threshold_fn(λ, δ, Δ0)`` (all δ to the threshold)."""
    checks.require_delta(budget, source)
    checks.instance("budget", budget, (Budget, ZCDPBudget), "a Budget or ZCDPBudget")
    # Under ρ-zCDP, ε = √(2ρ) (Bun & Steinke Prop. 1.4; dp-sips Def. 5).
    epsilon = (budget.epsilon if isinstance(budget, Budget)
               else gaussian.zcdp_laplace_epsilon(budget.rho))
    lam = _finite_noise_scale(l1_sensitivity / epsilon, "lambda", budget)
    return Calibration(
        noise=LAPLACE, noise_scale=lam,
        release_threshold=threshold_fn(lam, budget.delta, max_items_per_user),
        threshold_delta=budget.delta, sensitivity_norm=1, sensitivity=l1_sensitivity,
        budget=budget, source=source)


def truncated_geometric_calibration(budget: Budget, max_items_per_user: int
                                    ) -> KeepProbabilityCalibration:
    """Truncated geometric under ``Budget(ε, δ)``: each item at (ε/Δ0, δ/Δ0), less a float
    margin (Desfontaines et al. 2022 Theorem 1; numerics.md#truncated-geometric-per-item)."""
    d0 = max_items_per_user
    # (ε/Δ0, δ/Δ0) rounded down: Δ0 items at these meet (ε, δ) exactly.
    eps_item, delta_item = (rounded_down(Fraction(x) / d0) for x in (budget.epsilon, budget.delta))
    # δ' less a margin covering π's float error: the chances as run meet (ε', δ') exactly.
    margin = thresholds.truncated_geometric_float_margin(eps_item, delta_item)
    if not margin <= delta_item / 2.0:
        raise ParameterError.worded(
            "delta",
            f"truncated-geometric: delta per item = delta/max_items_per_user = "
            f"{delta_item:g} is too small for float64 keep probabilities at epsilon per item "
            f"= {eps_item:g} (it must be at least twice their float error margin, "
            f"{margin:.3g}); raise delta, lower epsilon or lower max_items_per_user")
    delta_item = rounded_down(Fraction(delta_item) - Fraction(margin))
    n1, n2 = thresholds.truncated_geometric_crossovers(eps_item, delta_item)
    return KeepProbabilityCalibration(
        epsilon_per_item=eps_item, delta_per_item=delta_item, crossover=n1,
        users_kept_surely=n2 + 1, max_items_per_user=d0, budget=budget,
        source="Desfontaines, Voss, Gipson & Mandayam 2022 (PoPETs; arXiv 2006.03684) "
               "Theorem 1; Δ0 > 1 by basic composition (ε/Δ0, δ/Δ0)")


def gaussian_calibration(budget, max_items_per_user: int, l2_sensitivity: float,
                         threshold_fn, source: str) -> Calibration:
    """Gaussian σ and threshold ``threshold_fn(σ, δ_threshold, Δ0)``.

    ``Budget(ε, δ)``: the analytic Gaussian at (ε, δ_noise), δ split to minimise the
    threshold (dpsu Theorem 5.1 / B.2 used δ/2 each). ``ZCDPBudget(ρ, δ)``: σ = Δ2/√(2ρ)
    (dp-sips Definition 12), all of δ to the threshold (Theorem 1).
    """
    checks.require_delta(budget, source)
    checks.instance("budget", budget, (Budget, ZCDPBudget), "a Budget or ZCDPBudget")
    delta_noise = None
    if isinstance(budget, Budget):
        split = split_delta(budget.epsilon, budget.delta, lambda sigma, threshold_delta: (
            threshold_fn(sigma, threshold_delta, max_items_per_user)), l2_sensitivity)
        sigma, threshold_delta, delta_noise = (split.sigma_total, split.threshold_delta,
                                               split.delta_noise)
    else:
        sigma = _finite_noise_scale(gaussian.zcdp_gaussian_sigma(budget.rho, l2_sensitivity),
                                    "sigma", budget)
        threshold_delta = budget.delta
    return Calibration(
        noise=GAUSSIAN, noise_scale=sigma,
        release_threshold=threshold_fn(sigma, threshold_delta, max_items_per_user),
        threshold_delta=threshold_delta, sensitivity_norm=2, sensitivity=l2_sensitivity,
        budget=budget, source=source, delta_noise=delta_noise)


# δ′ (as multiples of the budget's δ) at which the report states the (ε′, δ′) curve.
EQUIVALENT_DELTA_FACTORS = (0.1, 1.0, 2.0, 5.0, 10.0)


def gaussian_dp_equivalents(mu: float, threshold_delta: float, delta: float,
                            factors=EQUIVALENT_DELTA_FACTORS,
                            requested_epsilon: float | None = None) -> list[dict]:
    """Exact (ε′, δ′) guarantees of a thresholded Gaussian mechanism with μ = Δ2/σ_total.

    At each δ′ = factor·δ above the thresholds' cost, the smallest ε′ with δ_G(μ, ε′) +
    δ_thr ≤ δ′ (Dong, Roth & Su 2022 Cor. 2.13), rounded up; at most ``requested_epsilon``
    for δ′ ≥ δ. Derivation: numerics.md#stated-epsilon-delta-curves.
    """
    sigma = 1.0 / mu
    out = []
    for factor in factors:
        delta_dp = factor * delta
        # A δ′ the thresholds alone use up (to rounding) leaves no room for the noise.
        if not threshold_delta * (1.0 + 1e-9) < delta_dp < 1.0:
            continue
        log_target = math.log(delta_dp - threshold_delta)

        def excess(eps: float) -> float:
            # B023: called only within this iteration, so late binding is harmless.
            return gaussian._log_gaussian_delta(sigma, eps, 1.0) - log_target  # noqa: B023

        def surely_met(eps: float) -> bool:
            # δ_G(ε) as computed, raised by its float error bound, meets the target.
            error = gaussian._log_gaussian_delta_error(sigma, eps)
            return math.isfinite(error) and excess(eps) + math.log1p(error) <= 0.0

        # At ε′ = 0, δ_G = 2Φ(μ/2) − 1 = erf(μ/(2√2)), raised by a few ulps.
        if math.erf(mu / (2.0 * math.sqrt(2.0))) * (1.0 + 1e-14) <= delta_dp - threshold_delta:
            eps = 0.0
        else:
            hi = 1.0
            while excess(hi) > 0.0:
                hi *= 2.0
            from scipy import optimize
            eps = float(optimize.brentq(excess, 0.0, hi, xtol=1e-300, rtol=1e-12))
            # The root's safe side, past the float error of δ_G.
            step = 1e-12 * max(eps, 1e-300)
            while not surely_met(eps):
                eps += step
                step *= 2.0
        if requested_epsilon is not None and delta_dp >= delta:
            # (ε, δ)-DP implies (ε, δ′)-DP for every δ′ ≥ δ.
            eps = requested_epsilon if delta_dp == delta else min(eps, requested_epsilon)
        out.append({"epsilon": eps, "delta": delta_dp})
    return out


def noise(calibration: Calibration, rng: np.random.Generator, size=None):
    """Draws the calibration's noise (Laplace(0, λ) or N(0, σ²))."""
    if calibration.noise == LAPLACE:
        return rng.laplace(0.0, calibration.noise_scale, size)
    return rng.normal(0.0, calibration.noise_scale, size)


def release_mask(weights, calibration: Calibration, rng: np.random.Generator) -> np.ndarray:
    """Which items of a histogram are released: weight + noise > ρ (dpsu Algorithm 1)."""
    weights = np.asarray(weights, dtype=np.float64)
    return weights + noise(calibration, rng, weights.shape) > calibration.release_threshold
