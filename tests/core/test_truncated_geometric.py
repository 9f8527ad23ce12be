"""The truncated-geometric partition selection (Desfontaines et al. 2022): golden values,
the DP constraints it is the optimum of, and its Beam path through SelectItems."""

import math
import random
from fractions import Fraction

import apache_beam as beam
import mpmath
import numpy as np
import pytest
from tests.support.runner import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from scipy import stats

from beam_dpsu import (Budget, MECHANISMS, SelectItems, TruncatedGeometric, ZCDPBudget,
                       mechanism_from_name)
from beam_dpsu.core.calibration import truncated_geometric_calibration
from beam_dpsu.core.checks import ParameterError
from beam_dpsu.core.sampling import sample_items
from beam_dpsu.core.hashing import derived_rng, os_rng
from beam_dpsu.core.thresholds import (truncated_geometric_crossovers,
                                  truncated_geometric_keep_probability,
                                  truncated_geometric_recursion)
from tests.support.exact_tails import DIGITS
from tests.support import histograms

pytestmark = pytest.mark.pipeline


def exact_recursion_at_ln2(delta: Fraction, n_max: int) -> list[Fraction]:
    """The recursion in exact rationals at ε = ln 2 (e^ε = 2, e^{−ε} = 1/2)."""
    pi = [Fraction(0)]
    for _ in range(n_max):
        p = pi[-1]
        pi.append(min(2 * p + delta, 1 - (1 - p - delta) / 2, Fraction(1)))
    return pi


def test_golden_values_worked_by_hand_at_ln2():
    # ε = ln 2, δ = 1/100: π = 0, .01, .03, .07, .15, .31, .63 (doubling + δ up to
    # n1 = 6), then 1 − π halves minus δ/2: .82, .915, .9625, .98625, .998125, then 1.
    exact = exact_recursion_at_ln2(Fraction(1, 100), 14)
    assert exact[:13] == [Fraction(x) for x in (
        "0", "0.01", "0.03", "0.07", "0.15", "0.31", "0.63", "0.82", "0.915", "0.9625",
        "0.98625", "0.998125", "1")]
    closed = truncated_geometric_keep_probability(np.arange(15), math.log(2), 0.01)
    np.testing.assert_allclose(closed, [float(x) for x in exact], rtol=1e-14, atol=1e-16)
    assert truncated_geometric_crossovers(math.log(2), 0.01) == (6, 11)


def test_golden_values_of_pydp_at_one_item_per_user():
    # PyDP 1.1.5 (Google's C++ NearTruncatedGeometricPartitionSelection, used by
    # PipelineDP), probability_of_keep(n) with max_partitions_contributed = 1.
    n = [1, 2, 5, 11, 12, 15, 22, 23]
    pydp = {(1.0, 1e-5): [1e-05, 3.718281828459046e-05, 0.0008579102488372162,
                          0.3484477384533132, 0.7603109969226272, 0.9880721172346895,
                          0.9999949376389471, 1.0],
            (0.5, 1e-6): [1e-06, 2.648721270700128e-06, 1.7237748268427886e-05,
                          0.00037564967154725393, 0.0006203416038114743,
                          0.0027855451887770295, 0.09229409365686456, 0.15216823537206237]}
    for (eps, delta), expected in pydp.items():
        np.testing.assert_allclose(truncated_geometric_keep_probability(n, eps, delta),
                                   expected, rtol=1e-12)
    assert truncated_geometric_crossovers(1.0, 1e-5) == (11, 22)
    assert truncated_geometric_crossovers(0.5, 1e-6) == (25, 50)


@pytest.mark.parametrize("eps,delta", [(math.log(2), 0.01), (1.0, 1e-5), (0.01, 1e-7),
                                       (5.0, 1e-9), (1e-3, 1e-7), (2.0, 0.3)])
def test_closed_form_equals_the_recursion(eps, delta):
    n1, n2 = truncated_geometric_crossovers(eps, delta)
    n = np.arange(n2 + 10)
    np.testing.assert_allclose(truncated_geometric_keep_probability(n, eps, delta),
                               truncated_geometric_recursion(n2 + 9, eps, delta),
                               rtol=1e-11, atol=1e-15)
    assert truncated_geometric_keep_probability(n2 + 1, eps, delta) == 1.0
    assert truncated_geometric_keep_probability(n2, eps, delta) < 1.0


