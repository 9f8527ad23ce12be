"""The README's code runs: the pipeline example and the composition pattern."""

import os
import re

import apache_beam as beam
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

import beam_dpsu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def python_blocks():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


def test_readme_pipeline_example_runs(capsys):
    exec(compile(python_blocks()[0], "README.md", "exec"), {})
    assert "release_threshold" in capsys.readouterr().out


def test_composition_pattern_from_readme():
    budget = beam_dpsu.Budget(epsilon=2.0, delta=1e-6)
    selection_budget, aggregation_budget = budget.split([1, 3])
    accountant = beam_dpsu.BudgetAccountant(budget)
    rows = [{"key": "common", "value": 1}] * 3 + [{"key": "secret", "value": 5}]
    pairs = [(f"u{i}", "common") for i in range(300)] + [("loner", "secret")]
    with TestPipeline() as p:
        keys = p | "Pairs" >> beam.Create(pairs) | "SelectKeys" >> beam_dpsu.SelectItems(
            beam_dpsu.WeightedGaussian(20), accountant.spend(selection_budget), seed=1)
        kept = (p | "Rows" >> beam.Create(rows)
                | beam.Filter(lambda r, ks: r["key"] in ks,
                              beam.pvalue.AsDict(keys | beam.Map(lambda k: (k, None)))))
        assert_that(kept | beam.Map(lambda r: r["key"]), equal_to(["common"] * 3))
    accountant.spend(aggregation_budget)
    with pytest.raises(beam_dpsu.BudgetExceededError):
        accountant.spend(beam_dpsu.Budget(0.01, 1e-9))


def test_readme_counts_example_runs(capsys):
    block = next(b for b in python_blocks() if "CountReleased" in b)
    exec(compile(block, "README.md", "exec"), {})
    out = capsys.readouterr().out
    assert out.startswith("discrete_gaussian 14.14213")  # σ² = Δ0/(2ρ) = 20/(2·0.05) = 200
    # Both items are released (300 holders each) and counted once each.
    counted = [line for line in out.splitlines() if line.startswith("(")]
    assert sorted(line.split(",")[0] for line in counted) == ["('cat'", "('dog'"]
