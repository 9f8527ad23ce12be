"""The split of a Gaussian mechanism's δ between its noise and its thresholds.

Under ``Budget(ε, δ)`` a Gaussian mechanism spends δ = δ_noise + δ_thr; ``split_delta``
picks, without data, the split that minimises the release threshold.
Proof: docs/explanation/proofs.md#calibrating-the-gaussian-mechanisms.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
# scipy: imported where it is used (beam_dpsu.core's docstring says why).

from beam_dpsu.core import gaussian
from beam_dpsu.core.checks import ParameterError
from beam_dpsu.core.exact_floats import rounded_down

__all__ = ["DeltaSplit", "split_delta"]


@dataclasses.dataclass(frozen=True)
class DeltaSplit:
    """How ``split_delta`` divided δ: δ_noise + δ_thr ≤ δ.

    Attributes:
      delta_noise: δ of the analytic Gaussian σ_total.
      threshold_delta: δ_thr, the thresholds' total bad-event probability.
      sigma_total: the analytic Gaussian σ at (ε, delta_noise) for the ℓ2 sensitivity.
      objective: the objective's value (the release threshold it minimised).
    """

    delta_noise: float
    threshold_delta: float
    sigma_total: float
    objective: float


# The search variable is t = logit(δ_thr/δ). |t| ≤ 16 keeps either share ≥ 1.1e-7·δ,
# far beyond any useful optimum (it sits near 0).
_SPLIT_LOGIT_BOUND = 16.0
_SPLIT_GRID = 17


def _split_at(epsilon: float, delta: float, t: float, l2_sensitivity: float, objective):
    """(δ_noise, δ_thr, σ_total, objective) at t = logit(δ_thr/δ), or None if infeasible."""
    share = 0.5 * (1.0 + math.tanh(0.5 * t))  # = 1/(1 + e^{−t}), overflow-free
    threshold_delta = delta * share
    if not (0.0 < threshold_delta < 1.0 and delta - threshold_delta > 0.0):
        return None
    # The sum must hold exactly, in Fractions and as a float sum: step down by δ's ulp,
    # doubling (never one ulp of δ_noise at a time).
    delta_noise = rounded_down(Fraction(delta) - Fraction(threshold_delta))
    step = math.ulp(delta)
    while delta_noise > 0.0 and delta_noise + threshold_delta > delta:
        delta_noise -= step
        step *= 2.0
    if not delta_noise > 0.0:
        return None
    try:
        sigma = gaussian.analytic_gaussian_sigma(epsilon, delta_noise, l2_sensitivity)
        value = float(objective(sigma, threshold_delta))
    except (ValueError, ArithmeticError, RuntimeError):
        return None
    if not math.isfinite(value):
        return None
    return DeltaSplit(delta_noise, threshold_delta, sigma, value)


def split_delta(epsilon: float, delta: float, objective, l2_sensitivity: float = 1.0) -> DeltaSplit:
    """The δ split between one Gaussian σ and the thresholds that minimises
    ``objective(σ_total, δ_thr)``, the release threshold it yields (SIPS: the last round's;
    DPNE: level 1's): a grid in t = logit(δ_thr/δ), then a bounded Brent search.
    Derivation: docs/explanation/accounting.md#the-delta-split.
    """
    epsilon, delta = float(epsilon), float(delta)
    evaluated = []

    def at(t: float):
        split = _split_at(epsilon, delta, t, l2_sensitivity, objective)
        if split is not None:
            evaluated.append(split)
        return split

    grid = np.linspace(-_SPLIT_LOGIT_BOUND, _SPLIT_LOGIT_BOUND, _SPLIT_GRID)
    values = [at(float(t)) for t in grid]
    feasible = [i for i, v in enumerate(values) if v is not None]
    if not feasible:
        # Every split failed: the even split's own error names the problem.
        sigma = gaussian.analytic_gaussian_sigma(epsilon, delta / 2.0, l2_sensitivity)
        objective(sigma, delta / 2.0)
        raise ParameterError.worded("delta", f"no split of delta = {delta!r} between noise and "
                                    f"thresholds works at epsilon = {epsilon!r}")
    best = min(feasible, key=lambda i: values[i].objective)
    lo = float(grid[max(best - 1, 0)])
    hi = float(grid[min(best + 1, len(grid) - 1)])

    # Infeasible points get a finite penalty above every feasible grid value
    # (inf would make Brent's parabola steps nan).
    worst = max(values[i].objective for i in feasible)
    penalty = worst + 1.0 + abs(worst)

    def f(t: float) -> float:
        split = at(t)
        return penalty if split is None else split.objective

    from scipy import optimize
    with np.errstate(all="ignore"):
        optimize.minimize_scalar(f, bounds=(lo, hi), method="bounded",
                                 options={"xatol": 1e-3, "maxiter": 40})
    return min(evaluated, key=lambda s: (s.objective, -s.threshold_delta))
