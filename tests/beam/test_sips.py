"""DP-SIPS: golden round budgets and thresholds, removal between rounds, equivalence
with Weighted Gaussian, and the single-user release probability."""

import math

import apache_beam as beam
import numpy as np
import pytest
from tests.support.runner import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from scipy import stats

from beam_dpsu import SIPS, Budget, SelectItems, WeightedGaussian, ZCDPBudget
from beam_dpsu.core.budgets import dp_to_zcdp, geometric_split_weights
from beam_dpsu.core.gaussian import analytic_gaussian_sigma
from beam_dpsu.core.sampling import sample_items
from beam_dpsu.core.calibration import release_mask
from beam_dpsu.core.hashing import derived_rng, os_rng
from beam_dpsu.core.policies import weighted_gaussian_weight

pytestmark = pytest.mark.pipeline

# --- golden splits and thresholds ---------------------------------------------------


def test_geometric_split_golden():
    # dp-sips Table 2 setting: I = 3, r = 1/3 → shares r², r, 1 over (1 + r + r²)
    # = 1/13, 3/13, 9/13.
    assert geometric_split_weights(3, 1 / 3) == pytest.approx([1 / 13, 3 / 13, 9 / 13], rel=1e-14)
    assert geometric_split_weights(4, 1.0) == [0.25] * 4
    assert geometric_split_weights(1, 0.5) == pytest.approx([1.0])


def test_round_budgets_add_up_to_the_total():
    for rounds, ratio in [(3, 1 / 3), (5, 0.2), (2, 1.0), (7, 0.9)]:
        parts = SIPS(100, rounds=rounds, ratio=ratio).round_budgets(ZCDPBudget(0.1, 1e-5))
        assert math.fsum(p.rho for p in parts) == pytest.approx(0.1, rel=1e-14)
        assert math.fsum(p.delta for p in parts) == pytest.approx(1e-5, rel=1e-14)
        assert all(a.rho <= b.rho for a, b in zip(parts, parts[1:]))  # rising budgets


def test_round_thresholds_golden():
    # Per round: σ_i = 1/√(2ρ_i), T_i = max_{k≤Δ0} 1/√k + σ_i Φ⁻¹((1 − δ_i)^{1/k})
    # (dp-sips Alg. 2/3).
    cal = SIPS(100, rounds=3, ratio=1 / 3).calibrate(ZCDPBudget(0.1, 1e-5))
    k = np.arange(1, 101)
    for i, share in enumerate([1 / 13, 3 / 13, 9 / 13]):
        rho_i, delta_i = 0.1 * share, 1e-5 * share
        sigma = 1 / math.sqrt(2 * rho_i)
        naive = np.max(1 / np.sqrt(k) + sigma * stats.norm.ppf((1 - delta_i) ** (1 / k)))
        assert cal.rounds[i].noise_scale == pytest.approx(sigma, rel=1e-12)
        assert cal.rounds[i].release_threshold == pytest.approx(naive, rel=1e-8)
    # Hand-checked values of the last (largest) round.
    assert cal.rounds[2].noise_scale == pytest.approx(2.687419, abs=1e-6)
    assert cal.rounds[2].release_threshold == pytest.approx(14.25538, abs=1e-4)


def test_budget_calibrates_all_rounds_as_one_gaussian():
    # Tight accounting (docs/privacy.md, Accounting): the rounds' noise is one analytic Gaussian
    # at (ε, δ_noise), δ_noise + δ_thr = δ; it beats the old zCDP
    # route (dp-sips Corollary 9 with δ/2 each) in equivalent ρ.
    cal = SIPS().calibrate(Budget(1.7, 8e-5))
    # The thresholds cost δ_thr (docs/privacy.md, "The split between noise and thresholds").
    assert cal.delta_noise + cal.threshold_delta <= 8e-5
    assert cal.sigma_total == pytest.approx(analytic_gaussian_sigma(1.7, cal.delta_noise),
                                            rel=1e-9)
    assert cal.zcdp_budget.rho == pytest.approx(0.5 / cal.sigma_total ** 2, rel=1e-12)
    assert cal.zcdp_budget.rho > dp_to_zcdp(1.7, 8e-5, 4e-5).rho
    assert math.fsum(r.budget.rho for r in cal.rounds) == pytest.approx(cal.zcdp_budget.rho)
    report = SelectItems(SIPS(), Budget(1.7, 8e-5)).report
    assert report["budget"]["type"] == "approx-dp"
    assert report["zcdp_budget"]["rho"] == pytest.approx(cal.zcdp_budget.rho)
    assert [r["round"] for r in report["rounds"]] == [0, 1, 2]


