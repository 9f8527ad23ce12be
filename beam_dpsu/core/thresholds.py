"""Release thresholds ρ of every mechanism, as pure functions.

Each function cites the theorem it implements; ``tests/test_thresholds.py``
checks them against the golden values of docs/privacy.md and the papers. Every
threshold is rounded up, never down: docs/explanation/numerics.md (notation too).
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction

import numpy as np
# scipy: imported where it is used (beam_dpsu.core's docstring says why).

from beam_dpsu.core import checks
from beam_dpsu.core.checks import ParameterError
from beam_dpsu.core.exact_floats import rounded_up

__all__ = ["count_laplace_threshold", "count_gaussian_threshold", "weighted_laplace_threshold",
           "weighted_gaussian_threshold", "gw_threshold", "gw_release_probability",
           "policy_cutoff", "descent_cutoff_limit", "DESCENT_NORMS", "dpne_level_threshold",
           "truncated_geometric_crossovers", "truncated_geometric_float_margin",
           "truncated_geometric_keep_probability", "truncated_geometric_recursion"]


def _positive(name: str, value: float) -> float:
    return checks.positive(name, value, strict=False)


def _probability(delta: float) -> float:
    return checks.probability("delta", delta, strict=False)


def _tail_quantile(delta: float, t: np.ndarray, gaussian: bool) -> np.ndarray:
    """The quantile of noise(1) that t items stay below w.p. 1 − δ (numerics.md: q underflow)."""
    q = -np.expm1(np.log1p(-delta) / t)
    underflow = q < np.finfo(np.float64).tiny
    log_q = None
    if np.any(underflow):
        log_q = np.where(underflow, math.log(-math.log1p(-delta)) - np.log(t),
                         np.log(np.where(underflow, 1.0, q)))
    if not gaussian:
        return -np.log(2.0 * q) if log_q is None else -(math.log(2.0) + log_q)
    from scipy import special
    return -special.ndtri(q) if log_q is None else -special.ndtri_exp(log_q)


_EXACT_ITEMS = 64


def _candidate_items(d0: int) -> np.ndarray:
    """1..64 and Δ0 (valid), where a weighted threshold's max over t peaks (proof: numerics.md)."""
    head = np.arange(1, min(d0, _EXACT_ITEMS) + 1, dtype=np.float64)
    return head if d0 <= _EXACT_ITEMS else np.append(head, rounded_up(Fraction(d0)))


def _sum_rounded_up(head: np.ndarray | float, tail: np.ndarray | float) -> np.ndarray:
    """head + tail in floats, an ulp up where rounding went down (TwoSum; numerics.md)."""
    with np.errstate(over="ignore", invalid="ignore"):  # ±inf stays, for the caller to refuse
        total = head + tail
        head_part = total - tail
        tail_part = total - head_part
        error = (head - head_part) + (tail - tail_part)
        return np.where(np.isfinite(total) & (error > 0), np.nextafter(total, np.inf), total)


# Float error otherwise lets the lone-user release chance exceed δ by ~1.2e-14
# relative (docs/explanation/numerics.md#thresholds-rounded-up).
_ULPS_UP = 3


def _finite_threshold(value: float, scale_name: str, scale: float, delta: float,
                      max_items_per_user: int) -> float:
    """``value`` if finite, else a ValueError that says which parameter is out of range."""
    if not math.isfinite(value):
        raise ParameterError.worded("max_items_per_user", (
            f"the release threshold is not a finite float ({scale_name} = {scale:g}, delta = "
            f"{delta:g}, max_items_per_user = {max_items_per_user}): the noise is too large for "
            "float64; raise epsilon (or rho) or delta, or lower max_items_per_user"))
    return float(value)


