"""CountReleased(max_items_per_user="auto"): the rule (beam_dpsu.core.max_items_choice), the
Beam wiring
(beam_dpsu.count_released) and --counts-max-items-per-user auto in the jobs."""

import json
import math
import random

import apache_beam as beam
import pytest
from tests.support.runner import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from hypothesis import given, settings, strategies as st

import beam_dpsu
from beam_dpsu import CountReleased, split_selection_and_counts
from beam_dpsu.core.max_items_choice.counts import (CountsAutoPlan, mean_absolute_noise,
                                                   plan_counts_auto)
from beam_dpsu.core import max_items_choice as choice
from beam_dpsu.core import hashing
from beam_dpsu.core.budgets import Budget, ZCDPBudget
from beam_dpsu.core.mechanisms import WeightedGaussian
from beam_dpsu.core.counts_budget import count_calibration
from beam_dpsu.core.discrete_noise import DiscreteGaussian, DiscreteLaplace
from beam_dpsu.core.report import to_json
from tests.support.hypothesis_profiles import examples
from tests.support.job_output import read_report
from tests.support.runner import job_args

pytestmark = [pytest.mark.job, pytest.mark.pipeline]

SMALL = choice.AutoMaxItems(candidates=(1, 2, 5))


# --- the rule, by hand ---------------------------------------------------------------------

def test_mean_absolute_noise_by_hand():
    # Discrete Laplace of scale 1: 2q/(1 − q²), q = e^{−1}.
    q = math.exp(-1.0)
    assert mean_absolute_noise(DiscreteLaplace(1)) == pytest.approx(2 * q / (1 - q * q))
    assert mean_absolute_noise(DiscreteLaplace(1)) == pytest.approx(0.850918, abs=1e-6)
    # Discrete Gaussian σ² = 1: Σ|z|e^{−z²/2} / Σe^{−z²/2} = 1.823779 / 2.506628.
    assert mean_absolute_noise(DiscreteGaussian(1)) == pytest.approx(0.727582, abs=1e-6)
    # σ = 10: the continuous σ·√(2/π).
    assert mean_absolute_noise(DiscreteGaussian(100)) == pytest.approx(7.978846, abs=1e-6)
    with pytest.raises(TypeError):
        mean_absolute_noise(1.0)


def hand_plan(size_budget, mean_abs=(1.0, 2.0, 6.0)):
    """Candidates 1, 2, 4: bins [1], [2], [3], [4, ∞)."""
    return CountsAutoPlan(auto=choice.AutoMaxItems(candidates=(1, 2, 4)),
                                 size_budget=size_budget, counts_budget=Budget(1.0, 0.0),
                                 candidates=(1, 2, 4), mean_absolute_noise=mean_abs,
                                 edges=(1, 2, 3, 4))


def test_the_rule_by_hand():
    plan = hand_plan(Budget(50.0, 0.0))
    noisy = [10, 0, 5, 3]  # 10 users hold 1 released item, 5 hold 3, 3 hold ≥ 4
    # K = 4: D(1) = 5·2 + 3·3 = 19, D(2) = 5·1 + 3·2 = 11, D(4) = 0 (the last bin
    # read at its lower edge); K·E|Z| = 4, 8, 24.
    assert list(plan.expected_error(noisy, 4)) == pytest.approx([23.0, 19.0, 24.0])
    assert plan.choose(noisy, 4) == 2
    # A tie goes to the smaller Δ0.
    assert hand_plan(Budget(50.0, 0.0), (1.0, 3.0, 6.0)).choose(noisy, 4) == 1
    # Negative noisy counts are read as they are (unbiased).
    assert list(plan.expected_error([10, 0, -5, 3], 4)) == pytest.approx([3.0, 9.0, 24.0])


def test_no_user_holds_more_than_the_released_items():
    # K = 2: the bins from 3 on are empty by construction, whatever their noise.
    plan = hand_plan(Budget(50.0, 0.0))
    assert list(plan.expected_error([10, 0, 5, 3], 2)) == pytest.approx([2.0, 4.0, 12.0])
    assert plan.choose([10, 0, 5, 3], 2) == 1
    # No released item: nothing to count, the smallest Δ0.
    assert plan.choose([10, 0, 5, 3], 0) == 1


def test_the_rule_reads_its_inputs_strictly():
    plan = hand_plan(Budget(50.0, 0.0))
    with pytest.raises(ValueError, match="expected 4 bin counts"):
        plan.expected_error([1, 2, 3], 4)
    for k in (-1, 1.5, True):
        with pytest.raises(ValueError, match="released_items"):
            plan.expected_error([1, 2, 3, 4], k)


