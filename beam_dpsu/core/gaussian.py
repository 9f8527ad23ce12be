"""The Gaussian mechanism's mathematics: the analytic Gaussian, zCDP ↔ (ε, δ)-DP.

Pure Python/numpy/scipy, golden-tested against the papers' tables (Balle & Wang 2018;
dp-sips Lemma 8, Corollary 9). Every result is rounded to the safe side:
docs/explanation/numerics.md#the-analytic-gaussian.
"""

from __future__ import annotations

import functools
import math
from fractions import Fraction
import sys

import numpy as np
# scipy: imported where it is used (beam_dpsu.core's docstring says why).

from beam_dpsu.core import checks
from beam_dpsu.core.checks import ParameterError
from beam_dpsu.core.exact_floats import nudged

__all__ = ["gaussian_noise_schedule", "analytic_gaussian_sigma", "zcdp_delta_for_epsilon",
           "zcdp_to_dp", "zcdp_gaussian_sigma", "zcdp_laplace_epsilon", "sqrt_rounded_up"]


def gaussian_noise_schedule(sigma_total: float, levels: int, decay: float = 1.0) -> list[float]:
    """σ_1..σ_T, σ_k = decay·σ_{k−1}, with 1/σ*² = Σ_k 1/σ_k² for σ* = ``sigma_total``.

    dpne Theorem 2.1, Prop. 2.3, §3.1.1; numerics.md#composing-levels-the-noise-schedule.
    """
    sigma_total = checks.positive("sigma_total", sigma_total)
    checks.integer("levels", levels)
    decay = checks.positive("decay", decay)
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        powers = decay ** np.arange(levels, dtype=np.float64)  # σ_k / σ_1
        sigma_1 = sigma_total * math.sqrt(float(np.sum(powers ** -2.0)))
        sigmas = [float(sigma_1 * p) for p in powers]
    if not all(math.isfinite(s) and s > 0 for s in sigmas):
        raise ParameterError.worded("decay",
            f"noise decay {decay:g} over {levels} levels gives a sigma outside the float range "
            f"(sigma_1 = {sigmas[0]:g}, sigma_{levels} = {sigmas[-1]:g}); use a decay closer to 1")
    # σ_1 rounded up until Σ 1/σ_k² ≤ 1/σ*² exactly (to nearest, about half pass it).
    paid_for = 1 / Fraction(sigma_total) ** 2
    while sum(1 / Fraction(s) ** 2 for s in sigmas) > paid_for:
        sigma_1 = math.nextafter(sigma_1, math.inf)
        sigmas = [float(sigma_1 * p) for p in powers]
        if not math.isfinite(sigmas[-1]) or not math.isfinite(sigma_1):
            raise ParameterError.worded(
                "decay", f"noise decay {decay:g} over {levels} levels gives a sigma outside "
                         "the float range; use a decay closer to 1")
    return sigmas


def _log_gaussian_delta(sigma: float, epsilon: float, l2_sensitivity: float) -> float:
    """log δ(σ) of dpsu Proposition 2.2, in log space (accurate down to δ = 1e-300)."""
    from scipy import special
    a = l2_sensitivity / (2.0 * sigma)
    b = epsilon * sigma / l2_sensitivity
    l1 = special.log_ndtr(a - b)
    if l1 == -math.inf:  # Φ(a − b) underflows even in logs: δ ≤ Φ(a − b) is 0
        return -math.inf
    l2 = special.log_ndtr(-a - b)
    diff = epsilon + l2 - l1  # < 0 always (the mechanism is (ε, δ)-DP for some δ < Φ(a − b))
    if diff >= 0:
        return -math.inf
    return l1 + math.log(-math.expm1(diff))


def _log_gaussian_delta_error(s: float, epsilon: float) -> float:
    """A bound on the relative float error of ``_log_gaussian_delta(s, ε, 1)``."""
    from scipy import special
    ulp = 2.0 * np.finfo(np.float64).eps
    a, b = 1.0 / (2.0 * s), epsilon * s
    x, y = a - b, -a - b
    err_x, err_y = (ulp * (a + b) * (abs(v) + 1.0) for v in (x, y))
    # Python floats: past float range a sum is inf (no numpy overflow warning), and an
    # error bound that is not finite says "unknown" (the caller then uses the closed form).
    l1, l2 = float(special.log_ndtr(x)), float(special.log_ndtr(y))
    diff = epsilon + l2 - l1
    if not diff < 0:
        return math.inf
    err_diff = err_x + err_y + ulp * (epsilon + abs(l1) + abs(l2))
    if not math.isfinite(err_diff):
        return math.inf
    return err_x + err_diff * math.exp(diff) / -math.expm1(diff)


