"""Noise tails in high precision (mpmath), for release chances checked against δ in
exact arithmetic: the float error of a threshold is ~1e-14 relative, far above
``DIGITS`` digits."""

import mpmath

# The working precision of the checks (``with mpmath.workdps(DIGITS):``).
DIGITS = 50


def gaussian_sf(z):
    """P[N(0, 1) > z]."""
    return mpmath.ncdf(-z)


def laplace_sf(z):
    """P[Lap(0, 1) > z]."""
    return mpmath.mpf(0.5) * mpmath.exp(-z) if z >= 0 else 1 - mpmath.mpf(0.5) * mpmath.exp(z)