def _threshold(scale: float, delta: float, max_items_per_user: int, gaussian: bool,
               weighted: bool) -> float:
    """max over the candidate t of w(t) + scale·quantile(δ, t), rounded up, checked finite:
    w = 1 at t = Δ0 (Count), else 1/t (Laplace) or 1/√t (Gaussian) at every candidate t."""
    scale_name = "sigma" if gaussian else "laplace_scale"
    scale = _positive(scale_name, scale)
    delta = _probability(delta)
    d0 = checks.max_items(max_items_per_user)
    t = _candidate_items(d0) if weighted else _candidate_items(d0)[-1:]
    head = (1.0 / np.sqrt(t) if gaussian else 1.0 / t) if weighted else 1.0
    with np.errstate(over="ignore"):
        quantile = _tail_quantile(delta, t, gaussian)
        value = float(np.max(_sum_rounded_up(head, scale * quantile)))
    for _ in range(_ULPS_UP):  # ρ on the safe side
        value = math.nextafter(value, math.inf)
    return _finite_threshold(value, scale_name, scale, delta, d0)


def count_laplace_threshold(laplace_scale: float, delta: float, max_items_per_user: int) -> float:
    """ρ for Count Laplace: each user adds 1 to ≤ Δ0 items, noise Lap(λ = Δ0/ε).

    ρ = 1 + λ·ln(1/(2(1 − (1 − δ)^{1/Δ0}))) (dpsu §1.1; Korolova et al. 2009).
    """
    return _threshold(laplace_scale, delta, max_items_per_user, gaussian=False, weighted=False)


def count_gaussian_threshold(sigma: float, delta: float, max_items_per_user: int) -> float:
    """ρ for Count Gaussian: +1 to ≤ Δ0 items, noise N(0, σ²), σ calibrated to L2 = √Δ0.

    ρ = 1 + σ·Φ⁻¹((1 − δ)^{1/Δ0}) (dpsu §1.1), δ the threshold's share.
    """
    return _threshold(sigma, delta, max_items_per_user, gaussian=True, weighted=False)


def weighted_laplace_threshold(laplace_scale: float, delta: float,
                               max_items_per_user: int) -> float:
    """ρ_Lap for Weighted Laplace (+1/|W|) and Policy Laplace, noise Lap(λ).

    ρ_Lap = max_{1 ≤ t ≤ Δ0} 1/t + λ·ln(1/(2(1 − (1 − δ)^{1/t}))) (dpsu Theorem 4.1 / B.1).
    """
    return _threshold(laplace_scale, delta, max_items_per_user, gaussian=False, weighted=True)


def weighted_gaussian_threshold(sigma: float, delta: float, max_items_per_user: int) -> float:
    """ρ_Gauss for Weighted Gaussian (+1/√|W|) and Policy Gaussian, noise N(0, σ²).

    ρ = max_{1 ≤ t ≤ Δ0} 1/√t + σ·Φ⁻¹((1 − δ)^{1/t}) (dpsu Theorem 5.1 / B.2; dp-sips
    Theorem 1), δ the threshold's share (dpsu prints the even split δ/2).
    """
    return _threshold(sigma, delta, max_items_per_user, gaussian=True, weighted=True)


def _laplace_log_cdf(z: float) -> float:
    """ln P[Lap(0, 1) ≤ z] (= ln P[Lap(0, 1) > −z]), without cancellation either side of 0."""
    return z - math.log(2.0) if z < 0.0 else math.log1p(-0.5 * math.exp(-z))


def gw_release_probability(laplace_scale: float, threshold: float, weights) -> float:
    """P[at least one of the keys is released]: 1 − Π_u P[w_u + Lap(λ) ≤ ρ], in logs."""
    lam = _positive("laplace_scale", laplace_scale)
    log_none = math.fsum(_laplace_log_cdf((threshold - float(w)) / lam) for w in weights)
    return -math.expm1(log_none)