# The largest relative error in δ(σ) the exact solution may carry; beyond it the
# conservative closed form is used.
_GAUSSIAN_DELTA_RTOL = 1e-3


def _conservative_gaussian_sigma(epsilon: float, delta: float) -> float:
    """A σ (for Δ = 1) with δ(σ) ≤ δ for sure, from two closed-form bounds (numerics.md)."""
    from scipy import special
    z = float(special.ndtri(delta)) * -1.0
    large_eps = (z + math.hypot(z, math.sqrt(2.0) * math.sqrt(epsilon))) / 2.0 / epsilon
    small_eps = 1.0 / (2.0 * math.sqrt(2.0) * float(special.erfinv(delta)))
    return min(large_eps, small_eps) * (1.0 + 1e-9)


# A job calibrates the same budget several times (checks, the split's bisection, the
# report). Typed: a kept σ(1, δ) must not answer σ(True, δ), which the checks refuse.
@functools.lru_cache(maxsize=4096, typed=True)
def analytic_gaussian_sigma(epsilon: float, delta: float, l2_sensitivity: float = 1.0) -> float:
    """The smallest σ such that N(0, σ²) noise is (ε, δ)-DP for L2 sensitivity Δ.

    Solves Φ(Δ/(2σ) − εσ/Δ) − e^ε Φ(−Δ/(2σ) − εσ/Δ) = δ (dpsu Proposition 2.2; Balle &
    Wang 2018, Algorithm 1), rounded up. Derivation: numerics.md#the-analytic-gaussian.

    Args:
      epsilon: ε > 0.
      delta: δ in (0, 1).
      l2_sensitivity: Δ, the L2 sensitivity of the noised vector (default 1).

    Returns:
      σ, the standard deviation of the Gaussian noise.

    Raises:
      ValueError: a parameter is out of range, or σ would not be a finite float.
    """
    epsilon = checks.positive("epsilon", epsilon)
    delta = checks.probability("delta", delta)
    l2_sensitivity = checks.positive("l2_sensitivity", l2_sensitivity)
    log_delta = math.log(delta)

    def f(log_s: float) -> float:
        return _log_gaussian_delta(math.exp(log_s), epsilon, 1.0) - log_delta

    # Bracket in units of Δ: σ/Δ between 1e-8 and 1e8 covers every (ε, δ) above.
    lo, hi = math.log(1e-8), math.log(1e8)
    while f(lo) < 0 and lo > -700.0:
        lo -= 5.0
    while f(hi) > 0 and hi < 700.0:
        hi += 5.0
    s = None
    if f(lo) >= 0 >= f(hi):
        from scipy import optimize
        log_s = optimize.brentq(f, lo, hi, xtol=1e-14, rtol=1e-14, maxiter=500)
        error = _log_gaussian_delta_error(math.exp(log_s), epsilon)
        if error <= _GAUSSIAN_DELTA_RTOL:
            # Brent's root may sit on the unsafe side: up until δ(σ)·(1 + error) ≤ δ.
            step = max(error, 4.0 * np.finfo(np.float64).eps)
            for _ in range(60):
                if f(log_s) <= -2.0 * error:
                    s = math.exp(log_s)
                    break
                log_s += step
                step *= 2.0
    if s is None:
        s = _conservative_gaussian_sigma(epsilon, delta)
    sigma = s * l2_sensitivity
    if not (math.isfinite(sigma) and sigma > 0):
        raise ParameterError.worded(
            "epsilon", f"the Gaussian noise for epsilon = {epsilon:g}, delta = {delta:g} and "
            f"l2_sensitivity = {l2_sensitivity:g} has sigma = {sigma:g}, not a positive finite "
            "float: raise epsilon or delta, or lower the sensitivity")
    return sigma


