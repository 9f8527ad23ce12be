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
from tests.support.runner import job_args

pytestmark = [pytest.mark.job, pytest.mark.pipeline]

# Beam's runners run with Python's default limit; a quarter is left free.
ROOM = 750


def longest_chain(pipeline: beam.Pipeline) -> int:
    """The number of primitive steps on the longest path of ``pipeline``'s graph
    (side inputs count as inputs, as in Beam's translation).

    Read from the graph as built: Beam's visitor reaches every primitive after the
    producers of its inputs and side inputs, so one pass gives each step's depth. A
    composite that returns its input adds no step here; the runner API lists it as a
    step without parts, which can only shorten the chain read from there
    (``test_the_graph_chain_is_at_least_the_runner_api_chain``), and translating the
    deepest pipelines to the runner API took longer than building them.
    """
    depth: dict = {}

    class Depths(beam.pipeline.PipelineVisitor):
        def visit_transform(self, node):
            inputs = [*node.main_inputs.values(), *(s.pvalue for s in node.side_inputs)]
            depth[node] = 1 + max((depth[p.producer] for p in inputs
                                   if getattr(p, "producer", None) in depth), default=0)

    pipeline.visit(Depths())
    return max(depth.values())


def runner_api_chain(pipeline: beam.Pipeline) -> int:
    """:func:`longest_chain` read from ``pipeline``'s runner-API translation, which the
    runners walk: the leaves of its transforms, their inputs (side inputs among them)
    and outputs by id."""
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


def sips_pipeline(tmp_path, rounds: int, extra) -> beam.Pipeline:
    """The vocabulary job's SIPS pipeline with ``rounds`` rounds, built, not run."""
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("u1,a\nu2,a\n", encoding="utf-8")
    args, _, mechanism, budget = vocabulary.parse_args(
        ["--input", str(pairs), "--format", "pairs", "--mechanism", "sips",
         "--rounds", str(rounds), "--epsilon", "1", "--delta", "1e-5",
         "--output", str(tmp_path / "out"), *extra])
    pipeline = beam.Pipeline()
    vocabulary.build_pipeline(pipeline, args, mechanism, budget, str(tmp_path / "out"))
    return pipeline


JOIN = ["--sips-removal", "join", "--max-items-per-user", "auto", "--with-counts",
        "--counts-max-items-per-user", "auto"]


def test_the_graph_chain_is_at_least_the_runner_api_chain(tmp_path):
    # Two rounds have every kind of step the deepest pipeline repeats (joins, side
    # inputs, pass-through composites) at a tenth of its translation time.
    pipeline = sips_pipeline(tmp_path, 2, JOIN)
    assert longest_chain(pipeline) >= runner_api_chain(pipeline) > 50


@pytest.mark.parametrize("extra", [
    JOIN,
    ["--max-items-per-user", "auto", "--with-counts"],
], ids=["join", "side_input"])
def test_the_most_sips_rounds_fit_the_runners(extra, tmp_path):
    assert longest_chain(sips_pipeline(tmp_path, SIPS.MAX_ROUNDS, extra)) <= ROOM


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
    code = vocabulary.main(job_args(["--input", str(pairs), "--format", "pairs", "--epsilon",
                            "1",
                            "--delta", "1e-5", "--output", str(tmp_path / "out"), *argv]))
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines() == [message]
    assert not (tmp_path / "out").exists()
