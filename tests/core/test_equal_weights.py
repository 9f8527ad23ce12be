"""Equal weights for the extra user's own keys (docs/privacy.md, invariant 12).

A threshold covers the user who alone holds its keys only if the policy gives those
keys the weights the threshold's proof assumes: every shipped policy gives the extra
user's own keys (the items no other user lists) equal weights, at most the weight of
the threshold's t-term. GW is exempt: it gives unequal weights and has its own
threshold proof, whose premises are checked here instead. The last test shows that
unequal weights do break a threshold.
"""

from __future__ import annotations

import math
import pathlib
import re
import zlib

import mpmath
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beam_dpsu.core import policies, thresholds
from tests.support import histograms
from tests.support.exact_tails import DIGITS, gaussian_sf

ROOT = pathlib.Path(__file__).resolve().parents[2]

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
    histogram = histograms.weighted_histogram(_with_extra(users, extra, position), item_weight)
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
            histogram = histograms.weighted_histogram(
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
        chance = 1 - mpmath.fprod(1 - gaussian_sf((mpmath.mpf(rho) - mpmath.mpf(w)) /
                                                   mpmath.mpf(sigma)) for w in weights)
    assert chance > 1.01 * delta