def _log_zcdp_delta(rho: float, epsilon: float) -> float:
    """log δ*(ρ, ε) of dp-sips Lemma 8, minimised over α in log space."""

    def log_obj(u: float) -> float:
        # ln of the objective at α = 1 + u, without cancellation (numerics.md).
        lead = u * ((rho - epsilon) + u * rho)
        if u < 1.0:
            return lead + u * math.log(u) - (1.0 + u) * math.log1p(u)
        return lead - math.log(u) - (1.0 + u) * math.log1p(1.0 / u)

    # A bracket around α = (ε + ρ)/(2ρ) on t = log(α − 1), where it is unimodal.
    centre = max((epsilon + rho) / (2.0 * rho), 1.0 + 1e-6)
    lowest = 1e-9
    if epsilon > rho:
        lowest = min(lowest, 1e-3 * (epsilon - rho) / (2.0 * rho))
    lo, hi = math.log(lowest), math.log(max(10.0 * centre, 10.0))
    from scipy import optimize
    with np.errstate(over="ignore", invalid="ignore"):
        res = optimize.minimize_scalar(lambda t: log_obj(math.exp(t)), bounds=(lo, hi),
                                       method="bounded", options={"xatol": 1e-12, "maxiter": 1000})
    if not math.isfinite(res.fun) and res.fun != -math.inf:
        return 0.0  # no α is evaluable: δ* ≤ 1 is all that is known
    return min(0.0, float(res.fun))


def zcdp_delta_for_epsilon(rho: float, epsilon: float) -> float:
    """δ*(ρ, ε): the δ at which pure ρ-zCDP implies (ε, δ)-DP.

    δ = inf_{α>1} exp((α−1)(αρ − ε)) / (α−1) · (1 − 1/α)^α (dp-sips Lemma 8; CKS 2020, Prop. 7).
    """
    rho = checks.positive("rho", rho)
    epsilon = checks.positive("epsilon", epsilon)
    return math.exp(_log_zcdp_delta(rho, epsilon))


# Beyond this ρ Lemma 8's terms reach ρ·ulp: the rounded-up Bun–Steinke bound is used.
_LARGEST_RESOLVED_RHO = 1e12


def _log_conversion_target(delta_cdp: float, delta_dp: float) -> float:
    """ln((δ_DP − δ_CDP)/(1 − δ_CDP)), the δ* a conversion must meet."""
    if delta_dp <= delta_cdp:
        raise ParameterError("delta_dp", f"must exceed delta_cdp ({delta_cdp!r}) to convert, "
                                         f"got {delta_dp!r}")
    return math.log((delta_dp - delta_cdp) / (1.0 - delta_cdp))


def zcdp_to_dp(rho: float, delta_cdp: float, delta_dp: float) -> float:
    """The smallest ε such that δ_CDP-approximate ρ-zCDP implies (ε, δ_DP)-DP.

    Solves δ_CDP + (1 − δ_CDP)·δ*(ρ, ε) = δ_DP (dp-sips Corollary 9; App. B, Tables 4–5).

    Args:
      rho: ρ > 0 of the zCDP guarantee.
      delta_cdp: δ_CDP in [0, 1), its approximation slack.
      delta_dp: δ_DP of the (ε, δ)-DP statement, larger than ``delta_cdp``.

    Returns:
      ε.
    """
    rho = checks.positive("rho", rho)
    # δ_CDP = 0 is pure ρ-zCDP (Corollary 9 then is Lemma 8 alone).
    delta_cdp = 0.0 if delta_cdp == 0 else checks.probability("delta_cdp", delta_cdp)
    delta_dp = checks.probability("delta_dp", delta_dp)
    log_target = _log_conversion_target(delta_cdp, delta_dp)

    def f(eps: float) -> float:
        return _log_zcdp_delta(rho, eps) - log_target

    # Bun & Steinke 2016 Prop. 1.3, moved up past its rounding: brackets the root.
    classic = (rho + 2.0 * math.sqrt(rho * -log_target)) * (1.0 + 16.0 * sys.float_info.epsilon)
    lo, hi = min(1e-12, 1e-3 * classic), classic + 10.0
    if not math.isfinite(hi):
        raise ParameterError("rho", f"= {rho:g} is too large: the (epsilon, delta)-DP guarantee "
                                    "it implies has an epsilon beyond float range")
    if rho > _LARGEST_RESOLVED_RHO:
        return classic
    if f(lo) <= 0:
        return lo
    if f(hi) > 0:
        return classic
    from scipy import optimize
    epsilon = float(optimize.brentq(f, lo, hi, xtol=1e-12, rtol=1e-12, maxiter=500))
    # Brent's root may sit on the unsafe side: move up until it is not.
    step = 1e-12
    for _ in range(60):
        if f(epsilon) <= 0:
            return epsilon
        epsilon *= 1.0 + step
        step *= 2.0
    return classic


