"""ExtractNgrams with max_items_per_user="auto" (docs/privacy.md, Choosing Δ0 privately):
Δ_1 chosen privately, Δ_k (k ≥ 2) the largest candidate, and the n-gram job's
--max-items-per-user auto."""

import json
import math
import os
import pickle
import random

import apache_beam as beam
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import beam_dpsu
from beam_dpsu import (Budget, BudgetAccountant, ExtractNgrams, ZCDPBudget,
                       split_selection_and_counts)
from beam_dpsu.core import max_items_choice
from beam_dpsu.core.user_blocks import document_blocks
from beam_dpsu.core import hashing
from beam_dpsu.core.mechanisms import WeightedGaussian
from beam_dpsu.beam.ngram_level1 import block_size_counts
from beam_dpsu.core.ngram_parameters import max_items_per_level
from pipelines import ngrams as ngrams_job
from tests.support.hypothesis_profiles import examples
from tests.support.one_pipeline import run_cases
from tests.support.paths import ROOT
from tests.support.runner import job_args
from tests.support.document_blocks import encode_block

pytestmark = [pytest.mark.job, pytest.mark.pipeline]

MSNBC_1K = os.path.join(ROOT, "examples", "msnbc_1k.seq")
DP = Budget(1.0, 1e-7)
# Three candidates keep the graphs small (level 1 is built once per candidate).
AUTO = max_items_choice.AutoMaxItems(candidates=(1, 2, 5))
BIG = ZCDPBudget(5.0, 1e-8)


# --- pure parts -----------------------------------------------------------------------

def test_auto_per_level_forms():
    top = max(max_items_choice.CANDIDATES)
    assert max_items_per_level("auto", 3) == ([None, top, top], max_items_choice.AutoMaxItems())
    assert max_items_per_level(AUTO, 2) == ([None, 5], AUTO)
    # Δ_1 fixed, k ≥ 2 automatic: nothing to choose privately (no budget spent).
    assert max_items_per_level([10, "AUTO", 3], 3) == ([10, top, 3], None)
    assert max_items_per_level(7, 2) == ([7, 7], None)
    with pytest.raises(ValueError, match="max_items_per_user must be an int or 'auto'"):
        max_items_per_level("automatic", 2)
    with pytest.raises(ValueError, match="one value per level"):
        max_items_per_level(["auto", 3], 3)


def test_distinct_items_per_user_golden():
    block = encode_block(
        [("u1", [("a", "b", "a")]), ("u2", []), ("u3", [("c",), ("a", "c")])], keep_ids=True)
    assert document_blocks.distinct_items_per_user(block).tolist() == [2, 0, 2]


users_docs = st.lists(st.lists(st.lists(st.sampled_from("abcdefg"), max_size=6), max_size=3),
                      max_size=8)


@settings(max_examples=examples(30), deadline=None)
@given(users_docs, st.lists(st.lists(st.sampled_from("abcdefgh"), max_size=9), max_size=3))
def test_one_more_user_moves_the_size_counts_by_one(users, extra):
    # The size histogram's sensitivity: a user lands in one bin (none without tokens).
    edges = max_items_choice.size_bin_edges(AUTO.candidates)

    def counts(us):
        block = encode_block([(f"u{i}", d) for i, d in enumerate(us)], True)
        return block_size_counts(pickle.dumps(block), tuple(edges))

    moved = np.abs(counts(users + [extra]) - counts(users)).sum()
    assert moved == (1 if any(extra) else 0)


def test_every_candidate_is_dpne_at_the_selection_budget():
    extract = ExtractNgrams(4, DP, max_items_per_user="auto")
    plan = extract.auto_plan
    assert plan.size_budget.epsilon + plan.selection_budget.epsilon <= 1.0
    assert plan.size_budget.epsilon == pytest.approx(0.05)
    assert plan.selection_budget.delta == 1e-7 and plan.size_budget.delta == 0
    assert plan.candidates == max_items_choice.CANDIDATES and plan.user_mass == "sqrt(m)"
    assert extract.max_items_per_user == [None] + [1000] * 3
    for c, calibration, rho in zip(plan.candidates, extract._calibrations,
                                   plan.weight_thresholds):
        fixed = ExtractNgrams(4, plan.selection_budget, max_items_per_user=[c, 1000, 1000, 1000])
        assert calibration.sigmas == fixed.sigmas
        assert calibration.level1 == fixed.level1_calibration
        assert rho == fixed.level1_calibration.release_threshold


