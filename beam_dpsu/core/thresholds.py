"""Release thresholds ρ of every mechanism, as pure functions.

Each function cites the theorem it implements; ``tests/test_thresholds.py``
checks them against the golden values of docs/privacy.md and the papers. All
quantities of the form (1 − δ)^{1/t} are evaluated as 1 − q with
q = −expm1(log1p(−δ)/t), which keeps full precision for δ down to 1e-300
(the naive power rounds to exactly 1 for δ < 1e-16); where q itself
underflows (δ = 1e-300, t near 2^63) its logarithm is used instead.

Notation: λ Laplace scale, σ Gaussian standard deviation, Δ0 the maximum
number of items a user contributes, t ranges over 1..Δ0.
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

__all__ = [
    "count_laplace_threshold",
    "count_gaussian_threshold",
    "weighted_laplace_threshold",
    "weighted_gaussian_threshold",
    "gw_threshold",
    "gw_release_probability",
    "policy_cutoff",
    "descent_cutoff_limit",
    "DESCENT_NORMS",
    "dpne_level_threshold",
    "truncated_geometric_crossovers",
    "truncated_geometric_float_margin",
    "truncated_geometric_keep_probability",
    "truncated_geometric_recursion",
]


def _positive(name: str, value: float) -> float:
    return checks.positive(name, value, strict=False)


def _probability(delta: float) -> float:
    return checks.probability("delta", delta, strict=False)


def _one_minus_root(delta: float, t: np.ndarray) -> np.ndarray:
    """1 − (1 − δ)^{1/t}, accurately."""
    return -np.expm1(np.log1p(-delta) / t)


def _log_one_minus_root(delta: float, t: np.ndarray, q: np.ndarray) -> np.ndarray:
    """ln q for q = ``_one_minus_root(delta, t)``, also where q is subnormal or 0.

    With y = −ln(1 − δ)/t, q = 1 − e^{−y} = y·(1 − y/2 + …); below the smallest
    normal float (y < 2.2e-308, e.g. δ = 1e-300 and t = 2^63) ln q = ln y to
    within y/2, and ln y = ln(−ln(1 − δ)) − ln t needs no underflowing value.
    """
    underflow = q < np.finfo(np.float64).tiny
    safe_q = np.where(underflow, 1.0, q)
    return np.where(underflow, math.log(-math.log1p(-delta)) - np.log(t), np.log(safe_q))


def _laplace_tail_quantile(delta: float, t: np.ndarray) -> np.ndarray:
    """ln(1 / (2(1 − (1 − δ)^{1/t}))): the Laplace(1) quantile t items stay below w.p. 1 − δ."""
    q = _one_minus_root(delta, t)
    if np.any(q < np.finfo(np.float64).tiny):
        return -(math.log(2.0) + _log_one_minus_root(delta, t, q))
    return -np.log(2.0 * q)


def _gaussian_tail_quantile(delta: float, t: np.ndarray) -> np.ndarray:
    """Φ⁻¹((1 − δ)^{1/t}) = −Φ⁻¹(1 − (1 − δ)^{1/t}); from ln q (``ndtri_exp``) if q underflows."""
    from scipy import special
    q = _one_minus_root(delta, t)
    if np.any(q < np.finfo(np.float64).tiny):
        return -special.ndtri_exp(_log_one_minus_root(delta, t, q))
    return -special.ndtri(q)


# The weighted thresholds are max over t = 1..Δ0 of f(t); f is evaluated at
# t = 1.._EXACT_ITEMS and at Δ0 only (see ``_candidate_items``).
_EXACT_ITEMS = 64


def _candidate_items(max_items_per_user: int) -> np.ndarray:
    """The t at which max_{1 ≤ t ≤ Δ0} f(t) of a weighted threshold is attained.

    Both f_Lap(t) = 1/t + λ·ln(1/(2q(t))) and f_G(t) = 1/√t + σ·Φ⁻¹(1 − q(t)),
    q(t) = 1 − (1 − δ)^{1/t} = 1 − e^{−L/t} with L = −ln(1 − δ) > 0, are
    quasi-convex on real t ≥ 1 (their derivative changes sign at most once,
    from − to +), so the maximum over 1..Δ0 is max(f(1), f(Δ0)):

    * Laplace: f′(t) = (1/t)·(λ·x/(eˣ − 1) − 1/t) with x = L/t. x/(eˣ − 1)
      decreases in x, so increases in t, as does −1/t: the bracket increases.
    * Gaussian: with z = Φ⁻¹(1 − q), t^{3/2}·f′(t) = −½ + σ·√L·K(x), where
      K(x) = √x·e^{−x}/φ(z) and Φ(z) = e^{−x}. d ln K/dx = 1/(2x) − 1 − z·Φ(z)/φ(z)
      < 0 for every z (x = −ln Φ(z)): as z → −∞ both sides tend to 1/z² and
      the right side exceeds the left by ≈ (2 ln|z| + ln 2π − 3)/z⁴ > 0, as
      z → +∞ the right side is about twice the left; in between it is checked
      on a fine grid of z in ``tests/test_parameter_extremes.py``. So K
      decreases in x, i.e. increases in t.

    This covers dpsu Theorems 4.1/B.1 (ρ_Lap), 5.1/B.2 (ρ_Gauss) and each round
    of dp-sips Theorem 1. For robustness the first ``_EXACT_ITEMS`` t are all
    evaluated too (where f is tabulated exactly as before), and Δ0 is rounded
    up, never down, to a float (f increases at Δ0 whenever f(Δ0) is the max).
    No array of length Δ0 is built, so Δ0 may be as large as 2^63 − 1.
    """
    d0 = checks.max_items(max_items_per_user)
    head = np.arange(1, min(d0, _EXACT_ITEMS) + 1, dtype=np.float64)
    if d0 <= _EXACT_ITEMS:
        return head
    return np.append(head, rounded_up(Fraction(d0)))


def _sum_rounded_up(head: np.ndarray | float, tail: np.ndarray | float) -> np.ndarray:
    """head + tail in floats, moved up one ulp where rounding went down.

    A threshold must not sit below its real value by more than a sliver of
    the noise scale. When the noise term is far below the ulp of 1/t (huge ε:
    1 + 1e-298 rounds to 1), round-to-nearest could put ρ at the item's own
    weight, released with probability ½. Knuth's TwoSum gives the exact
    rounding error; a positive one means the float sum is too small.
    """
    with np.errstate(over="ignore", invalid="ignore"):  # ±inf stays, for the caller to refuse
        total = head + tail
        head_part = total - tail
        tail_part = total - head_part
        error = (head - head_part) + (tail - tail_part)
        return np.where(np.isfinite(total) & (error > 0), np.nextafter(total, np.inf), total)


# The closed-form thresholds are moved up _ULPS_UP ulps: float error (the quantile
# functions, 1/√t, the sum) otherwise let the lone-user release chance exceed δ by
# up to ~1.2e-14 relative, in exact arithmetic (docs/privacy.md, invariant 3). One
# ulp of ρ lowers that chance by about z·ulp(ρ)/σ relative (~5e-15 at the worst cases
# known); with three, 300 random (σ ∈ [0.01, 50], δ ∈ [1e-14, 0.25], Δ0 ≤ 64) are all at
# least 1.7e-15 relative below δ (50-digit check, as in tests/core/test_thresholds.py).
_ULPS_UP = 3


def _moved_up(value) -> float:
    """``value`` (a float or 0-d array) ``_ULPS_UP`` ulps up: ρ on the safe side."""
    value = float(value)
    for _ in range(_ULPS_UP):
        value = math.nextafter(value, math.inf)
    return value


def _finite_threshold(value: float, scale_name: str, scale: float, delta: float,
                      max_items_per_user: int) -> float:
    """``value`` if finite, else a ValueError that says which parameter is out of range."""
    if not math.isfinite(value):
        raise ParameterError.worded(
            "max_items_per_user",
            f"the release threshold is not a finite float ({scale_name} = {scale:g}, "
            f"delta = {delta:g}, max_items_per_user = {max_items_per_user}): the noise is "
            "too large for float64; raise epsilon (or rho) or delta, or lower "
            "max_items_per_user")
    return float(value)


def count_laplace_threshold(laplace_scale: float, delta: float, max_items_per_user: int) -> float:
    """ρ for Count Laplace: each user adds 1 to ≤ Δ0 items, noise Lap(λ = Δ0/ε).

    dpsu §1.1 (Korolova et al. 2009; the Δ0 > 1 extension):
    ρ = max_{t ≤ Δ0} 1 + λ·ln(1/(2(1 − (1 − δ)^{1/t}))). The bracket grows with
    t, so the maximum is at t = Δ0.
    """
    lam = _positive("laplace_scale", laplace_scale)
    delta = _probability(delta)
    d0 = checks.max_items(max_items_per_user)
    with np.errstate(over="ignore"):
        value = _moved_up(_sum_rounded_up(
            1.0, lam * _laplace_tail_quantile(delta,
                                              _candidate_items(d0)[-1:]))[0])
    return _finite_threshold(value, "laplace_scale", lam, delta, d0)


def count_gaussian_threshold(sigma: float, delta: float, max_items_per_user: int) -> float:
    """ρ for Count Gaussian: +1 to ≤ Δ0 items, noise N(0, σ²), σ calibrated to L2 = √Δ0.

    dpsu §1.1: ρ = max_{t ≤ Δ0} 1 + σ·Φ⁻¹((1 − δ)^{1/t}), maximal at t = Δ0.
    ``delta`` is the threshold's share (under (ε, δ)-DP chosen by
    ``delta_split.split_delta``; dpsu uses δ/2; all of δ under zCDP).
    """
    sigma = _positive("sigma", sigma)
    delta = _probability(delta)
    d0 = checks.max_items(max_items_per_user)
    with np.errstate(over="ignore"):
        value = _moved_up(_sum_rounded_up(
            1.0, sigma * _gaussian_tail_quantile(delta,
                                                 _candidate_items(d0)[-1:]))[0])
    return _finite_threshold(value, "sigma", sigma, delta, d0)


def weighted_laplace_threshold(laplace_scale: float, delta: float,
                               max_items_per_user: int) -> float:
    """ρ_Lap for Weighted Laplace (+1/|W|) and Policy Laplace, noise Lap(λ).

    dpsu Theorem 4.1 / Theorem B.1:
    ρ_Lap = max_{1 ≤ t ≤ Δ0} 1/t + λ·ln(1/(2(1 − (1 − δ)^{1/t}))).
    With λ = 1/ε this is the paper's formula; at Δ0 = 1 it equals
    ``gw_threshold(λ, δ, 1)`` = 1 − λ·ln(2δ). The maximum is taken over
    t ≤ 64 and t = Δ0 only (``_candidate_items`` proves that suffices), and
    ρ is rounded up, never down; a ρ that is not a finite float is refused.
    """
    lam = _positive("laplace_scale", laplace_scale)
    delta = _probability(delta)
    d0 = checks.max_items(max_items_per_user)
    t = _candidate_items(d0)
    with np.errstate(over="ignore"):
        value = _moved_up(np.max(_sum_rounded_up(
            1.0 / t, lam * _laplace_tail_quantile(delta, t))))
    return _finite_threshold(value, "laplace_scale", lam, delta, d0)


def weighted_gaussian_threshold(sigma: float, delta: float, max_items_per_user: int) -> float:
    """ρ_Gauss for Weighted Gaussian (+1/√|W|) and Policy Gaussian, noise N(0, σ²).

    dpsu Theorem 5.1 / Theorem B.2 and dp-sips Theorem 1 (App. A):
    ρ = max_{1 ≤ t ≤ Δ0} 1/√t + σ·Φ⁻¹((1 − δ)^{1/t}).
    ``delta`` is the threshold's share: under (ε, δ)-DP chosen by
    ``delta_split.split_delta`` (dpsu prints (1 − δ/2)^{1/t}, the even split),
    the whole δ under δ-approximate zCDP (dp-sips). The maximum is taken over
    t ≤ 64 and t = Δ0 only (``_candidate_items``).
    """
    sigma = _positive("sigma", sigma)
    delta = _probability(delta)
    d0 = checks.max_items(max_items_per_user)
    t = _candidate_items(d0)
    with np.errstate(over="ignore"):
        value = _moved_up(np.max(_sum_rounded_up(
            1.0 / np.sqrt(t), sigma * _gaussian_tail_quantile(delta, t))))
    return _finite_threshold(value, "sigma", sigma, delta, d0)


def _laplace_log_cdf(z: float) -> float:
    """ln P[Lap(0, 1) ≤ z], without cancellation on either side of 0."""
    if z < 0.0:
        return z - math.log(2.0)
    return math.log1p(-0.5 * math.exp(-z))


def _laplace_log_sf(z: float) -> float:
    """ln P[Lap(0, 1) > z], never underflowing."""
    if z > 0.0:
        return -z - math.log(2.0)
    return math.log1p(-0.5 * math.exp(z))


def gw_release_probability(laplace_scale: float, threshold: float, weights) -> float:
    """P[at least one of the keys is released]: 1 − Π_u P[w_u + Lap(λ) ≤ ρ].

    The chance that any of the extra user's own keys (weights ``weights``,
    noised independently) crosses ρ. Exact (Laplace CDF), evaluated in logs.
    """
    lam = _positive("laplace_scale", laplace_scale)
    log_none = math.fsum(_laplace_log_cdf((threshold - float(w)) / lam) for w in weights)
    return -math.expm1(log_none)


def _gw_excess(rho: float, lam: float, max_items: int, log_delta: float
               ) -> tuple[float, float]:
    """(x̂, B): x̂ the float value of x = ln P(ρ) − ln δ, P(ρ) the chance that some
    worst-case key of ``gw_threshold`` is released, and B ≥ |x̂ − x|.

    B assumes correctly rounded basic operations and exp, expm1, log, log1p within
    2 ulps (4u relative, u = 2^-53). The arguments z = (ρ − w)/λ carry 2u·|z|, which
    moves ln P(z) by at most 3.1u·|z| + 10u; ln(Δ0 − 1), ln δ and the final
    log carry at most 4u of their size each, the sums and logaddexp a few u more.
    The constants below are twice those sums.
    """
    log_zero_keys = math.log(max_items - 1) if max_items > 1 else -math.inf
    z1, z0 = (rho - 1.0) / lam, rho / lam
    log_union = float(np.logaddexp(_laplace_log_sf(z1),
                                   log_zero_keys + _laplace_log_sf(z0)))
    if log_union < -600.0:
        # The union bound Σp ≥ P (an upper bound, exact to a relative e^-600 here,
        # where 1 − Π(1 − p) would underflow: tiny λ or δ, huge Δ0).
        log_chance = log_union
    else:
        log_none = (_laplace_log_cdf(z1) + (max_items - 1) * _laplace_log_cdf(z0))
        log_chance = math.log(-math.expm1(log_none))
    value = log_chance - log_delta
    sizes = (abs(z1) + abs(z0) + abs(log_delta) + abs(log_chance)
             + (abs(log_zero_keys) if max_items > 1 else 0.0))
    return value, _UNIT * (8.0 * sizes + 64.0)


def gw_threshold(laplace_scale: float, delta: float, max_items_per_user: int) -> float:
    """ρ of GW and GW-KT with top-Δ0 lists and every held item noised, noise Lap(λ).

    ρ solves 1 − (1 − p(1))·(1 − p(0))^{Δ0−1} = δ with p(w) = P[w + Lap(λ) > ρ]
    (= ½·e^{−(ρ−w)/λ} for w ≤ ρ): the worst case of the keys only the extra
    user holds, one at weight 1 and Δ0 − 1 at weight 0 (docs/privacy.md, the
    fix of gw §3; proof: docs/explanation/proofs.md#gw-and-gw-kt). At Δ0 = 1 it is
    the published ρ_GW = 1 − λ·ln(2δ) of gw §3 eq. (1); the published GW
    used that with uncapped lists, which is not sound. Solved by Brent's
    method between ρ(Δ0 = 1) (a lower bound: more keys only add release
    chances) and an upper bound found by doubling; the root (and at Δ0 = 1 the
    closed form) is then moved up until the float excess ln P − ln δ plus a bound
    on its float error is ≤ 0 (``_gw_excess``), so P ≤ δ in exact arithmetic.
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
        rho = float(optimize.brentq(excess, rho1, hi, xtol=1e-13,
                                    rtol=4 * np.finfo(float).eps))
    # Up until even the float error cannot put P above δ: one step of λ·(x̂ + B) (the
    # slope of ln P is about −1/λ), at least an ulp, doubling if that falls short.
    for attempt in range(2000):
        value, bound = _gw_excess(rho, lam, d0, log_delta)
        if value + bound <= 0.0:
            return rho
        rho += max(lam * (value + bound), math.ulp(rho)) * 2.0 ** (attempt // 4)
        rho = _finite_threshold(rho, "laplace_scale", lam, delta, d0)
    raise ArithmeticError(  # pragma: no cover
        "gw_threshold: the threshold did not reach the safe side")


#: The descents whose cutoff must keep Σ gap^p finite (``policy_cutoff``), by mechanism
#: name: p = 1 for Policy Laplace's ℓ1-descent, 2 for Policy Gaussian's ℓ2-descent (GW's
#: greedy update sums no gaps).
DESCENT_NORMS: dict[str, int] = {"policy-laplace": 1, "policy-gaussian": 2}


def policy_cutoff(threshold: float, noise_scale: float, alpha: float,
                  max_items_per_user: int | None = None, descent_norm: int | None = None,
                  budget=None) -> float:
    """Γ = ρ + α·scale, the cutoff of the sequential update policies.

    dpsu Algorithm 3 (Γ = ρ_Lap + α·λ) and Algorithm 5 (printed with ρ_Lap; the
    intent, used here, is ρ_Gauss + α·σ; see docs/privacy.md, misprints); gw §3 (Γ ≥ 1 for GW).
    With ``descent_norm`` p (1: ℓ1-descent, 2: ℓ2-descent) and Δ0, Γ must also keep
    the descent finite (``descent_cutoff_limit``): an overflowing Σ gap^p gives every
    increment 0, so nothing would be released.

    Raises:
      ParameterError: about ``alpha``, if Γ is not a finite float or is above that
        limit; the message states the largest α that works. If even α = 0 is above it,
        about the ``budget``'s epsilon or rho (when given) that set the threshold.
    """
    alpha = checks.non_negative("alpha", alpha, strict=False)
    scale = _positive("noise_scale", noise_scale)
    cutoff = float(threshold) + alpha * scale
    if not math.isfinite(cutoff):
        raise ParameterError.worded(
            "alpha", f"the cutoff threshold + alpha * noise scale is not a finite float "
                     f"(alpha = {alpha:g}, noise scale = {noise_scale:g}); lower alpha or "
                     "raise epsilon (or rho)")
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
                                    f"is {too_large}; raise {param} or lower "
                                    "max_items_per_user")
    largest = math.nextafter(min(alpha, (float(limit) - float(threshold)) / scale), math.inf)
    while not fits(largest):
        largest = math.nextafter(largest, 0.0)
    while fits(math.nextafter(largest, math.inf)):
        largest = math.nextafter(largest, math.inf)
    raise ParameterError("alpha", f"= {alpha:g} {what}; the largest value that works here is "
                                  f"{largest!r}")


def descent_cutoff_limit(max_items_per_user: int, descent_norm: int) -> Fraction:
    """The largest cutoff Γ at which a descent over Δ0 items sums Σ gap^p in floats
    without overflow (p = ``descent_norm``: 1 for ℓ1-, 2 for ℓ2-descent).

    Every gap is Γ − H ∈ [0, Γ] (no item is above Γ), so Σ gap^p ≤ Δ0·Γ^p exactly;
    rounding each power and summing n terms adds a relative error below (n + 1)·u,
    u = 2^-53 (Higham, Accuracy and Stability, §4.2). So the float sum is finite when
    Δ0·Γ^p·(1 + (Δ0 + 1)·2^-52) ≤ the largest float, which this Γ meets exactly.
    """
    if descent_norm not in (1, 2):
        raise ParameterError("descent_norm", f"must be 1 or 2, got {descent_norm!r}")
    d0 = Fraction(checks.max_items(max_items_per_user))
    room = Fraction(sys.float_info.max) / (d0 * (1 + (d0 + 1) / 2 ** 52))
    if descent_norm == 1:
        return room
    root = Fraction(math.isqrt(math.floor(room)))  # ⌊√room⌋: Γ = root has Γ² ≤ room
    return root


def dpne_level_threshold(sigma: float, eta: float, n_previous: int, n_valid: int) -> float:
    """ρ_k = σ_k·Φ⁻¹(1 − η·min(1, |S_{k−1}|/|V_k|)) for levels k ≥ 2 of DPNE.

    dpne §2, "Controlling spurious n-grams": with this ρ_k the expected number
    of released k-grams that no user holds is at most η·min(|S_{k−1}|, |V_k|)
    (Proposition 2.2). ρ_k does not affect privacy (Theorem 2.1); it depends
    only on released sets. With no valid k-gram (|V_k| = 0) nothing can be
    released and the threshold is +inf.
    """
    from scipy import special
    sigma = _positive("sigma", sigma)
    eta = checks.probability("eta", eta, strict=False)
    if n_previous < 0 or n_valid < 0:
        raise ParameterError.worded(
            "n_valid", f"set sizes must be >= 0, got {n_previous!r} and {n_valid!r}")
    if n_valid == 0:
        return math.inf
    tail = eta * min(1.0, n_previous / n_valid)
    if tail <= 0.0:
        return math.inf
    return float(sigma * -special.ndtri(tail))


def truncated_geometric_recursion(max_users: int, epsilon: float, delta: float) -> np.ndarray:
    """π(0..max_users) by the defining recursion of the optimal partition selection.

    Desfontaines, Voss, Gipson & Mandayam 2022 ("Differentially private
    partition selection", PoPETs; arXiv 2006.03684), Theorem 1: for a
    partition held by n users each contributing to it alone,
    π(0) = 0, π(n) = min(e^ε·π(n−1) + δ, 1 − e^{−ε}·(1 − π(n−1) − δ), 1)
    is the largest keep probability with which keeping it is (ε, δ)-DP.
    O(max_users); the closed form below is what the mechanism runs.
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

    Desfontaines et al. 2022 Theorem 1. The first branch of the recursion is
    the minimum while π(n−1) ≤ (1 − δ)/(e^ε + 1), which gives
    n1 = 1 + ⌊ln(1 + tanh(ε/2)·(1/δ − 1))/ε⌋; after n1, 1 − π(n) + c shrinks
    by e^{−ε} per user (c = δ/(e^ε − 1)) until π reaches 1 after
    n2 = n1 + ⌊ln(1 + (e^ε − 1)·(1 − π(n1))/δ)/ε⌋; π(n) = 1 for n > n2.
    """
    epsilon, delta = _positive("epsilon", epsilon), _probability(delta)
    n1 = 1 + math.floor(math.log1p(math.tanh(epsilon / 2.0) * (1.0 / delta - 1.0)) / epsilon)
    pi_n1 = delta * math.expm1(n1 * epsilon) / math.expm1(epsilon)
    n2 = n1 + math.floor(math.log1p(math.expm1(epsilon) * (1.0 - pi_n1) / delta) / epsilon)
    return n1, n2


def truncated_geometric_keep_probability(n, epsilon: float, delta: float) -> np.ndarray:
    """π(n) in closed form, vectorised over n (Desfontaines et al. 2022 Theorem 1).

    π(n) = 0 for n ≤ 0; δ·(e^{nε} − 1)/(e^ε − 1) for 0 < n ≤ n1;
    1 + c − e^{−(n−n1)ε}·(1 − π(n1) + c) with c = δ/(e^ε − 1) for n1 < n ≤ n2;
    1 for n > n2 (``truncated_geometric_crossovers`` gives n1, n2). This is
    the (ε, δ)-DP optimum for users who each hold the partition once; with Δ0
    partitions per user the caller passes (ε/Δ0, δ/Δ0).
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


# The unit roundoff of float64: a correctly rounded operation errs by at most this, relative.
_UNIT = 2.0 ** -53


def truncated_geometric_float_margin(epsilon: float, delta: float) -> float:
    """m such that the keep chances as run at (ε, δ − m) meet (ε, δ) in exact arithmetic.

    The chance as run is p(n) = ⌈π̂(n)·2^53⌉/2^53 (numpy's 53-bit uniform U, kept iff
    U < π̂(n)), π̂ the float closed form of ``truncated_geometric_keep_probability`` at
    δ″ = δ − m ≥ δ/2 (callers refuse a larger m). With E ≥ |π̂(n) − π*(n)| for every
    n, π* the exact optimum at (ε, δ″), p(n) ≤ e^ε·p(n−1) + δ″ + E + e^ε·E + 2^-53 and
    1 − p(n−1) ≤ e^ε·(1 − p(n)) + δ″ + E + e^ε·(E + 2^-53), so
    m = (1 + e^ε)·E + e^ε·2^-53 suffices. E is bounded with u = 2^-53, every basic
    operation correctly rounded and exp, expm1, log1p and tanh within 2 ulps (4u
    relative; glibc and numpy document at most 1), L = 2ε + ln(1 + 2·tanh(ε/2)/δ) ≥ n1·ε
    (the floor of n1 may err by one) and c = δ/(e^ε − 1):

    * n ≤ n1: δ″·expm1(fl(nε))/expm1(ε) errs by at most (nε + 11)·u relative (the
      rounding of nε moves expm1 by (nε + 1)·u; two function calls, two roundings),
      and π*(n) ≤ π*(n1) ≤ e^ε/(1 + e^ε) + δ;
    * n1 < n ≤ n2: 1 + c − e^{−kε}·(1 − π̂(n1) + c) adds at most 20·(1 + c)·u to the
      error of π̂(n1) (kε·e^{−kε} ≤ 1/e);
    * a crossover n1 off by one (near a tie of the two branches) uses a branch
      higher than the other by at most (5L + 8)·u·min(1, ε), and n2 off by one
      moves π to 1 at most (δ + c)·(5L2 + 10)·u early, L2 = ln(1 + 2(e^ε − 1)/δ).

    ``tests/core/test_truncated_geometric.py`` checks the chances as run against
    (ε, δ) exactly over the whole range of n. Returns +inf where e^ε overflows.
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
    # The bound's own float evaluation: a relative 1e-9 is far above its rounding.
    return ((1.0 + grow) * error + grow * _UNIT) * (1.0 + 1e-9)
