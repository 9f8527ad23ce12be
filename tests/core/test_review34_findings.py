"""Findings of the adversarial privacy review of issue 34, reproduced on the pure core.

* Truncated geometric (docs/privacy.md, "Truncated geometric"): the keep chances as
  run, p(n) = ⌈π(n)·2^53⌉/2^53 (numpy's 53-bit uniform U, kept iff U < π(n)), must
  meet every item's (ε/Δ0, δ/Δ0) in exact arithmetic, at every n.
* GW's threshold (docs/privacy.md, "GW and GW-KT"): the lone-user release chance at
  the returned ρ must not exceed δ in exact arithmetic.
* ``budgets.parts_within`` (docs/privacy.md, invariant 4) returns at once, or raises
  a clear error where no valid part exists.
* Every public entry point of ``beam_dpsu.core.composition`` refuses one part of a
  mechanism (``part_of``; docs/privacy.md, "Selection plus counts").
* DPSU-even's δ split holds exactly: δ_noise + T·δ_k ≤ δ.

Exact arithmetic: Fractions, or mpmath at 50 (60) digits where e^ε or a Laplace tail
enters; the excesses found were 1e-16 to 0.13 relative, far above those digits.
"""

from __future__ import annotations

import contextlib
import math
import random
import signal
from fractions import Fraction

import mpmath
import pytest

from beam_dpsu.core import composition, ngram_calibration, thresholds
from beam_dpsu.core.budgets import Budget, ZCDPBudget, parts_within
from beam_dpsu.core.calibration import truncated_geometric_calibration
from beam_dpsu.core.checks import ParameterError
from beam_dpsu.core.counts_budget import count_calibration, split_selection_and_counts

DIGITS = 50


# --- truncated geometric: the chances as run ---------------------------------------------

def _chance_as_run(pi: float):
    """P[U < π] for U = k/2^53, k uniform on 0..2^53 − 1: ⌈π·2^53⌉/2^53, exactly."""
    return mpmath.mpf(math.ceil(Fraction(float(pi)) * 2 ** 53)) / 2 ** 53


def _worst_item_excess(epsilon: float, delta: float, max_items: int):
    """max over n of the two per-item constraints of Desfontaines et al. 2022 Thm 1 at
    (ε/Δ0, δ/Δ0), relative to δ/Δ0 (> 0: the item is not (ε/Δ0, δ/Δ0)-DP), or None
    when the calibration refuses the budget."""
    try:
        cal = truncated_geometric_calibration(Budget(epsilon, delta), max_items)
    except ParameterError:
        return None
    top = cal.users_kept_surely + 2  # through n2 + 1 (π = 1) and one beyond
    pi = cal.keep_probability(list(range(top)))
    with mpmath.workdps(DIGITS):
        p = [_chance_as_run(x) for x in pi]
        grow = mpmath.exp(mpmath.mpf(epsilon) / max_items)
        slack = mpmath.mpf(delta) / max_items
        worst = max(max(p[n] - grow * p[n - 1] - slack,
                        (1 - p[n - 1]) - grow * (1 - p[n]) - slack) for n in range(1, top))
        return worst / slack


@pytest.mark.parametrize("epsilon, delta, max_items", [
    # accepted today and over (ε/Δ0, δ/Δ0): excess/δ' today in the comment
    (0.5675574532159186, 7.09916630592447e-12, 100),      # 0.009 at n = 4303
    (0.5530868260526131, 4.374937205283161e-12, 100),     # 0.0074 at n = 4496
    (0.018795353465293346, 2.4990205702194975e-13, 10),   # 0.026 at n = 12974
    # the review's cases (δ/Δ0 below 1e-14: refused now, as their float error is ~δ')
    (0.0031090574333643094, 3.578691511399675e-15, 1),    # 0.129 at n = 8696
    (0.4237683499220744, 8.572215400317376e-13, 100),     # 0.050 at n = 6212
    # ordinary and large per-item ε
    (1.0, 1e-5, 10), (3.0, 1e-5, 1), (12.0, 1e-3, 1), (0.05, 1e-9, 3),
])
def test_truncated_geometric_chances_as_run_meet_the_item_budget_exactly(
        epsilon, delta, max_items):
    excess = _worst_item_excess(epsilon, delta, max_items)
    assert excess is None or excess <= 0, f"excess/δ' = {mpmath.nstr(excess, 4)}"


