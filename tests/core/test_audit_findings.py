"""Findings of the privacy audit, reproduced as tests on the pure core.

Each finding that the code does not meet today is a test marked
``xfail(strict=True)``: the suite stays green while the finding is open, and
the fix must remove the marker (a strict xfail that passes fails the suite).
The tests that pass today guard what a fix must keep.

* The accountant's tolerance (docs/privacy.md, invariant 4): spending past the
  total by any amount is an error.
* The thresholds' δ charge (docs/privacy.md, "The split between noise and
  thresholds"): δ_thr suffices, not δ_thr/(1 − δ_thr).
* Float error in the thresholds (docs/privacy.md, invariant 3): the lone-user
  release chance at the computed ρ must not exceed δ, in exact arithmetic.
* Equal weights (docs/privacy.md, invariant 12): every shipped policy gives the
  extra user's own keys equal weights; GW is exempt by its own proof.

The Beam-side findings (tight-split parts, DPNE's composed guarantee, the
release guard) are in ``tests/beam/test_audit_findings_beam.py``.
"""

from __future__ import annotations

import math
import pathlib
import re
import zlib
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import beam_dpsu
from beam_dpsu.core import delta_split, policies, thresholds

ROOT = pathlib.Path(__file__).resolve().parents[2]


# --- the accountant: no tolerance ----------------------------------------------------

@pytest.mark.parametrize("epsilon", [1.000000000999, math.nextafter(1.0, 2.0), 1.0 + 1e-12])
def test_spending_past_the_total_epsilon_by_any_amount_is_an_error(epsilon):
    accountant = beam_dpsu.BudgetAccountant(beam_dpsu.Budget(1.0, 1e-6))
    with pytest.raises(beam_dpsu.BudgetExceededError):
        accountant.spend(beam_dpsu.Budget(epsilon, 1e-6))


def test_spending_past_the_total_delta_by_any_amount_is_an_error():
    accountant = beam_dpsu.BudgetAccountant(beam_dpsu.Budget(1.0, 1e-6))
    with pytest.raises(beam_dpsu.BudgetExceededError):
        accountant.spend(beam_dpsu.Budget(1.0, 1e-6 * (1.0 + 1e-10)))


def test_spending_past_a_zcdp_total_by_any_amount_is_an_error():
    accountant = beam_dpsu.BudgetAccountant(beam_dpsu.ZCDPBudget(0.1, 1e-5))
    with pytest.raises(beam_dpsu.BudgetExceededError):
        accountant.spend(beam_dpsu.ZCDPBudget(0.1 * (1.0 + 1e-10), 1e-5))


def test_parts_that_sum_past_the_total_in_sequence_are_refused():
    accountant = beam_dpsu.BudgetAccountant(beam_dpsu.Budget(1.0, 1e-6))
    accountant.spend(beam_dpsu.Budget(0.5, 5e-7))
    with pytest.raises(beam_dpsu.BudgetExceededError):
        accountant.spend(beam_dpsu.Budget(0.5 + 1e-12, 5e-7))
    with pytest.raises(beam_dpsu.BudgetExceededError):
        accountant.spend_all(beam_dpsu.Budget(0.25, 2e-7), beam_dpsu.Budget(0.25 + 1e-12, 3e-7))


def test_the_spent_total_is_compared_exactly():
    # 0.1 + 0.9 rounds to 1.0 in floats, but the two floats sum to more than 1.
    a, b = 0.1, 0.9
    assert a + b == 1.0 and Fraction(a) + Fraction(b) > 1
    accountant = beam_dpsu.BudgetAccountant(beam_dpsu.Budget(1.0, 1e-6))
    with pytest.raises(beam_dpsu.BudgetExceededError):
        accountant.spend_all(beam_dpsu.Budget(a, 5e-7), beam_dpsu.Budget(b, 5e-7))