@pytest.mark.parametrize("kwargs,message", [
    ({"rounds": 0}, "rounds must be an int >= 1, got 0"),
    ({"rounds": 2.5}, "rounds must be an int >= 1"),
    ({"ratio": 0}, "ratio must satisfy 0 < ratio <= 1, got 0"),
    ({"ratio": 1.5}, "ratio must satisfy 0 < ratio <= 1, got 1.5"),
    ({"max_items_per_user": 0}, "max_items_per_user must be >= 1"),
    ({"removal": "broadcast"}, "removal must be 'side_input' or 'join'"),
])
def test_sips_validation(kwargs, message):
    with pytest.raises(ValueError, match=message):
        SIPS(**kwargs)


# --- Beam: removal between rounds ------------------------------------------------------

# Negligible noise (σ_i ≈ 1e-6) and δ_i ≈ 3e-10, so every threshold is 1 + O(1e-5)
# and an item is released iff its weight exceeds 1.
TINY_NOISE = ZCDPBudget(1e12, 1e-9)


def removal_dataset():
    """'a' is held by 4 users alone (weight 4: released in round 0). x1 and x2 hold
    {a, c, e, f}: in round 0 c, e, f weigh 2·(1/2) = 1, not above the threshold;
    once 'a' is removed they weigh 2/√3 ≈ 1.15 and are released in round 1. Had 'a'
    still been counted in round 1, they would stay at 1 and never be released."""
    pairs = [(f"y{i}", "a") for i in range(4)]
    for user in ("x1", "x2"):
        pairs += [(user, item) for item in ("a", "c", "e", "f")]
    return pairs


@pytest.mark.parametrize("removal", ["side_input", "join"])
def test_released_items_are_removed_from_later_rounds(removal):
    select = SelectItems(SIPS(max_items_per_user=4, rounds=3, ratio=1.0, removal=removal),
                         TINY_NOISE, seed=5, non_private_stats=True)
    with TestPipeline() as p:
        released = p | beam.Create(removal_dataset()) | select
        assert_that(released, equal_to(["a", "c", "e", "f"]), label="Union")
        stages = select.non_private_released_by_stage
        assert_that(stages["round_0"], equal_to(["a"]), label="Round0")
        assert_that(stages["round_1"], equal_to(["c", "e", "f"]), label="Round1")
        assert_that(stages["round_2"], equal_to([]), label="Round2")


def test_round_releases_are_exposed_only_when_asked_for_by_name():
    # Invariant 6: which round released an item is not a function of
    # the released set (docs/privacy.md, invariant 6), so SelectItems keeps the rounds' releases
    # only with non_private_stats=True.
    select = SelectItems(SIPS(max_items_per_user=4, rounds=3, ratio=1.0), TINY_NOISE, seed=5)
    assert not hasattr(select, "released_by_stage")
    with TestPipeline() as p:
        released = p | beam.Create(removal_dataset()) | select
        assert_that(released, equal_to(["a", "c", "e", "f"]))
    assert select.non_private_released_by_stage == {}


# --- equivalence with Weighted Gaussian ------------------------------------------------

def expected_weighted_gaussian(pairs, max_items, calibration, seed):
    """The seeded Weighted Gaussian release computed by the pure core."""
    users = {}
    for u, item in pairs:
        users.setdefault(u, set()).add(item)
    hist = {}
    for u, items in users.items():
        sampled = sample_items(items, max_items, derived_rng(seed, "sample", "", u), ordered=True)
        for item in sampled:
            hist[item] = hist.get(item, 0.0) + weighted_gaussian_weight(len(sampled))
    return sorted(item for item, w in hist.items()
                  if release_mask(w, calibration, derived_rng(seed, "noise", "", item)))


