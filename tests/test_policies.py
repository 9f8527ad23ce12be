"""Sensitivity property tests of the parallel update rules (DESIGN §6).

For random datasets D and D' = D with one more user inserted at a random
position, the histograms differ by at most the sensitivity the noise was
calibrated to: 1 in ℓ1 (Weighted Laplace), 1 in ℓ2 (Weighted Gaussian),
Δ0 in ℓ1 and √Δ0 in ℓ2 (Count). The same test run on a deliberately wrong rule
must find a counterexample, which shows it can fail.
"""

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_dpsu import policies
from beam_dpsu.policies import histogram_distance, weighted_histogram

ITEMS = st.sampled_from([f"w{i}" for i in range(30)])
USER = st.lists(ITEMS, min_size=1, max_size=12)  # already bounded: ≤ Δ0 = 12 distinct
DATASET = st.lists(USER, max_size=25)
MAX_ITEMS = 12


@st.composite
def neighbours(draw):
    users = draw(DATASET)
    extra = draw(USER)
    position = draw(st.integers(0, len(users)))
    return users, users[:position] + [extra] + users[position:]


SETTINGS = settings(max_examples=500, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(neighbours())
def test_weighted_laplace_moves_l1_by_at_most_one(pair):
    d, d_plus = pair
    h, h2 = (weighted_histogram(x, policies.weighted_laplace_weight) for x in (d, d_plus))
    assert histogram_distance(h, h2, 1) <= 1 + 1e-9


@SETTINGS
@given(neighbours())
def test_weighted_gaussian_moves_l2_by_at_most_one(pair):
    d, d_plus = pair
    h, h2 = (weighted_histogram(x, policies.weighted_gaussian_weight) for x in (d, d_plus))
    assert histogram_distance(h, h2, 2) <= 1 + 1e-9


@SETTINGS
@given(neighbours())
def test_count_moves_by_delta0_in_l1_and_root_delta0_in_l2(pair):
    d, d_plus = pair
    h, h2 = (weighted_histogram(x, policies.count_weight) for x in (d, d_plus))
    assert histogram_distance(h, h2, 1) <= MAX_ITEMS + 1e-9
    assert histogram_distance(h, h2, 2) <= math.sqrt(MAX_ITEMS) + 1e-9


@SETTINGS
@given(neighbours())
def test_only_held_items_enter_the_histogram(pair):
    _, d_plus = pair
    held = {item for user in d_plus for item in user}
    for weight in (policies.count_weight, policies.weighted_laplace_weight,
                   policies.weighted_gaussian_weight):
        h = weighted_histogram(d_plus, weight)
        assert set(h) == held and all(v > 0 for v in h.values())


def test_property_test_has_teeth():
    """The Gaussian rule 1/√|W| breaks ℓ1 sensitivity 1: the ℓ1 check must find it."""
    found = []

    @settings(max_examples=500, deadline=None, database=None)
    @given(neighbours())
    def wrong_rule_is_caught(pair):
        d, d_plus = pair
        h, h2 = (weighted_histogram(x, policies.weighted_gaussian_weight) for x in (d, d_plus))
        if histogram_distance(h, h2, 1) > 1 + 1e-9:
            found.append(pair)
            raise AssertionError("ℓ1 sensitivity above 1")

    with pytest.raises(AssertionError):
        wrong_rule_is_caught()
    assert found


def test_user_contribution_dedupes_and_weights():
    assert policies.user_contribution(["a", "b", "a"], policies.weighted_laplace_weight) == [
        ("a", 0.5), ("b", 0.5)]
    assert policies.user_contribution([], policies.count_weight) == []
    c = policies.user_contribution(["a", "b", "c", "d"], policies.weighted_gaussian_weight)
    assert [w for _, w in c] == [0.5] * 4


def test_weight_rejects_empty_user():
    with pytest.raises(ValueError, match="at least 1 item, got 0"):
        policies.weighted_gaussian_weight(0)