def test_levels_after_the_first_do_not_depend_on_their_bound():
    # Why Δ_k at k ≥ 2 needs no data: σ_k and the threshold ρ_k are the same for
    # every Δ_k (ℓ2 sensitivity 1 whatever Δ_k), so a larger Δ_k only adds weight.
    small = ExtractNgrams(3, DP, max_items_per_user=[10, 1, 1])
    large = ExtractNgrams(3, DP, max_items_per_user=[10, 1000, 1000])
    assert small.sigmas == large.sigmas and small.report["levels"][0] == {
        **large.report["levels"][0]}


def test_the_rule_golden_on_msnbc_like_sizes():
    # 17 categories: every user holds at most 17 distinct tokens. M(Δ) = N·√min(17, Δ)
    # stops growing at 17 while ρ_1 keeps growing: 20 (the first candidate ≥ 17; its
    # bin [16, 20) is read at its middle √(16·19) ≈ 17.4) beats 10 by √1.74 ≈ 1.32 in
    # M against 1.02 in ρ_1, and beats 50 (same M, larger ρ_1).
    plan = ExtractNgrams(6, DP, max_items_per_user="auto").auto_plan
    edges = np.asarray(plan.edges)
    assert plan.choose(max_items_choice.size_counts([17] * 1_000_000, edges)) == 20
    assert plan.choose(max_items_choice.size_counts([1] * 1_000_000, edges)) == 1
    assert plan.choose(max_items_choice.size_counts([3] * 1_000_000, edges)) == 5


