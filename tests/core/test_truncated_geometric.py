"""The truncated-geometric partition selection (Desfontaines et al. 2022): golden values,
the DP constraints it is the optimum of, and its Beam path through SelectItems."""

import math
from fractions import Fraction

import apache_beam as beam
import numpy as np
import pytest
from tests.support.runner import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from scipy import stats

from beam_dpsu import (Budget, MECHANISMS, SelectItems, TruncatedGeometric, ZCDPBudget,
                       mechanism_from_name)
from beam_dpsu.core import policies
from beam_dpsu.core.sampling import sample_items
from beam_dpsu.core.hashing import derived_rng, os_rng
from beam_dpsu.core.thresholds import (truncated_geometric_crossovers,
                                  truncated_geometric_keep_probability,
                                  truncated_geometric_recursion)

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
    hist = policies.weighted_histogram(sampled, mechanism.item_weight)
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
    # Review findings: at ε' = 15, δ' = 1e-12 the float64 keep probabilities broke
    # the (ε', δ') constraints by 15·δ'; a margin of e^{ε'}·2⁻⁵⁰ still left them
    # over by up to 0.13·δ' (issue 34). The calibration keeps the proven margin of
    # ``truncated_geometric_float_margin`` from δ', and refuses budgets where that
    # margin would eat half of δ' (tests/core/test_review34_findings.py checks the
    # chances as run exactly).
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