@pytest.mark.parametrize("eps,delta", [(1.0, 1e-5), (0.1, 1e-6), (3.0, 0.01)])
def test_keep_probability_is_dp_and_tight(eps, delta):
    # For counts n and n + 1 (one user more): keeping and dropping both satisfy
    # (ε, δ)-DP in both directions, and at every n < n2 one constraint is tight
    # (so no larger π is private: the optimum of Theorem 1).
    _, n2 = truncated_geometric_crossovers(eps, delta)
    pi = truncated_geometric_keep_probability(np.arange(n2 + 5), eps, delta)
    a, b = pi[:-1], pi[1:]
    tol = 1e-12
    assert np.all(np.diff(pi) >= 0)
    assert np.all(b <= math.exp(eps) * a + delta + tol)
    assert np.all((1 - a) <= math.exp(eps) * (1 - b) + delta + tol)
    slack = np.minimum(math.exp(eps) * a + delta - b, math.exp(eps) * (1 - b) + delta - (1 - a))
    assert np.all(slack[:n2] <= 1e-9)


def test_one_user_with_max_items_is_released_with_probability_at_most_delta():
    for d0 in (1, 10, 100):
        cal = TruncatedGeometric(d0).calibrate(Budget(1.0, 1e-5))
        p_one = float(cal.keep_probability(1))
        assert p_one == pytest.approx(1e-5 / d0)
        assert 1 - (1 - p_one) ** d0 <= 1e-5


def test_vectorised_and_edge_inputs():
    pi = truncated_geometric_keep_probability(np.array([[-3, 0], [1, 10 ** 9]]), 1.0, 1e-5)
    assert pi.shape == (2, 2) and pi[0, 0] == 0 and pi[0, 1] == 0 and pi[1, 1] == 1.0
    with pytest.raises(ValueError, match="epsilon must be a finite number > 0"):
        truncated_geometric_keep_probability(1, 0.0, 1e-5)
    with pytest.raises(ValueError, match="delta must lie strictly between 0 and 1"):
        truncated_geometric_keep_probability(1, 1.0, 0.0)


def test_config_calibration_splits_the_budget_over_max_items():
    cal = TruncatedGeometric(10).calibrate(Budget(1.0, 1e-5))
    assert cal.epsilon_per_item == pytest.approx(0.1) and cal.delta_per_item == pytest.approx(1e-6)
    assert (cal.crossover, cal.users_kept_surely) == (109, 218)
    assert mechanism_from_name("truncated-geometric",
                               max_items_per_user=10) == TruncatedGeometric(10)
    assert MECHANISMS["truncated-geometric"] is TruncatedGeometric
    with pytest.raises(ValueError, match="truncated-geometric' is \\(ε, δ\\)-DP only"):
        TruncatedGeometric(10).calibrate(ZCDPBudget(0.1, 1e-5))
    report = SelectItems(TruncatedGeometric(10), Budget(1.0, 1e-5)).report
    assert report["mechanism"] == {"name": "truncated-geometric", "max_items_per_user": 10}
    assert report["users_kept_surely"] == 218 and "Theorem 1" in report["source"]


def test_keep_mask_keeps_at_rate_pi():
    # Exact binomial tests at p < 1e-8 each (3 checks: false failure < 3e-8).
    cal = TruncatedGeometric(1).calibrate(Budget(1.0, 0.01))
    n_draws = 20_000
    for n in (1, 3, 5):
        kept = int(cal.keep_mask(np.full(n_draws, n), os_rng()).sum())
        assert stats.binomtest(kept, n_draws, float(cal.keep_probability(n))).pvalue > 1e-8


def dataset():
    pairs = []
    for u in range(40):
        pairs += [(f"u{u}", "common"), (f"u{u}", "common")]
    for u in range(12):
        pairs += [(f"v{u}", f"mid{u % 4}"), (f"v{u}", f"mid{(u + 1) % 4}"), (f"v{u}", "x")]
    pairs += [("u0", "pair"), ("u1", "pair"), ("u2", "solo")]
    return pairs