def _gw_excess(rho: float, lam: float, max_items: int, log_delta: float) -> tuple[float, float]:
    """(x̂, B): x̂ = ln P(ρ) − ln δ in floats, B ≥ its float error (numerics.md)."""
    log_zero_keys = math.log(max_items - 1) if max_items > 1 else -math.inf
    z1, z0 = (rho - 1.0) / lam, rho / lam
    log_union = float(np.logaddexp(_laplace_log_cdf(-z1), log_zero_keys + _laplace_log_cdf(-z0)))
    # Below -600, the union bound Σp ≥ P, where 1 − Π(1 − p) would underflow.
    log_chance = log_union if log_union < -600.0 else math.log(-math.expm1(
        _laplace_log_cdf(z1) + (max_items - 1) * _laplace_log_cdf(z0)))
    value = log_chance - log_delta
    sizes = (abs(z1) + abs(z0) + abs(log_delta) + abs(log_chance)
             + (abs(log_zero_keys) if max_items > 1 else 0.0))
    return value, _UNIT * (8.0 * sizes + 64.0)


def gw_threshold(laplace_scale: float, delta: float, max_items_per_user: int) -> float:
    """ρ of GW and GW-KT with top-Δ0 lists and every held item noised, noise Lap(λ).

    ρ solves 1 − (1 − p(1))·(1 − p(0))^{Δ0−1} = δ, p(w) = P[w + Lap(λ) > ρ]; at Δ0 = 1
    ρ_GW = 1 − λ·ln(2δ) (gw §3 eq. (1)). Derivation: numerics.md#the-gw-threshold.
    """
    lam = _positive("laplace_scale", laplace_scale)
    delta = _probability(delta)
    d0 = checks.max_items(max_items_per_user)
    log_delta = math.log(delta)

    def excess(rho: float) -> float:
        # ln P[some worst-case key released] − ln δ; decreasing in ρ.
        return _gw_excess(rho, lam, d0, log_delta)[0]

    # One key at weight 1 alone is released w.p. δ at ρ1 (the Laplace quantile).
    with np.errstate(over="ignore"):
        rho1 = float(_sum_rounded_up(np.float64(1.0), np.float64(lam) * (
            -math.log(2.0 * delta) if delta <= 0.5 else math.log(2.0 * (1.0 - delta)))))
    rho = _finite_threshold(rho1, "laplace_scale", lam, delta, d0)
    if d0 > 1 and excess(rho1) > 0.0:  # else the zero-weight keys add nothing representable
        step = lam * math.log(d0) + lam
        hi = rho1 + step
        while math.isfinite(hi) and excess(hi) > 0.0:
            step *= 2.0
            hi = rho1 + step
        _finite_threshold(hi, "laplace_scale", lam, delta, d0)
        from scipy import optimize
        rho = float(optimize.brentq(excess, rho1, hi, xtol=1e-13, rtol=4 * np.finfo(float).eps))
    # Up until even the float error cannot put P above δ (the slope of ln P is ~ −1/λ).
    for attempt in range(2000):
        value, bound = _gw_excess(rho, lam, d0, log_delta)
        if value + bound <= 0.0:
            return rho
        rho += max(lam * (value + bound), math.ulp(rho)) * 2.0 ** (attempt // 4)
        rho = _finite_threshold(rho, "laplace_scale", lam, delta, d0)
    raise ArithmeticError(  # pragma: no cover
        "gw_threshold: the threshold did not reach the safe side")


#: p of the descents whose cutoff must keep Σ gap^p finite (``policy_cutoff``), by mechanism.
DESCENT_NORMS: dict[str, int] = {"policy-laplace": 1, "policy-gaussian": 2}


def policy_cutoff(threshold: float, noise_scale: float, alpha: float,
                  max_items_per_user: int | None = None, descent_norm: int | None = None,
                  budget=None) -> float:
    """Γ = ρ + α·scale, the cutoff of the sequential update policies.

    dpsu Algorithms 3 and 5 (whose ρ_Lap is a misprint for ρ_Gauss: docs/privacy.md);
    gw §3. With ``descent_norm`` p and Δ0, Γ must also keep Σ gap^p finite
    (``descent_cutoff_limit``).

    Raises:
      ParameterError: about ``alpha`` (stating the largest α that works) if Γ is not finite
        or above that limit; about the ``budget``'s epsilon or rho if even α = 0 is.
    """
    alpha = checks.non_negative("alpha", alpha, strict=False)
    scale = _positive("noise_scale", noise_scale)
    cutoff = float(threshold) + alpha * scale
    if not math.isfinite(cutoff):
        raise ParameterError.worded("alpha", (
            f"the cutoff threshold + alpha * noise scale is not a finite float (alpha = "
            f"{alpha:g}, noise scale = {noise_scale:g}); lower alpha or raise epsilon (or rho)"))
    if descent_norm is None or max_items_per_user is None:
        return cutoff
    d0 = checks.max_items(max_items_per_user)
    limit = descent_cutoff_limit(d0, descent_norm)
    if Fraction(cutoff) <= limit:
        return cutoff

    def fits(a: float) -> bool:
        return Fraction(float(threshold) + a * scale) <= limit

    gaps = "gaps" if descent_norm == 1 else "squared gaps"
    too_large = (f"too large for the l{descent_norm}-descent over max_items_per_user = {d0} "
                 f"items, whose sum of {gaps} would overflow (the cutoff must be at most "
                 f"{float(limit):.6g})")
    what = f"makes the cutoff threshold + alpha * noise scale = {cutoff:.6g} {too_large}"
    if not fits(0.0):
        param = next((p for p in ("epsilon", "rho") if hasattr(budget, p)), None)
        if param is None:
            raise ParameterError("alpha", f"= {alpha:g} {what}, even at alpha = 0: raise "
                                          "epsilon (or rho) or lower max_items_per_user")
        raise ParameterError(param, f"= {getattr(budget, param)!r} is too small here: the "
                                    f"release threshold {float(threshold):.6g} alone (alpha = 0) "
                                    f"is {too_large}; raise {param} or lower max_items_per_user")
    largest = math.nextafter(min(alpha, (float(limit) - float(threshold)) / scale), math.inf)
    while not fits(largest):
        largest = math.nextafter(largest, 0.0)
    while fits(math.nextafter(largest, math.inf)):
        largest = math.nextafter(largest, math.inf)
    raise ParameterError("alpha", f"= {alpha:g} {what}; the largest value that works here is "
                                  f"{largest!r}")


def descent_cutoff_limit(max_items_per_user: int, descent_norm: int) -> Fraction:
    """The largest Γ at which a descent over Δ0 items sums Σ gap^p in floats without overflow.

    p = ``descent_norm`` (1 or 2). Derivation: docs/explanation/numerics.md#the-descents-cutoff.
    """
    if descent_norm not in (1, 2):
        raise ParameterError("descent_norm", f"must be 1 or 2, got {descent_norm!r}")
    d0 = Fraction(checks.max_items(max_items_per_user))
    room = Fraction(sys.float_info.max) / (d0 * (1 + (d0 + 1) / 2 ** 52))
    if descent_norm == 1:
        return room
    return Fraction(math.isqrt(math.floor(room)))  # ⌊√room⌋: Γ² ≤ room


def dpne_level_threshold(sigma: float, eta: float, n_previous: int, n_valid: int) -> float:
    """ρ_k = σ_k·Φ⁻¹(1 − η·min(1, |S_{k−1}|/|V_k|)) for levels k ≥ 2 of DPNE; +inf if |V_k| = 0.

    dpne §2, Proposition 2.2 (≤ η·min(|S_{k−1}|, |V_k|) spurious k-grams); Theorem 2.1.
    """
    from scipy import special
    sigma = _positive("sigma", sigma)
    eta = checks.probability("eta", eta, strict=False)
    if n_previous < 0 or n_valid < 0:
        raise ParameterError.worded(
            "n_valid", f"set sizes must be >= 0, got {n_previous!r} and {n_valid!r}")
    tail = eta * min(1.0, n_previous / n_valid) if n_valid else 0.0
    if tail <= 0.0:  # no valid k-gram, or none spurious: nothing is released
        return math.inf
    return float(sigma * -special.ndtri(tail))


def truncated_geometric_recursion(max_users: int, epsilon: float, delta: float) -> np.ndarray:
    """π(0..max_users) by the recursion of the optimal partition selection (the closed form runs).

    π(n) = min(e^ε·π(n−1) + δ, 1 − e^{−ε}·(1 − π(n−1) − δ), 1), π(0) = 0 (Desfontaines
    et al. 2022, Theorem 1).
    """
    epsilon, delta = _positive("epsilon", epsilon), _probability(delta)
    checks.at_least("max_users", max_users, 0)
    grow, shrink = math.exp(epsilon), math.exp(-epsilon)
    pi = np.zeros(int(max_users) + 1)
    for n in range(1, len(pi)):
        p = pi[n - 1]
        pi[n] = min(grow * p + delta, 1.0 - shrink * (1.0 - p - delta), 1.0)
    return pi


def truncated_geometric_crossovers(epsilon: float, delta: float) -> tuple[int, int]:
    """(n1, n2): π grows geometrically up to n1, its complement shrinks geometrically up to n2.

    Desfontaines et al. 2022 Theorem 1 (numerics.md#truncated-geometric-keep-probabilities).
    """
    epsilon, delta = _positive("epsilon", epsilon), _probability(delta)
    n1 = 1 + math.floor(math.log1p(math.tanh(epsilon / 2.0) * (1.0 / delta - 1.0)) / epsilon)
    pi_n1 = delta * math.expm1(n1 * epsilon) / math.expm1(epsilon)
    n2 = n1 + math.floor(math.log1p(math.expm1(epsilon) * (1.0 - pi_n1) / delta) / epsilon)
    return n1, n2


def truncated_geometric_keep_probability(n, epsilon: float, delta: float) -> np.ndarray:
    """π(n) in closed form, vectorised over n (Desfontaines et al. 2022 Theorem 1).

    With Δ0, pass (ε/Δ0, δ/Δ0). Formula: numerics.md#truncated-geometric-keep-probabilities.
    """
    epsilon, delta = _positive("epsilon", epsilon), _probability(delta)
    n1, n2 = truncated_geometric_crossovers(epsilon, delta)
    n = np.asarray(n, dtype=np.float64)
    em1 = math.expm1(epsilon)
    c = delta / em1
    pi_n1 = delta * math.expm1(n1 * epsilon) / em1
    low = delta * np.expm1(np.clip(n, 0, n1) * epsilon) / em1
    high = 1.0 + c - np.exp(-np.clip(n - n1, 0, None) * epsilon) * (1.0 - pi_n1 + c)
    pi = np.where(n <= 0, 0.0, np.where(n <= n1, low, np.where(n <= n2, high, 1.0)))
    return np.clip(pi, 0.0, 1.0)


_UNIT = 2.0 ** -53


def truncated_geometric_float_margin(epsilon: float, delta: float) -> float:
    """m such that the keep chances as run at (ε, δ − m) meet (ε, δ) in exact arithmetic.

    +inf where e^ε overflows. Proof: numerics.md#truncated-geometric-keep-probabilities.
    """
    epsilon, delta = _positive("epsilon", epsilon), _probability(delta)
    if epsilon > 700.0:
        return math.inf
    grow = math.exp(epsilon)
    log_top = 2.0 * epsilon + math.log1p(2.0 * math.tanh(epsilon / 2.0) / delta)
    log_end = math.log1p(2.0 * math.expm1(epsilon) / delta)
    c = delta / math.expm1(epsilon)
    top = min(1.0, grow / (1.0 + grow) + delta)
    error = _UNIT * (1.01 * top * (log_top + 11.0) + 20.0 * (1.0 + c)
                     + (5.0 * log_top + 8.0) * min(1.0, epsilon)
                     + (delta + c) * (5.0 * log_end + 10.0))
    # A relative 1e-9 covers the bound's own float evaluation.
    return ((1.0 + grow) * error + grow * _UNIT) * (1.0 + 1e-9)
