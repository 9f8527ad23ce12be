"""The exact δ of the Gaussian mechanism: the oracle the calibration tests check σ against."""

import math

from beam_dpsu.core import checks
from beam_dpsu.core.gaussian import _log_gaussian_delta


def gaussian_mechanism_delta(sigma: float, epsilon: float, l2_sensitivity: float = 1.0) -> float:
    """The exact δ at which N(0, σ²) noise for L2 sensitivity Δ is (ε, δ)-DP (dpsu Prop. 2.2;
    Balle & Wang 2018, Theorem 8)."""
    sigma = checks.positive("sigma", sigma)
    epsilon = checks.positive("epsilon", epsilon)
    l2_sensitivity = checks.positive("l2_sensitivity", l2_sensitivity)
    return math.exp(_log_gaussian_delta(sigma, epsilon, l2_sensitivity))
