"""Floats on the safe side of an exact bound (beam_dpsu.core.exact_floats)."""

import math
from fractions import Fraction

import pytest

from beam_dpsu.core.exact_floats import nudged, rounded_down, rounded_up


@pytest.mark.parametrize("value", [Fraction(1, 10), Fraction(2, 3), Fraction(-1, 3),
                                   Fraction(10 ** 30 + 1), Fraction(1, 10 ** 300)])
def test_rounded_down_and_up_are_the_floats_either_side_of_the_value(value):
    down, up = rounded_down(value), rounded_up(value)
    assert Fraction(down) <= value <= Fraction(up)
    # The nearest such floats: the next one out is on the wrong side.
    assert Fraction(math.nextafter(down, math.inf)) > value
    assert Fraction(math.nextafter(up, -math.inf)) < value


def test_a_float_value_is_its_own_rounding():
    assert rounded_down(Fraction(0.1)) == rounded_up(Fraction(0.1)) == 0.1


def test_nudged_keeps_a_value_that_holds_and_moves_one_that_does_not():
    assert nudged(1.0, lambda x: x >= 1.0, math.inf) == 1.0
    # 1/√0.6 to nearest is below the exact σ of ρ = 0.3: one float up meets it.
    nearest = 1.0 / math.sqrt(0.6)
    moved = nudged(nearest, lambda s: 2 * Fraction(s) ** 2 * Fraction(0.3) >= 1, math.inf)
    assert moved == math.nextafter(nearest, math.inf)