@pytest.mark.parametrize("epsilon", [0.1, 0.3, 1.0, 1.7, 3.0, 10.0])
def test_the_librarys_own_splits_fit_its_accountant(epsilon):
    """Guards the fix above: a strict (exact) accountant must still take every split the
    library makes. Today many of these parts sum, exactly, a few ulps past the total
    (e.g. (1 − 0.1)·ε + 0.1·ε), so the fix must round the parts down."""
    total = beam_dpsu.Budget(epsilon, 1e-5)
    for share in (0.01, 0.05, 0.1, 0.2, 0.25, 0.3, 0.5, 0.7, 0.9):
        beam_dpsu.split_selection_and_counts(total, share,
                                             accountant=beam_dpsu.BudgetAccountant(total))
    for n in (2, 3, 5, 7, 10):
        beam_dpsu.BudgetAccountant(total).spend_all(*total.split([1.0] * n))
    zcdp = beam_dpsu.ZCDPBudget(epsilon / 10.0, 1e-5)
    for n in (3, 7):
        beam_dpsu.BudgetAccountant(zcdp).spend_all(*zcdp.split([1.0] * n))


# --- the thresholds' δ charge ------------------------------------------------------------

# Q(S) − e^ε(1 − δ*)P*(S) = (1 − δ*)(Q(S) − e^ε P*(S)) + δ*·Q(S) ≤ δ_L + δ*: charging
# δ_thr itself suffices (docs/privacy.md, Accounting).


@pytest.mark.parametrize("delta_thr", [1e-10, 1e-5, 0.01, 0.3])
def test_the_thresholds_cost_their_own_delta(delta_thr):
    assert delta_split.threshold_delta_cost(delta_thr) == delta_thr


def _wasted_delta(delta: float, delta_noise: float, threshold_delta: float) -> Fraction:
    """δ − (δ_noise + δ_thr), exactly."""
    return Fraction(delta) - Fraction(delta_noise) - Fraction(threshold_delta)


SPLIT_MECHANISMS = [
    beam_dpsu.WeightedGaussian(100),
    beam_dpsu.CountGaussian(10),
    beam_dpsu.PolicyGaussian(100),
    beam_dpsu.SIPS(100, rounds=3),
]


@pytest.mark.parametrize("budget", [beam_dpsu.Budget(1.0, 0.1), beam_dpsu.Budget(1.0, 1e-5)])
@pytest.mark.parametrize("mechanism", SPLIT_MECHANISMS, ids=lambda m: m.name)
def test_a_gaussian_split_never_spends_past_its_delta(mechanism, budget):
    """Holds today and must keep holding: δ_noise + δ_thr ≤ δ, exactly."""
    found = mechanism.calibrate(budget)
    assert _wasted_delta(budget.delta, found.delta_noise, found.threshold_delta) >= 0


@pytest.mark.parametrize("budget", [beam_dpsu.Budget(1.0, 0.1), beam_dpsu.Budget(3.0, 0.01)])
@pytest.mark.parametrize("mechanism", SPLIT_MECHANISMS, ids=lambda m: m.name)
def test_a_gaussian_split_spends_all_of_its_delta(mechanism, budget):
    """δ_noise + δ_thr = δ up to the rounding of δ_noise (two ulps of δ). Today
    δ_thr²/(1 − δ_thr) is left unspent (about 2.6e-3 of δ = 0.1)."""
    found = mechanism.calibrate(budget)
    wasted = _wasted_delta(budget.delta, found.delta_noise, found.threshold_delta)
    assert 0 <= wasted <= 2 * Fraction(math.ulp(budget.delta))


# --- float error in the thresholds -----------------------------------------------------

# Chances are evaluated at 50 digits (``mpmath.workdps``): the excesses are ~1e-14 relative.
DIGITS = 50


def _gaussian_sf(z):
    return mpmath.ncdf(-z)


def _laplace_sf(z):
    """P[Lap(0, 1) > z]."""
    return mpmath.mpf(0.5) * mpmath.exp(-z) if z >= 0 else 1 - mpmath.mpf(0.5) * mpmath.exp(z)


def _weighted_gaussian_chance(rho: float, sigma: float, t: int):
    """1 − (1 − Φ̄((ρ − 1/√t)/σ))^t: one of t keys at weight 1/√t released."""
    z = (mpmath.mpf(rho) - 1 / mpmath.sqrt(t)) / mpmath.mpf(sigma)
    return 1 - (1 - _gaussian_sf(z)) ** t


