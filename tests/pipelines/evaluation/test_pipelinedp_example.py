"""examples/pipelinedp_aggregation.py: released words as PipelineDP's public partitions.

PipelineDP is in the ``test`` extra (``pip install -e ".[test]"``); without it
these tests are skipped with that reason.
"""

import csv
import gzip
import importlib.util
import os

import apache_beam as beam
import pytest
from tests.support.runner import TestPipeline
from apache_beam.testing.util import assert_that

from beam_dpsu import Budget, BudgetAccountant, BudgetExceededError
from tests.support.job_output import read_report
from tests.support.paths import ROOT

pytestmark = [pytest.mark.job, pytest.mark.pipeline]

pytest.importorskip("pipeline_dp", reason="PipelineDP is in the test extra: "
                                          "pip install -e '.[test]'")

spec = importlib.util.spec_from_file_location(
    "pipelinedp_aggregation", os.path.join(ROOT, "examples", "pipelinedp_aggregation.py"))
example = importlib.util.module_from_spec(spec)
spec.loader.exec_module(example)


def documents():
    # 300 reviews "great film" (2 tokens), 100 "great" (1 token), one "secret words here".
    docs = [(f"r{i}", ("great", "film")) for i in range(300)]
    docs += [(f"s{i}", ("great",)) for i in range(100)]
    return docs + [("loner", ("secret", "words", "here"))]


def test_every_released_word_gets_one_aggregate_and_no_other_word_does():
    total = Budget(4.0, 1e-5)
    accountant = BudgetAccountant(total)
    with TestPipeline() as p:
        docs = p | beam.Create(documents())
        rows, report = example.build_pipeline(p, docs, total, 0.5, max_words_per_user=3,
                                              max_partitions_per_user=3, seed=1,
                                              accountant=accountant, max_length=4)

        def check(rows):
            by_word = {w: (n, mean) for w, n, mean in rows}
            # 'great' (400 users) and 'film' (300) are released surely; the loner's
            # words with probability ≤ δ, and not with this seed. PipelineDP is told
            # the rows are filtered already (KeepReleased): without that filter the
            # loner's words would get rows here.
            assert sorted(by_word) == ["film", "great"], sorted(by_word)
            # PipelineDP splits ε = 2 into ε = 1 for the count (ℓ1 sensitivity
            # 3: Laplace scale 3) and ε = 1 for the centred sum (values in [−2, 2],
            # sensitivity 6: scale 6). The bounds below are > 30 scales wide
            # (±100 counts; ±0.75 on a mean over ≥ 300 reviews is ±225 on the sum),
            # so a false failure has probability < 4e-13. True values: 400 and 300
            # reviews, mean lengths 1.75 and 2.
            assert abs(by_word["great"][0] - 400) < 100 and abs(by_word["film"][0] - 300) < 100
            assert 1.0 < by_word["great"][1] < 2.5 and 1.25 < by_word["film"][1] < 2.75

        assert_that(rows, check)
    assert report["selection"]["budget"] == {"type": "approx-dp", "epsilon": 2.0, "delta": 1e-5}
    assert report["aggregation"]["budget"] == {"type": "approx-dp", "epsilon": 2.0, "delta": 0.0}
    assert accountant.spent() == {"epsilon": 4.0, "delta": 1e-5}
    with pytest.raises(BudgetExceededError):
        accountant.spend(Budget(0.01))


def test_a_spent_accountant_refuses_the_whole_example():
    accountant = BudgetAccountant(Budget(4.0, 1e-5))
    accountant.spend(Budget(1.0))
    with pytest.raises(BudgetExceededError, match="would exceed the total epsilon=4.0"):
        with TestPipeline() as p:
            example.build_pipeline(p, p | beam.Create(documents()), Budget(4.0, 1e-5),
                                   accountant=accountant)
    assert accountant.spent() == {"epsilon": 1.0, "delta": 0.0}


def test_main_writes_sorted_word_stats_and_report(tmp_path):
    src = tmp_path / "reviews.csv.gz"
    with gzip.open(src, "wt", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["user", "review"])
        for user, tokens in documents():
            writer.writerow([user, " ".join(tokens)])
    out = tmp_path / "out"
    assert example.main(["--input", str(src), "--epsilon", "4", "--delta", "1e-5",
                         "--max-words-per-user", "3", "--max-partitions-per-user", "2",
                         "--output", str(out)]) == 0
    lines = (out / "word_stats.tsv").read_text().splitlines()
    words = [line.split("\t")[0] for line in lines]
    assert words == sorted(words) and {"film", "great"} <= set(words)
    report = read_report(out)
    assert report["spent"] == {"epsilon": 4.0, "delta": 1e-5}
    assert report["aggregation"]["public_partitions"] == "the released words"
    assert report["aggregation"]["rows_kept_by"] == "beam_dpsu.KeepReleased (side input)"
