"""Exact discrete Laplace and discrete Gaussian samplers on integer randomness.

Published counts must not carry float noise, whose low bits leak the value (Mironov
2012): these samplers (Canonne, Kamath & Steinke 2020, CKS §5, Algorithms 1–3) use only
uniform integers and exact ``Fraction``s (a float parameter converted bit for bit), from
OS randomness unless a test passes its own ``random.Random``.
How they work: docs/explanation/numerics.md#exact-discrete-samplers.
"""

from __future__ import annotations

import dataclasses
import math
import random
from fractions import Fraction

import numpy as np

from beam_dpsu.core import checks

__all__ = ["os_random", "bernoulli_exp", "DiscreteLaplace", "DiscreteGaussian"]


def os_random() -> random.Random:
    """A generator of uniform integers from the operating system's entropy."""
    return random.SystemRandom()


def _bernoulli_exp_int(num: int, den: int, rng) -> bool:
    """Bernoulli(exp(−num/den)) for integers num ≥ 0, den ≥ 1 (CKS Algorithm 1)."""
    if num > den:
        whole, rest = divmod(num, den)
        for _ in range(whole):
            if not _bernoulli_exp_int(1, 1, rng):
                return False
        num = rest
    # γ = num/den ∈ [0, 1]: Bernoulli(γ/k) = [U < num], U uniform on {0,…,den·k − 1}.
    k = 1
    while rng.randrange(den * k) < num:
        k += 1
    return k % 2 == 1


def bernoulli_exp(gamma, rng=None) -> bool:
    """One draw of Bernoulli(exp(−γ)) for rational γ ≥ 0, exactly (CKS Algorithm 1)."""
    gamma = checks.exact_non_negative("gamma", gamma)
    return _bernoulli_exp_int(gamma.numerator, gamma.denominator, rng or os_random())


def _discrete_laplace_int(s: int, t: int, rng) -> int:
    """One draw with P[Y = y] ∝ exp(−|y|·s/t), i.e. scale t/s (CKS Algorithm 2)."""
    while True:
        u = rng.randrange(t)
        if not _bernoulli_exp_int(u, t, rng):
            continue
        v = 0
        while _bernoulli_exp_int(1, 1, rng):
            v += 1
        y = (u + t * v) // s
        negative = rng.randrange(2) == 1
        if negative and y == 0:
            continue
        return -y if negative else y


@dataclasses.dataclass(frozen=True)
class DiscreteLaplace:
    """The discrete Laplace distribution: P[X = x] ∝ exp(−|x|/scale), x ∈ ℤ.

    Scale Δ/ε on an integer query of ℓ1 sensitivity Δ is ε-DP (CKS §1.1, eq. (2)).

    Attributes:
      scale: t > 0, exact (a float is converted to the Fraction it equals).
    """

    scale: Fraction

    def __post_init__(self):
        object.__setattr__(self, "scale", checks.exact_positive("scale", self.scale))

    def sample(self, rng: random.Random | None = None) -> int:
        """One exact draw; OS randomness unless ``rng`` is given (tests only)."""
        return self.samples(1, rng)[0]

    def samples(self, n: int, rng: random.Random | None = None) -> list[int]:
        rng = rng or os_random()
        s, t = self.scale.denominator, self.scale.numerator
        return [_discrete_laplace_int(s, t, rng) for _ in range(n)]

    def pmf(self, x) -> np.ndarray:
        """P[X = x] = (1 − q)/(1 + q)·q^{|x|}, q = exp(−1/scale) (CKS §1.1)."""
        a = 1.0 / float(self.scale)
        x = np.abs(np.asarray(x, dtype=np.float64))
        return np.tanh(a / 2.0) * np.exp(-a * x)

    def cdf(self, x) -> np.ndarray:
        """P[X ≤ x] = q^{−x}/(1 + q) for x < 0, 1 − q^{x+1}/(1 + q) for x ≥ 0."""
        a = 1.0 / float(self.scale)
        x = np.floor(np.asarray(x, dtype=np.float64))
        q = math.exp(-a)
        neg = np.exp(a * np.minimum(x, 0.0)) / (1.0 + q)
        pos = 1.0 - np.exp(-a * (np.maximum(x, 0.0) + 1.0)) / (1.0 + q)
        return np.where(x < 0, neg, pos)

    def variance(self) -> float:
        """Var X = 2q/(1 − q)², q = exp(−1/scale); inf beyond the float range."""
        a = 1.0 / float(self.scale)
        # In logs: (1 − q)² underflows to 0 for a scale above ~1e154.
        log_variance = math.log(2.0) - a - 2.0 * math.log(-math.expm1(-a))
        return math.exp(log_variance) if log_variance < 709.0 else math.inf

    def to_dict(self) -> dict:
        return {"noise": "discrete_laplace", "scale": float(self.scale),
                "scale_exact": str(self.scale), "std": math.sqrt(self.variance())}


