"""Floats on the safe side of an exact bound.

A float computed to nearest can land a few ulps on the wrong side of what the
proof needs (a part summing past its total, a σ below what its ρ pays for).
These move it, one float at a time, to the first that meets the bound exactly,
checked with ``Fraction`` (docs/privacy.md, invariant 4).
"""

from __future__ import annotations

import math
import sys
from fractions import Fraction
from typing import Callable

__all__ = ["LARGEST_FLOAT", "nudged", "rounded_down", "rounded_up"]

LARGEST_FLOAT = Fraction(sys.float_info.max)


def nudged(value: float, holds: Callable[[float], bool], toward: float) -> float:
    """``value`` moved one float at a time toward ``toward`` until ``holds(value)``."""
    while not holds(value):
        value = math.nextafter(value, toward)
    return value


def rounded_down(value: Fraction) -> float:
    """The largest float at most ``value`` (``float()`` rounds to nearest)."""
    return nudged(float(value), lambda result: Fraction(result) <= value, -math.inf)


def rounded_up(value: Fraction) -> float:
    """The smallest float at least ``value``."""
    return nudged(float(value), lambda result: Fraction(result) >= value, math.inf)