def test_plan_splits_the_counts_budget_and_calibrates_every_candidate():
    plan, calibrations = plan_counts_auto(SMALL, ZCDPBudget(1.0, 0.0), count_calibration)
    assert plan.size_budget == ZCDPBudget(0.05, 0.0)
    assert plan.counts_budget.rho == pytest.approx(0.95) and plan.counts_budget.delta == 0.0
    assert plan.size_budget.rho + plan.counts_budget.rho <= 1.0
    assert plan.candidates == (1, 2, 5) and plan.edges == (1, 2, 3, 4, 5)
    # σ² = Δ0/(2ρ) at the counts' part.
    assert [float(k.noise.sigma_squared) for k in calibrations.values()] == pytest.approx(
        [c / 1.9 for c in (1, 2, 5)])
    assert plan.mean_absolute_noise == tuple(
        mean_absolute_noise(k.noise) for k in calibrations.values())


# --- privacy: the size histogram moves by 1 ------------------------------------------------

users = st.lists(st.sets(st.sampled_from("abcdefgh"), max_size=8), max_size=12)


def released_sizes(users_items, released) -> list:
    """Each user's number of distinct released items, users holding none left out (raw,
    NOT private): what ``CountReleased`` bins for "auto"."""
    released = set(released)
    sizes = (len(set(items) & released) for items in users_items)
    return [n for n in sizes if n > 0]


@settings(max_examples=examples(30), deadline=None)
@given(users=users, extra=st.sets(st.sampled_from("abcdefgh"), max_size=8),
       released=st.sets(st.sampled_from("abcdefgh")))
def test_one_more_user_moves_the_released_size_histogram_by_at_most_1(users, extra, released):
    edges = choice.size_bin_edges((1, 2, 5))
    before = choice.size_counts(released_sizes(users, released), edges)
    after = choice.size_counts(released_sizes(users + [extra], released), edges)
    moved = int(abs(after - before).sum())
    # Exactly one bin by 1 if the user holds a released item, else none.
    assert moved == (1 if extra & released else 0)


# --- Beam ----------------------------------------------------------------------------------

# 40 users hold "a", "b", "c"; 97 more items are released that nobody holds (K = 100).
PAIRS = [(f"u{i}", w) for i in range(40) for w in ("a", "b", "c", "secret")]
RELEASED = ["a", "b", "c"] + [f"z{i}" for i in range(97)]
BUDGET = ZCDPBudget(1.0, 0.0)


def expected_choice(counter, sizes, released_items):
    """The Δ0 the seeded pipeline must choose: the same draw, in plain Python."""
    plan = counter.auto_plan
    rng = random.Random(hashing.stable_hash64(("count-sizes", counter.seed)))
    counts = choice.size_counts(sizes, plan.edges)
    return plan.choose(choice.noisy_size_histogram(counts, plan.size_budget, rng),
                       released_items)


def test_auto_counts_are_the_fixed_counts_at_the_chosen_max_items():
    # Seeded: the sample and the noise at the chosen Δ0 are those of CountReleased
    # with that Δ0 fixed (same seed, same salts). Seed 1 chooses 2 (L = 127.5,
    # 115.0, 125.3 for Δ0 = 1, 2, 5 before noise), so sampling drops items.
    with TestPipeline() as p:
        data = p | "Pairs" >> beam.Create(PAIRS)
        released = p | "Released" >> beam.Create(RELEASED)
        auto = CountReleased(released, BUDGET, max_items_per_user=SMALL, seed=1, label="Auto")
        chosen = expected_choice(auto, [3] * 40, 100)
        assert chosen == 2
        fixed = CountReleased(released, auto.auto_plan.counts_budget, max_items_per_user=chosen,
                              seed=1, label="Fixed")
        both = ({"auto": data | auto, "fixed": data | fixed}
                | beam.CoGroupByKey()
                | beam.Map(lambda kv: (kv[0], len(kv[1]["auto"]) == 1
                                       and list(kv[1]["auto"]) == list(kv[1]["fixed"]))))
        assert_that(both, equal_to([(item, True) for item in RELEASED]), label="Same")
        assert_that(auto.chosen_max_items_per_user, equal_to([chosen]), label="Chosen")