def _weighted_laplace_chance(rho: float, scale: float, t: int):
    z = (mpmath.mpf(rho) - mpmath.mpf(1) / t) / mpmath.mpf(scale)
    return 1 - (1 - _laplace_sf(z)) ** t


def _count_chance(sf, rho: float, scale: float, max_items: int):
    return 1 - (1 - sf((mpmath.mpf(rho) - 1) / mpmath.mpf(scale))) ** max_items


def _worst_weighted_gaussian_chance(sigma: float, delta: float, max_items: int):
    rho = thresholds.weighted_gaussian_threshold(sigma, delta, max_items)
    with mpmath.workdps(DIGITS):
        return max(_weighted_gaussian_chance(rho, sigma, t) for t in range(1, max_items + 1))


@pytest.mark.parametrize("sigma, delta, max_items", [
    (14.996, 5.1e-09, 5),          # 9.6e-15 relative over δ today
    (12.72007031779105, 2.929550059139368e-10, 64),   # 1.2e-14
    (0.9309992931610025, 0.0031596794974115177, 3),   # 2.4e-15
])
def test_weighted_gaussian_threshold_meets_delta_exactly(sigma, delta, max_items):
    """The SIPS-round / Weighted Gaussian threshold (``weighted_gaussian_threshold``):
    for every t ≤ Δ0, 1 − (1 − Φ̄((ρ − 1/√t)/σ))^t ≤ δ in 50-digit arithmetic."""
    assert _worst_weighted_gaussian_chance(sigma, delta, max_items) <= mpmath.mpf(delta)


def test_weighted_gaussian_threshold_meets_delta_on_a_random_grid():
    """30 (σ, δ, Δ0) drawn from a fixed seed (σ log-uniform in [0.05, 50], δ in
    [1e-12, 0.25], Δ0 ≤ 64): about a quarter of such draws exceed δ today (the largest
    seen: 1.2e-14 relative). Every one must meet δ."""
    rng = np.random.default_rng(20240611)
    over = []
    for _ in range(30):
        sigma = float(np.exp(rng.uniform(math.log(0.05), math.log(50.0))))
        delta = float(10.0 ** rng.uniform(-12.0, -0.6))
        max_items = int(rng.integers(1, 65))
        if _worst_weighted_gaussian_chance(sigma, delta, max_items) > mpmath.mpf(delta):
            over.append((sigma, delta, max_items))
    assert not over


# Found while reproducing the finding: the other closed-form thresholds round the
# same way (largest relative excess seen in 400 random draws each).
@pytest.mark.parametrize("kind, scale, delta, max_items", [
    ("weighted-laplace", 12.782, 4.75e-08, 1),   # 2.6e-15 relative over δ
    ("count-gaussian", 1.349, 3.04e-09, 5),      # 7.1e-15
    ("count-laplace", 0.2, 6.15e-10, 3),         # 3.8e-15
])
def test_other_thresholds_meet_delta_exactly(kind, scale, delta, max_items):
    with mpmath.workdps(DIGITS):
        _check_other_threshold(kind, scale, delta, max_items)


def _check_other_threshold(kind, scale, delta, max_items):
    if kind == "weighted-laplace":
        rho = thresholds.weighted_laplace_threshold(scale, delta, max_items)
        chance = max(_weighted_laplace_chance(rho, scale, t) for t in range(1, max_items + 1))
    elif kind == "count-gaussian":
        rho = thresholds.count_gaussian_threshold(scale, delta, max_items)
        chance = _count_chance(_gaussian_sf, rho, scale, max_items)
    else:
        rho = thresholds.count_laplace_threshold(scale, delta, max_items)
        chance = _count_chance(_laplace_sf, rho, scale, max_items)
    assert chance <= mpmath.mpf(delta)


def test_the_float_error_is_tiny():
    """What the xfails above measure is rounding, not a wrong formula: the excess is
    below 1e-13 relative (so the fix is a rounding-up of ρ, not a new formula)."""
    for sigma, delta, max_items in [(14.996, 5.1e-09, 5), (12.72007031779105,
                                                          2.929550059139368e-10, 64)]:
        chance = _worst_weighted_gaussian_chance(sigma, delta, max_items)
        assert chance <= mpmath.mpf(delta) * (1 + mpmath.mpf("1e-13"))