def _largest_zcdp_rho(epsilon: float, delta_dp: float, delta_cdp: float) -> float:
    """``dp_to_zcdp``'s ρ: the inverse of ``zcdp_to_dp`` (dp-sips Corollary 9; App. B, Table 5)."""
    epsilon = checks.positive("epsilon", epsilon)
    delta_dp = checks.probability("delta_dp", delta_dp)
    delta_cdp = checks.probability("delta_cdp", delta_cdp)
    log_target = _log_conversion_target(delta_cdp, delta_dp)

    def f(log_rho: float) -> float:
        return _log_zcdp_delta(math.exp(log_rho), epsilon) - log_target

    def holds(rho: float) -> bool:
        # The guarantee in the form Corollary 9 states it, in floats.
        return delta_cdp + (1.0 - delta_cdp) * math.exp(_log_zcdp_delta(rho, epsilon)) <= delta_dp

    # Bun & Steinke 2016 Prop. 1.3 inverted (√ρ = √(L + ε) − √L): a lower end that holds.
    big_l = -log_target
    classic = epsilon / (math.sqrt(big_l + epsilon) + math.sqrt(big_l)) ** 2 * epsilon
    if not (classic >= 1e-300 and math.isfinite(classic)):
        raise ParameterError(
            "epsilon", f"= {epsilon:g} is too small to convert to zCDP at delta = {delta_dp:g}: "
                       "the largest rho meeting it is below 1e-300")
    lo, hi = math.log(classic), math.log(epsilon) + 5.0
    if not f(lo) <= 0 <= f(hi):
        return classic * (1.0 - 1e-9)
    from scipy import optimize
    log_rho = optimize.brentq(f, lo, hi, xtol=1e-13, rtol=1e-13, maxiter=500)
    # Round conservatively: back off from the root until the guarantee holds.
    rho, step = math.exp(log_rho) * (1.0 - 1e-9), 1e-9
    while step < 0.5:
        if holds(rho):
            return rho
        rho *= 1.0 - step
        step *= 2.0
    return classic * (1.0 - 1e-9)


def zcdp_gaussian_sigma(rho: float, l2_sensitivity: float = 1.0) -> float:
    """σ = Δ/√(2ρ), ρ-zCDP for ℓ2 sensitivity Δ (Bun & Steinke 2016, Prop. 1.6), rounded up.

    Until Δ²/(2σ²) ≤ ρ exactly (numerics.md#zcdp-to-dp-and-back); σ ≤ 0 or not finite as is.
    """
    sigma = l2_sensitivity / math.sqrt(2.0 * rho)
    if not (math.isfinite(sigma) and sigma > 0.0):
        return sigma
    paid_for = Fraction(l2_sensitivity) ** 2 / (2 * Fraction(rho))
    return nudged(sigma, lambda s: Fraction(s) ** 2 >= paid_for, math.inf)


def zcdp_laplace_epsilon(rho: float) -> float:
    """ε = √(2ρ), at which ε-DP implies ρ-zCDP (Bun & Steinke 2016, Prop. 1.4), rounded down."""
    epsilon = math.sqrt(2.0 * rho)
    if not (math.isfinite(epsilon) and epsilon > 0.0):
        return epsilon
    return nudged(epsilon, lambda e: Fraction(e) ** 2 <= 2 * Fraction(rho), -math.inf)


def sqrt_rounded_up(n: int) -> float:
    """√n rounded up to the first float whose square is at least n (an ℓ2 sensitivity)."""
    return nudged(math.sqrt(n), lambda root: Fraction(root) ** 2 >= n, math.inf)