def test_beam_run_equals_the_pure_core_with_the_same_seed():
    mechanism, budget, seed = TruncatedGeometric(2), Budget(4.0, 1e-3), 5
    cal = mechanism.calibrate(budget)
    users = {}
    for u, item in dataset():
        users.setdefault(u, set()).add(item)
    sampled = [sample_items(items, 2, derived_rng(seed, "sample", "", u), ordered=True)
               for u, items in users.items()]
    hist = histograms.weighted_histogram(sampled, mechanism.item_weight)
    expected = sorted(item for item, n in hist.items()
                      if cal.keep_mask(np.float64(n), derived_rng(seed, "keep", item)))
    assert "common" in expected and "solo" not in expected  # π(40) = 1, π(1) = 5e-4
    with TestPipeline() as p:
        released = p | beam.Create(dataset()) | SelectItems(mechanism, budget, seed=seed)
        assert_that(released, equal_to(expected))


def test_beam_run_unseeded_releases_only_held_items():
    assert TruncatedGeometric(3).calibrate(Budget(3.0, 1e-6)).users_kept_surely == 30
    with TestPipeline() as p:
        released = p | beam.Create(dataset()) | SelectItems(TruncatedGeometric(3),
                                                            Budget(3.0, 1e-6))

        def check(items):
            # 'common' (40 users) is kept surely: n2 + 1 = 30 at ε' = 1, δ' = 3.3e-7.
            assert "common" in items and len(items) == len(set(items))
            assert set(items) <= {item for _, item in dataset()}

        assert_that(released, check)


def test_float_margin_and_refusal_at_huge_per_item_epsilon():
    # At ε' = 15, δ' = 1e-12 the float64 keep probabilities break the (ε', δ')
    # constraints by 15·δ'; a margin of e^{ε'}·2⁻⁵⁰ still leaves them over by up to
    # 0.13·δ'. The calibration keeps the proven margin of
    # ``truncated_geometric_float_margin`` from δ', and refuses budgets where that
    # margin would eat half of δ' (the tests below check the chances as run exactly).
    from beam_dpsu import Budget, TruncatedGeometric
    from beam_dpsu.core.thresholds import truncated_geometric_float_margin
    cal = TruncatedGeometric(1).calibrate(Budget(3.0, 1e-5))
    margin = truncated_geometric_float_margin(3.0, 1e-5)
    assert math.exp(3.0) * 2.0 ** -50 < margin < 1e-5 * 1e-6
    assert Fraction(cal.delta_per_item) <= Fraction(1e-5) - Fraction(margin)
    assert cal.delta_per_item == pytest.approx(1e-5 - margin, rel=1e-15)
    with pytest.raises(ValueError, match="too small for float64 keep probabilities at "
                                         "epsilon per item = 15"):
        TruncatedGeometric(1).calibrate(Budget(15.0, 1e-12))


# --- the keep chances as run meet the item budget exactly (docs/privacy.md, "Truncated
# geometric") ---------------------------------------------------------------------------
# numpy's 53-bit uniform U keeps an item iff U < π(n), so the chance as run is
# p(n) = ⌈π(n)·2^53⌉/2^53: it must meet every item's (ε/Δ0, δ/Δ0) in exact arithmetic,
# at every n (mpmath at 50 digits where e^ε enters).

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
    # without the float margin, accepted and over (ε/Δ0, δ/Δ0) by the excess/δ' shown
    (0.5675574532159186, 7.09916630592447e-12, 100),      # 0.009 at n = 4303
    (0.5530868260526131, 4.374937205283161e-12, 100),     # 0.0074 at n = 4496
    (0.018795353465293346, 2.4990205702194975e-13, 10),   # 0.026 at n = 12974
    # δ/Δ0 below 1e-14: refused, as their float error is ~δ'
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
    Δ0 in {1, 3, 10, 100}); without the float margin, 6 of the 39 checked break
    (ε/Δ0, δ/Δ0)."""
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