def test_auto_counts_with_privacy_unit_element():
    # Unseeded. 300 people hold a, b, c and 20 hold a alone; K = 4. Δ0 = 5 costs
    # 4·E|Z| ≈ 5.2 and drops nothing; Δ0 ≤ 2 drops ≥ 300 contributions, which the
    # size noise (σ ≈ 3.2) hides with probability < 1e-300. Each count is within
    # 10σ (σ ≈ 1.6 at Δ0 = 5) of the truth: false-failure rate < 1e-20.
    elements = [["a", "b", "c", "secret"]] * 300 + [["a"]] * 20
    with TestPipeline() as p:
        released = p | "Released" >> beam.Create(["a", "b", "c", "z"])
        counter = CountReleased(released, BUDGET, max_items_per_user=SMALL, privacy_unit="element")
        counts = p | beam.Create(elements) | counter
        sigma = math.sqrt(5 / (2 * counter.auto_plan.counts_budget.rho))
        truth = {"a": 320, "b": 300, "c": 300, "z": 0}
        close = counts | beam.Map(lambda kv: (kv[0], abs(kv[1] - truth[kv[0]]) <= 10 * sigma))
        assert_that(close, equal_to([(item, True) for item in truth]), label="Counts")
        assert_that(counter.chosen_max_items_per_user, equal_to([5]), label="Chosen")


def test_the_report_lists_the_plan_and_every_candidate():
    p = beam.Pipeline()
    counter = CountReleased(p | beam.Create(["a"]), BUDGET, max_items_per_user="auto")
    report = json.loads(to_json(counter.report))
    plan = report["max_items_per_user"]
    assert plan["method"] == "auto" and plan["share"] == 0.05
    assert plan["candidates_calibrated"] == list(choice.CANDIDATES)
    assert plan["size_histogram"]["sensitivity"] == 1
    assert plan["size_histogram"]["budget"] == {"type": "approx-zcdp", "rho": 0.05, "delta": 0.0}
    assert "released items" in plan["size_histogram"]["of"]
    assert report["budget"] == BUDGET.to_dict()
    assert sorted(report["counts_by_candidate"], key=int) == [str(c) for c in choice.CANDIDATES]
    assert report["counts_by_candidate"]["5"]["max_items_per_user"] == 5
    assert counter.calibration is None


def test_a_tight_split_part_is_refused_with_auto():
    parts = split_selection_and_counts(Budget(1.0, 1e-5), 0.25,
                                       selection_mechanism=WeightedGaussian(20),
                                       counts_max_items_per_user=20, composition="tight")
    assert parts.scale > 1.0
    p = beam.Pipeline()
    with pytest.raises(ValueError, match="tight split.*composition='basic'"):
        CountReleased(p | beam.Create(["a"]), parts.counts, max_items_per_user="auto")


def test_auto_spends_its_budget_once():
    accountant = beam_dpsu.BudgetAccountant(BUDGET)
    p = beam.Pipeline()
    CountReleased(p | beam.Create(["a"]), BUDGET, max_items_per_user="auto", accountant=accountant)
    with pytest.raises(beam_dpsu.BudgetExceededError):
        accountant.spend(ZCDPBudget(1e-3, 0.0), "more")


# --- the jobs ------------------------------------------------------------------------------

BASE = ["--input", "examples/imdb_2k.csv.gz", "--user-field", "user", "--text-field",
        "review", "--rho", "0.1", "--delta", "1e-5", "--with-counts"]


def test_the_vocabulary_job_chooses_the_counts_max_items_privately(tmp_path):
    from pipelines import vocabulary
    out = tmp_path / "out"
    code = vocabulary.main(job_args([*BASE[:-5], "--epsilon", "2", "--delta", "1e-5",
                            "--with-counts",
                            "--max-items-per-user", "20", "--counts-max-items-per-user", "AUTO",
                            "--output", str(out)]))
    assert code == 0
    report = read_report(out)
    assert report["counts_chosen_max_items_per_user"] in choice.CANDIDATES
    assert report["counts"]["max_items_per_user"]["method"] == "auto"
    assert "chosen_max_items_per_user" not in report  # the selection's Δ0 was fixed
    # A tight split is bound to one counts Δ0: with auto the split is basic.
    assert report["budget_split"]["composition"].startswith("basic composition")
    assert "scale" not in report["budget_split"]


def test_the_ngrams_job_takes_counts_auto(tmp_path):
    from pipelines import ngrams
    out = tmp_path / "out"
    code = ngrams.main(job_args(["--input", "examples/msnbc_1k.seq", "--max-n", "2", "--rho",
                        "1",
                        "--delta", "1e-6", "--max-items-per-user", "5", "--with-counts",
                        "--counts-max-items-per-user", "auto", "--output", str(out)]))
    assert code == 0
    report = read_report(out)
    assert report["counts_chosen_max_items_per_user"] in choice.CANDIDATES
    assert report["counts"]["max_items_per_user"]["method"] == "auto"