def _block(users):
    from beam_dpsu.core.user_blocks.record_blocks import RecordBlockBuilder
    builder = RecordBlockBuilder(False, keyed=True)
    for user, items in users:
        builder.add(dict.fromkeys(items), False, user)
    return builder.packed()


def test_side_input_removal_drops_exactly_the_released_items():
    # The side-input removal works on packed blocks of users (record_blocks).
    from beam_dpsu.beam.sips import _drop_released
    from beam_dpsu.core.user_blocks.record_blocks import block_users
    block = _block([("u", ("a", "b", "c", b"a")), ("v", ("a",)), ("w", ("c", "d"))])
    (left,) = _drop_released(block, {"a": None, "c": None})
    # A user left with nothing goes (it adds nothing to later rounds); the others
    # keep their items in their order.
    assert list(block_users(left)) == [("u", ["b", b"a"]), ("w", ["d"])]
    # A block left with no user goes too.
    assert list(_drop_released(_block([("v", ("a",))]), {"a": None})) == []


def test_join_removal_groups_on_the_user_id_alone():
    # With a random nonce in the join's shuffle key, a runner that recomputes part
    # of a map task could regroup one user as two
    # records (each then sampled to Δ0). The key must be the user id alone:
    # two tagging passes over the same record must give the same keys.
    from beam_dpsu.beam.sips import _pairs_by_item
    record = ("alice", ("a", "b", "c"))
    assert list(_pairs_by_item(record)) == list(_pairs_by_item(record))
    assert {key for _, key in _pairs_by_item(record)} == {"alice"}


def test_one_round_at_ratio_one_is_weighted_gaussian_under_zcdp():
    budget, seed = ZCDPBudget(0.5, 1e-3), 21
    sips = SelectItems(SIPS(max_items_per_user=6, rounds=1, ratio=1.0), budget, seed=seed)
    wg = SelectItems(WeightedGaussian(6), budget, seed=seed)
    assert sips.calibration.rounds[0] == wg.calibration  # same σ, threshold and budget
    pairs = [(f"u{u}", f"w{(u * 5 + k * k) % 40}") for u in range(150) for k in range(10)]
    expected = expected_weighted_gaussian(pairs, 6, wg.calibration, seed)
    assert 0 < len(expected) < 40
    with TestPipeline() as p:
        data = p | beam.Create(pairs)
        assert_that(data | "SIPS" >> sips, equal_to(expected), label="SIPS")
        assert_that(data | "WG" >> wg, equal_to(expected), label="WG")


# --- statistical: a single user's items --------------------------------------------------

def sips_single_user_releases_any(calibration, n_items, max_items, rng, n_trials):
    """Runs SIPS on a dataset of one user holding n_items, n_trials times (pure core).

    Returns how many trials released at least one item. Every trial applies
    each round to the user's items not yet released, re-sampled to Δ0.
    """
    released_any = 0
    for _ in range(n_trials):
        remaining = list(range(n_items))
        hit = False
        for cal in calibration.rounds:
            if not remaining:
                break
            sampled = sample_items(remaining, max_items, rng)
            mask = release_mask(np.full(len(sampled), weighted_gaussian_weight(len(sampled))),
                                cal, rng)
            if mask.any():
                hit = True
                done = {s for s, m in zip(sampled, mask) if m}
                remaining = [x for x in remaining if x not in done]
        released_any += hit
    return released_any


@pytest.mark.parametrize("n_items", [1, 4, 12])
def test_single_user_items_released_with_probability_at_most_delta(n_items):
    # δ = 0.2 so the bound is visible with 20,000 trials. The count is compared
    # with the 1 − 1e-8 quantile of Binomial(N, δ): for a correct mechanism
    # (P ≤ δ) each check fails by chance with probability ≤ 1e-8, < 3e-8 in all.
    budget = ZCDPBudget(0.5, 0.2)
    cal = SIPS(max_items_per_user=6, rounds=3, ratio=1 / 3).calibrate(budget)
    n = 20_000
    count = sips_single_user_releases_any(cal, n_items, 6, os_rng(), n)
    assert count <= stats.binom.ppf(1 - 1e-8, n, budget.delta), count
