"""The deepest pipelines the jobs accept fit Beam's Python runners.

SIPS rounds and DPNE levels are unrolled when the pipeline is built, so the
longest chain of steps grows with ``--rounds`` and ``--max-n``. Beam's Python
runners walk that chain recursively, one Python frame per step (the FnApiRunner
behind the DirectRunner in ``compute_downstream_side_inputs``, the PortableRunner
in ``sort_stages`` and again in Beam's local job service, a process of its own
whose recursion limit a job cannot raise). At the default limit of 1000 frames
a chain of about 950 steps ended in ``RecursionError``: 100 rounds or levels
used to be accepted and failed after 12-19 s. These tests build each job's
deepest pipeline at the largest value the library accepts (without running it)
and require the chain to leave a quarter of the limit to the runner's own
frames and to steps a caller adds.
"""

import sys

import apache_beam as beam
import pytest

from beam_dpsu.core.ngram_parameters import MAX_NGRAM_LENGTH
from beam_dpsu.core.parallel_mechanisms import SIPS
from pipelines import ngrams, vocabulary
from tests.support.runner import RUNNER_FLAG

pytestmark = [pytest.mark.job, pytest.mark.pipeline]

# Beam's runners run with Python's default limit; a quarter is left free.
ROOM = 750


def longest_chain(pipeline: beam.Pipeline) -> int:
    """The number of primitive steps on the longest path of ``pipeline``'s graph
    (side inputs count as inputs, as in Beam's translation)."""
    transforms = pipeline.to_runner_api().components.transforms
    leaves = {k: t for k, t in transforms.items() if not t.subtransforms}
    producer = {p: k for k, t in leaves.items() for p in t.outputs.values()}
    before = {k: {producer[p] for p in t.inputs.values()
                  if p in producer and producer[p] != k}
              for k, t in leaves.items()}
    depth: dict = {}
    while len(depth) < len(before):
        for k, previous in before.items():
            if k not in depth and all(p in depth for p in previous):
                depth[k] = 1 + max((depth[p] for p in previous), default=0)
    return max(depth.values())


def test_the_default_recursion_limit_is_what_the_room_is_measured_against():
    assert sys.getrecursionlimit() >= 1000 > ROOM


@pytest.mark.parametrize("extra", [
    ["--sips-removal", "join", "--max-items-per-user", "auto", "--with-counts",
     "--counts-max-items-per-user", "auto"],
    ["--max-items-per-user", "auto", "--with-counts"],
], ids=["join", "side_input"])
def test_the_most_sips_rounds_fit_the_runners(extra, tmp_path):
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("u1,a\nu2,a\n", encoding="utf-8")
    args, _, mechanism, budget = vocabulary.parse_args(
        ["--input", str(pairs), "--format", "pairs", "--mechanism", "sips",
         "--rounds", str(SIPS.MAX_ROUNDS), "--epsilon", "1", "--delta", "1e-5",
         "--output", str(tmp_path / "out"), *extra])
    pipeline = beam.Pipeline()
    vocabulary.build_pipeline(pipeline, args, mechanism, budget, str(tmp_path / "out"))
    assert longest_chain(pipeline) <= ROOM


def test_the_longest_ngrams_fit_the_runners(tmp_path):
    args, _, transform = ngrams.parse_args(
        ["--input", "examples/msnbc_1k.seq", "--max-n", str(MAX_NGRAM_LENGTH),
         "--max-items-per-user", "auto", "--level1", "policy-gaussian", "--with-counts",
         "--epsilon", "1", "--delta", "1e-7", "--eta", "0.01",
         "--output", str(tmp_path / "out")])
    pipeline = beam.Pipeline()
    ngrams.build_pipeline(pipeline, args, transform, str(tmp_path / "out"))
    assert longest_chain(pipeline) <= ROOM


@pytest.mark.parametrize("argv, message", [
    (["--mechanism", "sips", "--rounds", str(SIPS.MAX_ROUNDS + 1)],
     f"error: --rounds must be at most {SIPS.MAX_ROUNDS} (each round is a stage of the "
     f"pipeline), got {SIPS.MAX_ROUNDS + 1}"),
], ids=["rounds"])
def test_one_more_round_is_refused_in_one_line(argv, message, tmp_path, capsys):
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("u1,a\n", encoding="utf-8")
    code = vocabulary.main([RUNNER_FLAG, "--input", str(pairs), "--format", "pairs", "--epsilon",
                            "1",
                            "--delta", "1e-5", "--output", str(tmp_path / "out"), *argv])
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines() == [message]
    assert not (tmp_path / "out").exists()