@dataclasses.dataclass(frozen=True)
class DiscreteGaussian:
    """The discrete Gaussian: P[X = x] ∝ exp(−x²/(2σ²)), x ∈ ℤ (CKS Definition 1).

    On an integer vector query of ℓ2 sensitivity Δ2 it is (Δ2²/(2σ²))-zCDP (CKS
    Theorem 4, Proposition 3); its variance is below σ² (CKS Proposition 5).

    Attributes:
      sigma_squared: σ² > 0, exact.
    """

    sigma_squared: Fraction

    def __post_init__(self):
        object.__setattr__(self, "sigma_squared", checks.exact_positive("sigma_squared",
                                                              self.sigma_squared))

    @property
    def sigma(self) -> float:
        return math.sqrt(self.sigma_squared)

    def sample(self, rng: random.Random | None = None) -> int:
        """One exact draw (CKS Algorithm 3); OS randomness unless ``rng`` is given."""
        return self.samples(1, rng)[0]

    def samples(self, n: int, rng: random.Random | None = None) -> list[int]:
        rng = rng or os_random()
        a, b = self.sigma_squared.numerator, self.sigma_squared.denominator  # σ² = a/b
        t = math.isqrt(a * b) // b + 1  # ⌊σ⌋ + 1, exactly
        # Accept Y ~ DiscreteLaplace(t) w.p. exp(−(|Y|·t·b − a)² / (2·t²·a·b)).
        den = 2 * t * t * a * b
        out: list[int] = []
        while len(out) < n:
            y = _discrete_laplace_int(1, t, rng)
            if _bernoulli_exp_int((abs(y) * t * b - a) ** 2, den, rng):
                out.append(y)
        return out

    def _support(self) -> np.ndarray:
        # Beyond 40σ + 10 the mass is below e^{−800}: nothing a float can hold.
        reach = int(40 * self.sigma) + 10
        return np.arange(-reach, reach + 1)

    # From σ = 10 on, the normaliser and variance equal their leading terms in float64
    # (Poisson summation; numerics.md): no support array, whose length grows with σ.
    _CLOSED_FORM_SIGMA = 10.0

    def _normaliser(self) -> float:
        s2 = float(self.sigma_squared)
        if self.sigma >= self._CLOSED_FORM_SIGMA:
            return math.sqrt(2.0 * math.pi * s2)
        return float(np.sum(np.exp(-self._support().astype(np.float64) ** 2 / (2.0 * s2))))

    def pmf(self, x) -> np.ndarray:
        """exp(−x²/(2σ²)) / Σ_y exp(−y²/(2σ²)), the normaliser summed numerically."""
        x = np.asarray(x, dtype=np.float64)
        return np.exp(-x ** 2 / (2.0 * float(self.sigma_squared))) / self._normaliser()

    def cdf(self, x) -> np.ndarray:
        """P[X ≤ x], summed over the support."""
        y = self._support()
        cumulative = np.cumsum(self.pmf(y))
        idx = np.searchsorted(y, np.floor(np.asarray(x, dtype=np.float64)), side="right") - 1
        return np.where(idx < 0, 0.0, cumulative[np.clip(idx, 0, len(y) - 1)])

    def variance(self) -> float:
        if self.sigma >= self._CLOSED_FORM_SIGMA:
            return float(self.sigma_squared)
        y = self._support()
        return float(np.sum(self.pmf(y) * y.astype(np.float64) ** 2))

    def to_dict(self) -> dict:
        return {"noise": "discrete_gaussian", "sigma": self.sigma,
                "sigma_squared": float(self.sigma_squared),
                "sigma_squared_exact": str(self.sigma_squared),
                "std": math.sqrt(self.variance())}