def test_truncated_geometric_chances_as_run_meet_the_item_budget_on_a_random_grid():
    """40 budgets from a fixed seed (ε log-uniform in [0.003, 20], δ in [1e-13, 1e-2],
    Δ0 in {1, 3, 10, 100}); 6 of the 39 checked broke (ε/Δ0, δ/Δ0) before the fix."""
    rng = random.Random(34)
    over, checked = [], 0
    for _ in range(40):
        epsilon, delta = 10 ** rng.uniform(-2.5, 1.3), 10 ** rng.uniform(-13, -2)
        max_items = rng.choice([1, 3, 10, 100])
        cal_top = _users_kept_surely(epsilon, delta, max_items)
        if cal_top is None or cal_top > 20_000:
            continue
        checked += 1
        excess = _worst_item_excess(epsilon, delta, max_items)
        if excess > 0:
            over.append((epsilon, delta, max_items, float(excess)))
    assert checked >= 20 and not over


def _users_kept_surely(epsilon, delta, max_items):
    try:
        return truncated_geometric_calibration(Budget(epsilon, delta), max_items).users_kept_surely
    except ParameterError:
        return None


def test_truncated_geometric_margin_is_small_and_refuses_only_tiny_delta():
    # The margin is a sliver of δ' where δ' is of any use ...
    cal = truncated_geometric_calibration(Budget(1.0, 1e-5), 10)
    assert 1e-6 * (1 - 1e-8) < cal.delta_per_item < 1e-6
    assert Fraction(cal.epsilon_per_item) * 10 <= 1  # ε/Δ0 rounded down, not up
    # ... and only a δ' within a few hundred ulps of 2^-53 is refused.
    truncated_geometric_calibration(Budget(0.01, 5e-14), 1)
    with pytest.raises(ParameterError, match="delta per item .* too small for float64"):
        truncated_geometric_calibration(Budget(0.01, 5e-15), 1)


# --- GW's threshold --------------------------------------------------------------------

def _gw_chance(scale: float, rho: float, max_items: int):
    """1 − (1 − p(1))·(1 − p(0))^{Δ0−1}, in logs (60 digits: δ goes down to 1e-257)."""
    def sf(z):  # P[Lap(0, 1) > z]
        return mpmath.mpf(1) / 2 * mpmath.exp(-z) if z >= 0 else 1 - mpmath.exp(z) / 2

    rho, s = mpmath.mpf(rho), mpmath.mpf(scale)
    return -mpmath.expm1(mpmath.log1p(-sf((rho - 1) / s))
                         + (max_items - 1) * mpmath.log1p(-sf(rho / s)))


def _gw_over(scale: float, delta: float, max_items: int) -> bool:
    rho = thresholds.gw_threshold(scale, delta, max_items)
    with mpmath.workdps(60):
        return bool(_gw_chance(scale, rho, max_items) > mpmath.mpf(delta))


@pytest.mark.parametrize("scale, delta, max_items", [
    (1 / 1.7, 8.1142e-5, 1),            # 7.9e-16 relative over δ before
    (1.0, 1e-6, 30),                    # 1.3e-15
    (1 / 0.12434830927900853, 3.3286094412569705e-58, 1000),   # 3.6e-14
    (1 / 0.5323527566452354, 5.170016412645408e-60, 5),        # 2.1e-14
    (21.8, 1.3e-257, 2),
    (1 / 98.46, 3.4227e-50, 1), (0.5, 0.3, 4), (10.0, 0.7, 3),
])
def test_gw_threshold_meets_delta_exactly(scale, delta, max_items):
    assert not _gw_over(scale, delta, max_items)


def test_gw_threshold_meets_delta_on_a_random_grid():
    """80 (λ, δ, Δ0) from a fixed seed (ε = 1/λ log-uniform in [0.1, 160], δ in
    [1e-60, 1e-2]); 24 of them were over δ before the fix."""
    rng = random.Random(3434)
    over = []
    for _ in range(80):
        epsilon, delta = 10 ** rng.uniform(-1, 2.2), 10 ** rng.uniform(-60, -2)
        max_items = rng.choice([1, 2, 5, 30, 65, 300, 1000])
        if _gw_over(1.0 / epsilon, delta, max_items):
            over.append((epsilon, delta, max_items))
    assert not over


