"""The total (ε, δ) of a selection composed with the counts of what it released.

Tight for the mechanisms as run, never above basic composition: closed forms, or
Google's ``dp-accounting`` privacy-loss distribution (PLD) accountant for discrete
Gaussian counts. Proof: docs/explanation/proofs.md#selection-composed-with-its-counts.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np
# scipy: imported where it is used (beam_dpsu.core's docstring says why).

from beam_dpsu.core import checks
from beam_dpsu.core.checks import ParameterError

__all__ = ["ComposedGuarantee", "composed_delta", "composed_epsilon", "composed_guarantee",
           "composed_guarantees_at", "gaussian_composition_mu", "VALUE_DISCRETIZATION_INTERVAL",
           "MAX_PLD_COUNTS"]

#: The PLD grid step (in privacy loss). Pessimistic rounding over-states each
#: loss by < one step; Δ0-fold compositions by < Δ0 steps (ε + 0.01 at Δ0 = 100).
VALUE_DISCRETIZATION_INTERVAL = 1e-4
# Relative margin on the δ target when solving for ε (floating point of the δ sums).
_DELTA_MARGIN = 1e-9
# The binomial loss of discrete Laplace counts is kept on at most this many points.
_MAX_POINTS = 4001
#: dp-accounting composes at most this many counts (about 1 s); beyond, discrete
#: Gaussian counts get no tight statement (the zCDP sum stands).
MAX_PLD_COUNTS = 1000
# Added to dp-accounting's composed δ, which can fall ~1e-16 (absolute) below the
# true δ (a reported ε at δ = 2e-10 had a true δ of 2.00000095e-10).
_PLD_ABSOLUTE_SLACK = 1e-14


# --- the parts' privacy-loss pairs ----------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Gaussian:
    """The Gaussian pair N(0, 1) vs N(μ, 1)."""
    mu: float


@dataclasses.dataclass(frozen=True)
class _Discrete:
    """A finite privacy-loss distribution: loss[k] with probability prob[k] (under P)."""
    loss: np.ndarray
    prob: np.ndarray


@dataclasses.dataclass(frozen=True)
class _DiscreteGaussianCounts:
    """Δ0 counts, each moved by 1, with discrete Gaussian noise of parameter σ."""
    sigma: float
    coordinates: int


def gaussian_composition_mu(sigmas, sensitivities=None) -> float:
    """μ of the composition of Gaussian mechanisms: μ² = Σ (Δ_r/σ_r)² (DRS 2022, Cor. 3.3)."""
    sigmas = np.asarray(sigmas, dtype=np.float64)
    sens = np.ones_like(sigmas) if sensitivities is None else np.asarray(sensitivities, float)
    if sigmas.size == 0 or np.any(~np.isfinite(sigmas)) or np.any(sigmas <= 0):
        raise ParameterError("sigmas", "must be finite and > 0")
    return math.hypot(*(sens / sigmas))  # scaled: no overflow of (Δ/σ)²


def _randomized_response(epsilon: float) -> _Discrete:
    """The pair that dominates every pure ε-DP mechanism: loss ±ε."""
    p_plus = 1.0 / (1.0 + math.exp(-epsilon))
    return _Discrete(np.array([epsilon, -epsilon]), np.array([p_plus, 1.0 - p_plus]))


def _selection_pair(selection):
    """(pair, threshold δ, description) of a selection calibration, or None if unknown."""
    from beam_dpsu.core.budgets import Budget  # no import cycle at module load
    parts = list(getattr(selection, "rounds", None) or [selection])
    noises = {getattr(part, "noise", None) for part in parts}
    if noises == {"gaussian"}:
        mu = gaussian_composition_mu([p.noise_scale for p in parts], [p.sensitivity for p in parts])
        what = ("Gaussian" if len(parts) == 1 else
                f"{len(parts)} Gaussian rounds = one Gaussian (μ² = Σ μ_r²)")
        return _Gaussian(mu), float(sum(p.threshold_delta for p in parts)), f"{what}, mu = {mu:.6g}"
    if noises == {"laplace"}:
        eps = sum(p.sensitivity / p.noise_scale for p in parts)
        return _randomized_response(eps), float(sum(p.threshold_delta for p in parts)), \
            f"Laplace, bounded by its pure epsilon = {eps:.6g} (randomized response)"
    budget = getattr(selection, "budget", None)
    if isinstance(budget, Budget):
        return _randomized_response(budget.epsilon), budget.delta, \
            f"(epsilon, delta)-DP selection, epsilon = {budget.epsilon:.6g} (randomized response)"
    return None


def _binomial_rounded_up(n: int, p: float) -> tuple[np.ndarray, np.ndarray]:
    """K ~ Binomial(n, p) on ≤ ``_MAX_POINTS`` points, every move upwards in K
    (docs/explanation/accounting.md#binomial-loss-rounded-up)."""
    from scipy import stats
    if n + 1 <= _MAX_POINTS:
        k = np.arange(n + 1, dtype=np.float64)
        return k, stats.binom.pmf(k, n, p)
    if n > 2 ** 53:  # K no longer exact in floats
        raise ValueError("too many counts for the binomial closed form")
    mean, sd = n * p, math.sqrt(n * p * (1.0 - p))
    lo = max(0, math.floor(mean - 40.0 * sd))
    hi = min(n, math.ceil(mean + 40.0 * sd))
    width = max(1, math.ceil((hi - lo + 1) / (_MAX_POINTS - 2)))
    tops = np.minimum(np.arange(lo + width - 1, hi + width, width, dtype=np.float64), hi)
    bottoms = np.concatenate([[lo], tops[:-1] + 1])
    # P[bottom ≤ K ≤ top] = sf(bottom − 1) − sf(top); the mass below lo joins the first bin.
    mass = stats.binom.sf(bottoms - 1, n, p) - stats.binom.sf(tops, n, p)
    mass[0] += stats.binom.cdf(lo - 1, n, p)
    if not np.all(np.isfinite(mass)):
        raise ValueError("binomial masses out of floating-point range")
    mass = np.maximum(mass, 0.0)
    k = np.concatenate([tops, [float(n)]])
    prob = np.concatenate([mass, [max(0.0, 1.0 - float(np.sum(mass)))]])
    return k, prob


def _counts_pair(counts):
    """(pair, description) of the counts: Δ0 coordinates each moved by 1."""
    from beam_dpsu.core.discrete_noise import DiscreteGaussian, DiscreteLaplace
    d0 = int(counts.max_items_per_user)
    if isinstance(counts.noise, DiscreteLaplace):
        a = 1.0 / float(counts.noise.scale)
        try:
            k, prob = _binomial_rounded_up(d0, 1.0 / (1.0 + math.exp(-a)))
        except ValueError:  # beyond floats: the counts' pure ε = Δ0·a bounds them
            return _randomized_response(d0 * a), \
                f"{d0} counts with discrete Laplace, bounded by their pure epsilon {d0 * a:.6g}"
        return _Discrete(a * (2.0 * k - d0), prob), \
            f"{d0} counts with discrete Laplace (a = {a:.6g}): binomial loss"
    if isinstance(counts.noise, DiscreteGaussian):
        if d0 > MAX_PLD_COUNTS:
            raise ValueError(f"no privacy-loss accounting for more than "
                             f"{MAX_PLD_COUNTS} discrete Gaussian counts")
        return _DiscreteGaussianCounts(counts.noise.sigma, d0), \
            f"{d0} counts with discrete Gaussian (sigma = {counts.noise.sigma:.6g})"
    raise TypeError(f"unknown counts noise {type(counts.noise).__name__}")


@functools.cache
def _discrete_gaussian_tail() -> float:
    """P[|X| > ⌈11.6σ⌉] for X discrete Gaussian: 2Φ(−11.6) (= 2·scipy.stats.norm.sf(11.6))."""
    from scipy import special
    return 2.0 * float(special.ndtr(-11.6))


# --- closed forms -------------------------------------------------------------------

def _gaussian_delta(mu: float, epsilon) -> np.ndarray:
    """δ_G(ε) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ) for real ε (an array), in logs."""
    from scipy import special
    eps = np.asarray(epsilon, dtype=np.float64)
    l1 = special.log_ndtr(mu / 2.0 - eps / mu)
    l2 = special.log_ndtr(-mu / 2.0 - eps / mu)
    diff = np.minimum(eps + l2 - l1, -1e-300)  # < 0 always; guards rounding
    return np.exp(l1) * -np.expm1(diff)


def _closed_form_delta(sel, cnt: _Discrete, epsilon: float) -> float:
    if isinstance(sel, _Gaussian):
        return float(np.sum(cnt.prob * _gaussian_delta(sel.mu, epsilon - cnt.loss)))
    loss = (sel.loss[:, None] + cnt.loss[None, :]).ravel()  # the two losses convolved
    prob = (sel.prob[:, None] * cnt.prob[None, :]).ravel()
    return float(np.sum(prob * -np.expm1(np.minimum(epsilon - loss, 0.0))))


# --- dp-accounting -------------------------------------------------------------------

def _selection_pld(pair, interval: float):
    from dp_accounting.pld import common, privacy_loss_distribution as pld
    if isinstance(pair, _Gaussian):
        return pld.from_gaussian_mechanism(1.0 / pair.mu, sensitivity=1.0,
                                           value_discretization_interval=interval)
    if isinstance(pair, _Discrete) and len(pair.loss) == 2:  # randomized response
        eps = float(pair.loss[0])
        return pld.from_privacy_parameters(common.DifferentialPrivacyParameters(eps, 0.0),
                                           value_discretization_interval=interval)
    raise TypeError("no PLD for this pair")


def _counts_pld(counts, interval: float):
    """The counts' PLD from dp-accounting itself (not from our closed form)."""
    from dp_accounting.pld import privacy_loss_distribution as pld
    from beam_dpsu.core.discrete_noise import DiscreteLaplace
    d0 = int(counts.max_items_per_user)
    if d0 > MAX_PLD_COUNTS:
        raise ValueError(f"no PLD for more than {MAX_PLD_COUNTS} counts")
    if isinstance(counts.noise, DiscreteLaplace):
        one = pld.from_discrete_laplace_mechanism(1.0 / float(counts.noise.scale), sensitivity=1,
                                                  value_discretization_interval=interval)
    else:  # discrete Gaussian (``_counts_pair`` refused any other noise)
        one = pld.from_discrete_gaussian_mechanism(counts.noise.sigma, sensitivity=1,
                                                   value_discretization_interval=interval)
    return one.self_compose(d0) if d0 > 1 else one


def _require_whole_mechanism(selection) -> None:
    """Refuses one part of a mechanism (``part_of``): see ``composed_guarantee``."""
    part_of = getattr(selection, "part_of", None)
    if part_of is not None:
        raise ParameterError.worded(
            "selection", f"this calibration is {part_of}: composed alone it would state a "
                         "guarantee below the mechanism's; compose the whole mechanism's "
                         "calibration (one Gaussian of sigma*) instead")


class _Composition:
    """δ(ε) of the privacy-loss part of selection ∘ counts, by closed form or PLD."""

    def __init__(self, selection, counts, method: str = "auto",
                 interval: float = VALUE_DISCRETIZATION_INTERVAL):
        _require_whole_mechanism(selection)
        checks.one_of("method", method, ("auto", "closed_form", "pld"),
                      "'auto', 'closed_form' or 'pld'")
        found = _selection_pair(selection)
        if found is None:
            raise ValueError("no privacy-loss pair for this selection calibration")
        self.sel, self.threshold_delta, sel_what = found
        self.cnt, cnt_what = _counts_pair(counts)
        closed = isinstance(self.cnt, _Discrete)
        if method == "closed_form" and not closed:
            raise ParameterError.worded(
                "method", "no closed form for discrete Gaussian counts: use method='pld'")
        self.method = "closed_form" if (closed and method != "pld") else "pld"
        self.description = f"selection: {sel_what}; counts: {cnt_what}"
        self._pld = None
        if self.method == "pld":
            self._pld = _selection_pld(self.sel, interval).compose(_counts_pld(counts, interval))

    def loss_delta(self, epsilon: float) -> float:
        if self._pld is not None:
            # dp-accounting truncates the discrete Gaussian's support; and its composition
            # (FFT convolution) is exact only to about 1e-16 in absolute δ: both slacks
            # keep the result an upper bound.
            tail = ((1.0 + math.exp(epsilon)) * self.cnt.coordinates * _discrete_gaussian_tail()
                    if isinstance(self.cnt, _DiscreteGaussianCounts) else 0.0)
            value = float(self._pld.get_delta_for_epsilon(epsilon)) + tail + _PLD_ABSOLUTE_SLACK
        else:
            value = _closed_form_delta(self.sel, self.cnt, epsilon)
        if not math.isfinite(value):  # a NaN would pass every "δ ≤ target" test
            raise ValueError(f"delta at epsilon = {epsilon!r} is not finite")
        return value

    def epsilon(self, loss_delta: float) -> float:
        """The smallest ε (up to 1e-9, rounded up) with loss_delta(ε) ≤ the target."""
        target = loss_delta * (1.0 - _DELTA_MARGIN)
        if self._pld is not None:
            # dp-accounting solves on its grid; step up until our δ (with the
            # truncation slack) is met, so the result is never below the bound.
            eps = max(0.0, float(self._pld.get_epsilon_for_delta(target)))
            step = 1e-9 * max(1.0, eps)
            while self.loss_delta(eps) > target:
                eps += step
                step *= 2.0
            return eps
        lo, hi = 0.0, 1.0
        while self.loss_delta(hi) > target:
            lo, hi = hi, 2.0 * hi
            if hi > 1e4:
                raise ValueError(f"no epsilon below 1e4 reaches delta = {loss_delta!r}")
        if self.loss_delta(lo) <= target:
            return lo
        while hi - lo > 1e-9 * max(1.0, hi):  # δ(ε) is non-increasing: keep the upper end
            mid = 0.5 * (lo + hi)
            lo, hi = (lo, mid) if self.loss_delta(mid) <= target else (mid, hi)
        return hi


def composed_delta(selection, counts, epsilon: float, method: str = "auto") -> float:
    """Total δ at ``epsilon`` of the selection and its counts: δ_loss(ε) + threshold δ
    (``ParameterError`` for one part of a mechanism, as ``composed_guarantee``)."""
    comp = _Composition(selection, counts, method)
    return min(1.0, comp.loss_delta(float(epsilon)) + comp.threshold_delta)


def composed_epsilon(selection, counts, delta: float, method: str = "auto") -> float:
    """Total ε at total ``delta``: the ε at δ − threshold δ of the privacy-loss part.

    Raises ``ValueError`` if ``delta`` is at most the threshold δ, or for one part of a mechanism.
    """
    comp = _Composition(selection, counts, method)
    loss_delta = float(delta) - comp.threshold_delta
    if not loss_delta > 0:
        raise ParameterError("delta", f"= {delta!r} must exceed the selection's threshold delta "
                                      f"{comp.threshold_delta!r}")
    return comp.epsilon(loss_delta)


@dataclasses.dataclass(frozen=True)
class ComposedGuarantee:
    """The total (ε, δ) of a selection and its counts, tightly accounted.

    Attributes:
      epsilon: min(ε of the tight accounting, ε of basic composition) at ``delta``.
      delta: the total δ it holds at.
      threshold_delta: the selection's lone-user release δ inside ``delta``.
      tight_epsilon: ε of the privacy-loss accounting alone (None with "basic").
      basic_epsilon: ε of basic composition at ``delta``, as the caller gave it.
      method: "closed_form", "pld" (dp-accounting) or "basic" (no δ beyond the thresholds').
      description: the pairs used.
    """

    epsilon: float
    delta: float
    threshold_delta: float
    tight_epsilon: float | None
    basic_epsilon: float | None
    method: str
    description: str

    def to_dict(self) -> dict:
        out = {"epsilon": self.epsilon, "delta": self.delta,
               "threshold_delta": self.threshold_delta, "tight_epsilon": self.tight_epsilon,
               "method": _METHODS[self.method], "pairs": self.description,
               "proof": "docs/explanation/proofs.md#selection-composed-with-its-counts"}
        if self.basic_epsilon is not None:
            out["basic_composition_epsilon"] = self.basic_epsilon
        return out


_METHODS = {"closed_form": "closed form (exact privacy-loss distribution: binomial, Gaussian)",
            "pld": "privacy-loss distribution accountant (dp-accounting, pessimistic rounding)",
            "basic": "basic composition"}


def composed_guarantee(selection, counts, delta: float, basic_epsilon: float | None = None,
                       method: str = "auto") -> ComposedGuarantee | None:
    """The tight total (ε, δ) at total ``delta``, its ε at most ``basic_epsilon``.

    ``basic_epsilon`` (e.g. ε_selection + ε_counts) is the result if all of ``delta`` is
    threshold δ; None if that is None too, or a part has no known pair.

    Raises:
      ParameterError: ``selection`` is one part of a mechanism (``part_of``, e.g. DPNE's
        level 1): μ = 1/σ_1 would state an ε below the mechanism's 1/σ*.
    """
    return composed_guarantees_at(selection, counts, [(delta, basic_epsilon)], method)[0]


def composed_guarantees_at(selection, counts, points, method: str = "auto") -> list:
    """``composed_guarantee`` at each (delta, basic_epsilon) of ``points``, one PLD for all."""
    _require_whole_mechanism(selection)  # before the try: this error is not swallowed
    try:
        comp = _Composition(selection, counts, method)
    except (ValueError, OverflowError, FloatingPointError):
        return [None] * len(points)
    return [_guarantee(comp, delta, basic_epsilon) for delta, basic_epsilon in points]


def _guarantee(comp: _Composition, delta: float, basic_epsilon: float | None
               ) -> ComposedGuarantee | None:
    loss_delta = float(delta) - comp.threshold_delta
    if not loss_delta > 0:
        if basic_epsilon is None:
            return None
        return ComposedGuarantee(
            epsilon=basic_epsilon, delta=float(delta), threshold_delta=comp.threshold_delta,
            tight_epsilon=None, basic_epsilon=basic_epsilon, method="basic",
            description="all of delta is the selection's threshold delta: basic composition")
    try:
        tight = comp.epsilon(loss_delta)
    except (ValueError, OverflowError, FloatingPointError):  # e.g. ε beyond 1e4
        return None
    if not math.isfinite(tight):
        return None
    return ComposedGuarantee(
        epsilon=tight if basic_epsilon is None else min(tight, basic_epsilon),
        delta=float(delta), threshold_delta=comp.threshold_delta, tight_epsilon=tight,
        basic_epsilon=basic_epsilon, method=comp.method, description=comp.description)