# --- equal weights for the extra user's own keys (docs/privacy.md, invariant 12) ------

ITEMS = st.sampled_from([f"w{i}" for i in range(12)])
LIST = st.lists(ITEMS, min_size=1, max_size=8, unique=True)  # a bounded list, Δ0 = 8
MAX_ITEMS = 8


@st.composite
def dataset_and_extra_user(draw):
    """(users in visiting order, the extra user's list, its position): the extra user
    holds some shared items and 1..Δ0 items no other user lists (its own keys)."""
    users = draw(st.lists(LIST, max_size=15))
    shared = draw(st.lists(ITEMS, max_size=MAX_ITEMS - 1, unique=True))
    own = draw(st.integers(1, MAX_ITEMS - len(shared)))
    extra = draw(st.permutations(shared + [f"own{i}" for i in range(own)]))
    position = draw(st.integers(0, len(users)))
    return users, list(extra), position


def _own_keys(users, extra):
    listed = {item for items in users for item in items}
    return [item for item in extra if item not in listed]


def _with_extra(users, extra, position):
    return users[:position] + [extra] + users[position:]


EQUAL = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PARALLEL = {
    "count": (policies.count_weight, lambda t: 1.0),
    "weighted-laplace": (policies.weighted_laplace_weight, lambda t: 1.0 / t),
    "weighted-gaussian": (policies.weighted_gaussian_weight, lambda t: 1.0 / math.sqrt(t)),
}


@EQUAL
@given(dataset_and_extra_user(), st.sampled_from(sorted(PARALLEL)))
def test_parallel_rules_give_own_keys_equal_weights(case, rule):
    users, extra, position = case
    item_weight, bound = PARALLEL[rule]
    histogram = policies.weighted_histogram(_with_extra(users, extra, position), item_weight)
    own = [histogram[item] for item in _own_keys(users, extra)]
    assert own and len(set(own)) == 1
    # ... and that weight is the one of the threshold's t-term, t = |list| ≤ Δ0.
    assert own[0] <= bound(len(extra)) * (1 + 1e-12)


SEQUENTIAL = {
    "policy-laplace (l1-descent)": (policies.l1_descent, lambda t: 1.0 / t),
    "policy-gaussian (l2-descent)": (policies.l2_descent, lambda t: 1.0 / math.sqrt(t)),
}


@EQUAL
@given(dataset_and_extra_user(), st.sampled_from(sorted(SEQUENTIAL)),
       st.floats(1.0, 20.0))
def test_descent_policies_give_own_keys_equal_weights(case, rule, cutoff):
    """Own keys are at 0 when the extra user is visited (no earlier user lists them) and no
    later user lists them: their gaps to Γ are equal, so are their increments."""
    users, extra, position = case
    update, bound = SEQUENTIAL[rule]
    histogram = policies.policy_histogram(_with_extra(users, extra, position), update, cutoff)
    own = [histogram[item] for item in _own_keys(users, extra)]
    assert own and len(set(own)) == 1
    # The threshold's t-term covers them: t equal keys at ≤ 1/t (ℓ1) or ≤ 1/√t (ℓ2),
    # with t the number of own keys (the others' increments only lower theirs).
    assert own[0] <= bound(len(own)) * (1 + 1e-12)


@EQUAL
@given(dataset_and_extra_user(), st.lists(st.sets(ITEMS, max_size=4), min_size=1, max_size=3))
def test_sips_rounds_give_own_keys_equal_weights(case, released_per_round):
    """Each SIPS round is Weighted Gaussian on the lists minus what earlier rounds released
    (the same removal on both neighbours): the round's own keys get equal weights."""
    users, extra, position = case
    released: set = set()
    for round_release in released_per_round:
        remaining = [[u for u in items if u not in released] for items in users]
        remaining = [items for items in remaining if items]
        extra_left = [u for u in extra if u not in released]
        if extra_left:
            histogram = policies.weighted_histogram(
                _with_extra(remaining, extra_left, min(position, len(remaining))),
                policies.weighted_gaussian_weight)
            own = [histogram[item] for item in _own_keys(remaining, extra_left)]
            assert len(set(own)) <= 1
            assert all(w <= 1.0 / math.sqrt(len(extra_left)) * (1 + 1e-12) for w in own)
        released |= round_release