def test_gw_threshold_moved_up_by_a_sliver_only():
    # The published ρ_GW = 1 − λ·ln(2δ) at Δ0 = 1 (docs/privacy.md, Golden values).
    rho = thresholds.gw_threshold(1 / 1.7, 8.1142e-5, 1)
    exact = 1 - mpmath.log(2 * mpmath.mpf(8.1142e-5)) / mpmath.mpf(1.7)
    assert 0 <= (rho - exact) / exact < 1e-13


# --- parts_within: no hang --------------------------------------------------------------

@contextlib.contextmanager
def _within(seconds: int):
    """Fails the test (instead of hanging the suite) if the body runs past ``seconds``."""
    def expire(*_):
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_parts_within_refuses_a_part_with_no_room_at_once():
    with _within(5), pytest.raises(ParameterError, match="part 1 of the total 1.0"):
        parts_within(1.0, [1.0, 1e-17], rounded=[1])


@pytest.mark.parametrize("total, share", [(Budget(1.0, 1e-6), 1e-17),
                                          (ZCDPBudget(0.5, 1e-6), 1e-300)])
def test_a_counts_share_too_small_for_floats_is_a_clear_error(total, share):
    with _within(5), pytest.raises(ParameterError) as error:
        split_selection_and_counts(total, counts_share=share)
    assert error.value.param == "counts_share" and "too small" in str(error.value)


@pytest.mark.parametrize("total", [Budget(0.15, 1e-6), ZCDPBudget(0.15, 1e-6)])
def test_a_small_counts_share_splits_exactly_at_once(total):
    with _within(5):
        parts = split_selection_and_counts(total, counts_share=1e-9)
    field = "epsilon" if isinstance(total, Budget) else "rho"
    selection, counts = getattr(parts.selection, field), getattr(parts.counts, field)
    assert Fraction(selection) + Fraction(counts) <= Fraction(getattr(total, field))
    assert counts == pytest.approx(0.15e-9, rel=1e-6)


def test_parts_within_rounds_a_few_ulps_of_excess_by_about_an_ulp():
    # 0.1 + 0.9 rounds to 1.0 in floats, but the floats' exact sum is above 1.
    fitted = parts_within(1.0, [0.1, 0.9])
    assert sum(map(Fraction, fitted)) <= 1
    assert fitted[0] == math.nextafter(0.1, 0) and fitted[1] == math.nextafter(0.9, 0)
    assert parts_within(1.0, [0.25, 0.75]) == [0.25, 0.75]  # within: as given


# --- composition: part_of on every entry point -------------------------------------------

def _parts_of_mechanisms():
    dpne = ngram_calibration.calibrate(Budget(1.0, 1e-6), 3, 1.0, 10, "weighted-gaussian", 3.0)
    even = ngram_calibration.dpsu_even_calibration(Budget(1.0, 1e-6), 3, 10)
    return [dpne.level1, even]


@pytest.mark.parametrize("entry", [
    lambda sel, cnt: composition.composed_epsilon(sel, cnt, 1e-6),
    lambda sel, cnt: composition.composed_delta(sel, cnt, 1.25),
    lambda sel, cnt: composition.composed_guarantee(sel, cnt, 1e-6),
], ids=["composed_epsilon", "composed_delta", "composed_guarantee"])
def test_every_composition_entry_point_refuses_a_part_of_a_mechanism(entry):
    """The review: composed_epsilon(DPNE level 1, counts) stated ε = 0.646 where the
    three levels as run (one Gaussian of σ*) give 1.060."""
    counts = count_calibration(Budget(0.25, 0.0), 10)
    for part in _parts_of_mechanisms():
        assert part.part_of is not None
        with pytest.raises(ParameterError, match="compose the whole mechanism"):
            entry(part, counts)


# --- DPSU-even: δ_noise + T·δ_k ≤ δ exactly ----------------------------------------------

def test_dpsu_even_delta_split_holds_exactly():
    """60 budgets from a fixed seed; 12 had δ_noise + T·fl(δ_thr/T) > δ before the fix."""
    rng = random.Random(1834)
    over = []
    for _ in range(60):
        epsilon, delta = 10 ** rng.uniform(-1, 1), 10 ** rng.uniform(-10, -3)
        levels, max_items = rng.choice([2, 3, 5, 6, 7]), rng.choice([1, 10, 100])
        cal = ngram_calibration.dpsu_even_calibration(Budget(epsilon, delta), levels, max_items)
        spent = Fraction(cal.delta_noise) + levels * Fraction(cal.threshold_delta)
        if spent > Fraction(delta):
            over.append((epsilon, delta, levels, max_items))
    assert not over