@pytest.mark.parametrize("level1", ["weighted-gaussian", "policy-gaussian"])
def test_a_lone_user_is_released_with_probability_at_most_delta_at_every_candidate(level1):
    # Whatever Δ_1 is chosen, DPNE runs calibrated for it at the selection budget:
    # a user alone on its t ≤ Δ_1 tokens (weight 1/√t each) gets one of them past
    # ρ_1 w.p. ≤ δ_thr ≤ δ (and no k-gram without its tokens in S_1).
    extract = ExtractNgrams(3, DP, max_items_per_user="auto", level1=level1)
    for calibration in extract._calibrations:
        c, level = calibration.max_items_1, calibration.level1
        for t in sorted({1, 2, 3, c // 2, c} & set(range(1, c + 1))):
            p = stats.norm.sf(level.release_threshold - 1 / math.sqrt(t),
                              scale=level.noise_scale)
            # (ρ_1 is the max over t of this bound: equal at the max, up to rounding.)
            released = -math.expm1(t * math.log1p(-p))
            assert released <= calibration.threshold_delta * (1 + 1e-9)
            assert calibration.threshold_delta <= DP.delta


def test_auto_refusals_name_what_is_wrong():
    tight = split_selection_and_counts(
        Budget(1.0, 1e-5), selection_mechanism=WeightedGaussian(100),
        counts_max_items_per_user=100, composition="tight").selection
    with pytest.raises(ValueError, match="tight split"):
        ExtractNgrams(2, tight, max_items_per_user="auto")
    with pytest.raises(ValueError, match="delta"):
        ExtractNgrams(2, Budget(1.0, 0.0), max_items_per_user="auto")
    with pytest.raises(TypeError):
        ExtractNgrams(2, 1.0, max_items_per_user="auto")


def test_the_report_holds_parameters_only():
    extract = ExtractNgrams(3, BIG, max_items_per_user=AUTO, seed=1)
    report = json.loads(beam_dpsu.core.report.to_json(extract.report))
    assert report["levels"] == [{"k": 1, "max_items_per_user": "auto"},
                                {"k": 2, "max_items_per_user": 5},
                                {"k": 3, "max_items_per_user": 5}]
    assert report["max_items_per_user"]["share"] == 0.05
    assert report["max_items_per_user"]["size_histogram"]["sensitivity"] == 1
    assert set(report["calibration_by_candidate"]) == {"1", "2", "5"}
    assert report["calibration_by_candidate"]["5"]["sigmas"] == extract._calibrations[2].sigmas
    assert "chosen_max_items_per_user" not in report and report["dp_equivalents"]


def test_auto_spends_the_whole_budget_from_an_accountant_once():
    accountant = BudgetAccountant(DP)
    ExtractNgrams(2, DP, max_items_per_user="auto", accountant=accountant)
    with pytest.raises(beam_dpsu.BudgetExceededError):
        ExtractNgrams(2, Budget(0.01, 1e-9), max_items_per_user=3, accountant=accountant)


# --- on the DirectRunner ----------------------------------------------------------------

# 2,000 users hold the document "a b c" (3 distinct tokens); bob holds "a zz".
DOCUMENTS = [(f"u{i}", ("a", "b", "c")) for i in range(2000)] + [("bob", ("a", "zz"))]
SIZES = [3] * 2000 + [2]
COMMON = [("a",), ("b",), ("c",), ("a", "b"), ("b", "c"), ("a", "b", "c")]


def expected_choice(extract, sizes):
    """The Δ_1 the seeded pipeline must choose: the same draw, in plain Python."""
    plan = extract.auto_plan
    rng = random.Random(hashing.stable_hash64(("sizes", extract.seed)))
    counts = max_items_choice.size_counts(sizes, np.asarray(plan.edges))
    return plan.choose(max_items_choice.noisy_size_histogram(counts, plan.size_budget, rng))


SEEDED = [{}, {"level1": "policy-gaussian", "privacy_unit": "element"}]


def same_release_case(p, auto, fixed, docs, label):
    """Both transforms on ``docs``, on branches of ``p``; ``assert_same_release`` reads them."""
    data = p | f"Create {label}" >> beam.Create(docs)
    return {"auto": data | f"Auto {label}" >> auto, "fixed": data | f"Fixed {label}" >> fixed,
            "chosen": auto.chosen_max_items_per_user}


def assert_same_release(case, chosen):
    """Every n-gram released by both or by neither, once each (and at least one
    released), and ``chosen`` the auto run's Δ_1."""
    auto, fixed = case["auto"], case["fixed"]
    assert auto, "nothing released: the test proves nothing"
    assert len(set(auto)) == len(auto) and len(set(fixed)) == len(fixed)
    assert sorted(auto) == sorted(fixed)
    assert case["chosen"] == [chosen]


@pytest.fixture(scope="module")
def auto_runs(tmp_path_factory):
    """The seeded runs (auto against fixed, with the Δ_1 each must choose) and the
    unseeded one, in ONE pipeline (module fixture; a pipeline per test cost a run each)."""
    expected, unseeded = {}, {}

    def build(p):
        cases = {}
        for i, kwargs in enumerate(SEEDED):
            element = kwargs.get("privacy_unit") == "element"
            docs = [list(d[1]) for d in DOCUMENTS] if element else DOCUMENTS
            auto = ExtractNgrams(3, BIG, max_items_per_user=AUTO, eta=0.5, seed=3, **kwargs)
            expected[f"seeded {i}"] = chosen = expected_choice(auto, SIZES)
            fixed = ExtractNgrams(3, auto.auto_plan.selection_budget,
                                  max_items_per_user=[chosen, 5, 5], eta=0.5, seed=3, **kwargs)
            cases[f"seeded {i}"] = same_release_case(p, auto, fixed, docs, f"seeded {i}")
        extract = unseeded["extract"] = ExtractNgrams(3, BIG, max_items_per_user=AUTO, eta=1e-9,
                                                      privacy_unit="element")
        released = (p | "Create unseeded" >> beam.Create([list(d[1]) for d in DOCUMENTS])
                    | "Extract unseeded" >> extract)
        cases["unseeded"] = {"released": released, "chosen": extract.chosen_max_items_per_user,
                             "stats": extract.level_stats}
        return cases

    runs = run_cases(tmp_path_factory.mktemp("auto"), build)
    return {**runs, "expected": expected}


@pytest.mark.parametrize("kwargs", SEEDED)
def test_a_seeded_auto_run_is_dpne_at_the_chosen_bound(auto_runs, kwargs):
    # The same seed gives the same draws: the auto release must be exactly the
    # fixed-Δ_1 release at the selection budget, and the choice the plain-Python one.
    case = f"seeded {SEEDED.index(kwargs)}"
    chosen = auto_runs["expected"][case]
    assert chosen == 5  # M(Δ) stops at 3 tokens; noise sd 1.4 on 2,000 users
    assert_same_release(auto_runs[case], chosen)


def test_an_unseeded_auto_run_releases_the_common_ngrams(auto_runs):
    # Each common n-gram has weight ≥ 1,000 against thresholds < 60 and σ < 6: it is
    # released but w.p. < 1e-100. Bob's "zz" passes ρ_1 w.p. ≤ δ = 1e-8, and with
    # η = 1e-9 level k draws a spurious k-gram w.p. ≤ η·|S_{k−1}| ≤ 4e-9 (|S_1| ≤ 4): this
    # fails w.p. < 1e-7.
    # The choice of 5 (2,000 users of 3 items) holds unless a bin's noise (σ = 1.4) passes
    # 366: w.p. < 1e-300.
    run = auto_runs["unseeded"]
    assert sorted(run["released"]) == sorted(COMMON)
    assert run["chosen"] == [5]
    assert sorted((s["k"], s["max_items_per_user"]) for s in run["stats"]) == [(2, 5), (3, 5)]


# --- the job ----------------------------------------------------------------------------

def test_the_ngram_job_chooses_max_items_privately_and_reports_it(tmp_path, capsys):
    out = tmp_path / "out"
    assert ngrams_job.main(job_args(["--input", MSNBC_1K, "--max-n", "2",
                            "--max-items-per-user",
                            "auto", "--epsilon", "4", "--delta", "1e-5",
                            "--output", str(out)])) == 0
    report = json.loads((out / "report.json").read_text())
    chosen = report["chosen_max_items_per_user"]
    assert chosen in report["max_items_per_user"]["candidates_calibrated"]
    assert report["levels"][1]["max_items_per_user"] == 1000
    assert str(chosen) in report["calibration_by_candidate"]
    assert [s["sigma"] for s in report["level_stats"]] == [
        report["calibration_by_candidate"][str(chosen)]["sigmas"][1]]
    summary = capsys.readouterr().out
    assert summary.startswith("released ")
    assert f"(max items per user at level 1 {chosen:,}, chosen privately)" in summary


def test_the_ngram_job_takes_auto_per_level(tmp_path):
    out = tmp_path / "out"
    assert ngrams_job.main(job_args(["--input", MSNBC_1K, "--max-n", "2",
                            "--max-items-per-user",
                            "10,auto", "--epsilon", "4", "--delta", "1e-5",
                            "--output", str(out)])) == 0
    report = json.loads((out / "report.json").read_text())
    # Δ_1 fixed: nothing chosen privately, no budget share spent.
    assert "chosen_max_items_per_user" not in report and "max_items_per_user" not in report
    assert [lv["max_items_per_user"] for lv in report["levels"]] == [10, 1000]


@pytest.mark.parametrize("args,message", [
    (["--max-items-per-user", "auto", "--method", "dpsu-even"],
     "--method dpsu-even takes a fixed int --max-items-per-user, not auto"),
    (["--max-items-per-user", "auto,x"], "--max-items-per-user takes an int, 'auto', or"),
    (["--max-items-per-user", "auto", "--delta", "0"], "--delta"),
])
def test_the_ngram_job_refuses_auto_where_it_cannot_apply(tmp_path, capsys, args, message):
    src = tmp_path / "docs.txt"
    src.write_text("a b c\n")
    code = ngrams_job.main(job_args(["--input", str(src), "--max-n", "2", "--epsilon", "1",
                            "--delta", "1e-5", *args, "--output", str(tmp_path / "o")]))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("error:")
    assert message in err[0], err


def test_auto_with_counts_takes_the_basic_split(tmp_path):
    out = tmp_path / "out"
    assert ngrams_job.main(job_args(["--input", MSNBC_1K, "--max-n", "1",
                            "--max-items-per-user",
                            "auto", "--with-counts", "--counts-max-items-per-user", "10",
                            "--epsilon", "4", "--delta", "1e-5", "--output", str(out)])) == 0
    report = json.loads((out / "report.json").read_text())
    assert report["budget_split"]["composition"].startswith("basic composition")
    assert report["chosen_max_items_per_user"] in max_items_choice.CANDIDATES


# Each forced run has a seed of its own, by which the patched choice tells them apart.
FORCED_SEEDS = {0: 3, 2: 4}


@pytest.fixture(scope="module")
def forced_runs(tmp_path_factory):
    """Both forced choices in ONE pipeline of their own: while it is built and runs,
    the noisy choice from the size counts returns, for each auto run, the index its
    seed names. Returns the runs and {index: (auto, fixed, Δ_1)}."""
    index_of_seed = {seed: index for index, seed in FORCED_SEEDS.items()}
    transforms = {}

    def build(p):
        cases = {}
        for index, seed in FORCED_SEEDS.items():
            auto = ExtractNgrams(3, Budget(3.0, 1e-6), max_items_per_user=AUTO, eta=0.5,
                                 seed=seed)
            c = auto.auto_plan.candidates[index]
            fixed = ExtractNgrams(3, auto.auto_plan.selection_budget,
                                  max_items_per_user=[c, 5, 5], eta=0.5, seed=seed)
            transforms[index] = (auto, fixed, c)
            cases[f"forced {index}"] = same_release_case(p, auto, fixed, DOCUMENTS,
                                                         f"forced {index}")
        return cases

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(beam_dpsu.beam.max_items_choice.selection, "_noisy_choice",
                      lambda counts, plan, seed: index_of_seed[seed])
        runs = run_cases(tmp_path_factory.mktemp("forced"), build)
    return runs, transforms


@pytest.mark.parametrize("index", [0, 2])
def test_every_forced_choice_is_dpne_at_that_bound(forced_runs, index):
    # The seeded test above checks the one index its seed picks;
    # here each choice is forced, and the run must be DPNE at that Δ_1 exactly.
    runs, transforms = forced_runs
    auto, fixed, c = transforms[index]
    assert auto._calibrations[index].sigmas == fixed.sigmas
    assert auto._calibrations[index].level1 == fixed.level1_calibration
    assert_same_release(runs[f"forced {index}"], c)