def _gw_lists(users_counts, max_items):
    """Each user's top-Δ0 list in GW order (ties by a fixed key that depends on the item)."""
    return [policies.gw_item_order(counts, lambda u: zlib.crc32(u.encode()), max_items)
            for counts in users_counts]


def test_gw_gives_own_keys_unequal_weights():
    """GW fills its list in order: with Γ ≥ 1 its first own key takes the whole budget."""
    users = [{"w1": 3, "w2": 1}]
    extra = {"own0": 5, "own1": 4, "own2": 1}
    lists = _gw_lists(users + [extra], 3)
    histogram = policies.policy_histogram(lists, policies.greedy_update, 5.0)
    assert [histogram[u] for u in ("own0", "own1", "own2")] == [1.0, 0.0, 0.0]


def _privacy_section(title: str) -> str:
    text = (ROOT / "docs" / "privacy.md").read_text(encoding="utf-8")
    match = re.search(rf"^###\s+\d*\.?\s*{title}.*?$(.*?)(?=^##)", text,
                      flags=re.MULTILINE | re.DOTALL | re.IGNORECASE)
    assert match, f"docs/privacy.md has no section {title!r}"
    return " ".join(match.group(1).split())


def test_docs_state_gw_is_exempt_by_its_own_threshold_proof():
    """The exemption the test above relies on is what docs/privacy.md states."""
    section = _privacy_section("Equal weights")
    assert re.search(r"GW gives unequal weights and has its own threshold proof", section), \
        section
    assert re.search(r"covers every weighting", section), section


@EQUAL
@given(st.lists(st.dictionaries(ITEMS, st.integers(1, 5), min_size=1, max_size=10),
                max_size=12),
       st.dictionaries(st.sampled_from([f"own{i}" for i in range(10)]) | ITEMS,
                       st.integers(1, 5), min_size=1, max_size=12),
       st.integers(0, 12), st.integers(1, 8), st.floats(1.0, 10.0))
def test_gw_own_keys_meet_the_premises_of_its_threshold(users_counts, extra_counts, position,
                                                        max_items, cutoff):
    """GW's own proof (docs/privacy.md, the GW fix, step 3) needs: ≤ Δ0 own keys, weights
    ≥ 0 summing to ≤ 1; then every such weighting is released w.p. ≤ δ at ρ."""
    lists = _gw_lists(users_counts, max_items)
    extra = _gw_lists([extra_counts], max_items)[0]
    position = min(position, len(lists))
    histogram = policies.policy_histogram(_with_extra(lists, extra, position),
                                          policies.greedy_update, cutoff)
    own = [histogram[item] for item in _own_keys(lists, extra)]
    assert len(own) <= max_items
    assert all(w >= 0 for w in own) and math.fsum(own) <= 1 + 1e-12
    lam, delta = 1.0, 1e-5
    rho = thresholds.gw_threshold(lam, delta, max_items)
    assert thresholds.gw_release_probability(lam, rho, own) <= delta * (1 + 1e-9)


def test_the_equal_weights_check_has_teeth():
    """The unequal ℓ2-unit weights of docs/privacy.md (invariant 12) do exceed δ_thr at ρ_G:
    a policy giving them would break the threshold, which is why the tests above matter."""
    sigma, delta = 2.236, 1e-5
    rho = thresholds.weighted_gaussian_threshold(sigma, delta, 4)
    weights = np.array([0.933, 0.208, 0.208, 0.208])
    weights = weights / np.linalg.norm(weights)
    with mpmath.workdps(DIGITS):
        chance = 1 - mpmath.fprod(1 - _gaussian_sf((mpmath.mpf(rho) - mpmath.mpf(w)) /
                                                   mpmath.mpf(sigma)) for w in weights)
    assert chance > 1.01 * delta
