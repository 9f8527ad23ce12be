"""Peer comparison: PipelineDP's partition selection next to beam_dpsu, same data and budget.

    pip install -e ".[bench]"
    python -m pipelines.evaluation.peers --input data/imdb_50k_reviews.csv.gz \\
        --format csv --user-field @row --text-field review \\
        --epsilon 1 --delta 1e-5 --max-items-per-user 100

The same (user, item) pairs go through PipelineDP's ``select_partitions``
(each of its strategies — truncated geometric, its default; Laplace and
Gaussian thresholding; weighted Gaussian — at (ε, δ) with
``max_partitions_contributed`` = Δ0) and through our
mechanisms (``--mechanisms``, default weighted-gaussian, policy-gaussian,
sips, gw, truncated-geometric — the last is the same algorithm as PipelineDP's
default strategy), one DirectRunner pipeline each. It prints released items and wall
time side by side. PipelineDP is an optional dependency of this script only.
"""

from __future__ import annotations

import os
import sys
import time
from types import SimpleNamespace

from pipelines.flags import flags, JobArgumentParser, parse_job_args
from pipelines.flag_groups import add_input_arguments, add_mechanism_arguments
from pipelines.settings import mechanism_from_args, require_selection_delta, tokenizer_from_args
from pipelines.errors import flag_errors, UsageError
from pipelines.input_flags import resolve_input
from pipelines.job_runner import job_pipeline, run_job
import apache_beam as beam  # noqa: E402

from beam_dpsu.core.budgets import Budget  # noqa: E402
from beam_dpsu.select_items import SelectItems  # noqa: E402
from pipelines.io.formats import FORMATS  # noqa: E402
from pipelines.io.read import ReadPairs  # noqa: E402

PROG = "python -m pipelines.evaluation.peers"

# Every strategy PipelineDP 0.3 offers; "its best strategy" is the best of these.
PEER_STRATEGIES = ("TRUNCATED_GEOMETRIC", "LAPLACE_THRESHOLDING", "GAUSSIAN_THRESHOLDING",
                   "WEIGHTED_GAUSSIAN_THRESHOLDING")


def _count_into(pcoll, path: str, label: str):
    """Counts ``pcoll`` and writes the number to ``path`` (read back after the run)."""
    return (pcoll
            | f"Count{label}" >> beam.combiners.Count.Globally()
            | f"Write{label}" >> beam.io.WriteToText(path, shard_name_template=""))


def _read_count(path: str) -> int:
    with open(path, encoding="utf-8") as f:
        return int(f.read().strip())


def pipeline_dp_select(pairs, strategy_name: str, budget: Budget, max_items: int):
    """PipelineDP's select_partitions on (user, item) pairs (its Beam backend)."""
    import pipeline_dp

    accountant = pipeline_dp.NaiveBudgetAccountant(total_epsilon=budget.epsilon,
                                                   total_delta=budget.delta)
    engine = pipeline_dp.DPEngine(accountant, pipeline_dp.BeamBackend())
    params = pipeline_dp.SelectPartitionsParams(
        max_partitions_contributed=max_items,
        partition_selection_strategy=getattr(pipeline_dp.PartitionSelectionStrategy,
                                             strategy_name))
    extractors = pipeline_dp.DataExtractors(privacy_id_extractor=lambda r: r[0],
                                            partition_extractor=lambda r: r[1])
    selected = engine.select_partitions(pairs, params, extractors)
    accountant.compute_budgets()
    return selected


def build_parser() -> JobArgumentParser:
    parser = JobArgumentParser(
        prog=PROG,
        description="PipelineDP's partition selection next to beam_dpsu's mechanisms on the "
                    "same data and (ε, δ) budget: released items and wall time side by side.",
        examples=[f"{PROG} --input examples/imdb_2k.csv.gz --user-field user --text-field "
                  "review --epsilon 1 --delta 1e-5 --max-items-per-user 100"])
    add_input_arguments(parser, FORMATS)
    add_mechanism_arguments(parser, several=True, public_input=False)
    parser.set_defaults(mechanisms="weighted-gaussian,policy-gaussian,sips,gw,truncated-geometric")
    g = parser.add_argument_group("budget and peers")
    g.add_argument(*flags("epsilon"), type=float, required=True, metavar="E",
                   help="ε of the (ε, δ)-DP budget every selection gets")
    g.add_argument(*flags("delta"), type=float, required=True, metavar="D",
                   help="δ of the budget")
    g.add_argument(*flags("peer-strategies"), default=",".join(PEER_STRATEGIES),
                   metavar="NAMES",
                   help="PipelineDP strategies to run (its weighted Gaussian recomputes σ for "
                        "every partition and is slow on large vocabularies)")
    g.add_argument(*flags("workdir"), default="/tmp/beam_dpsu_peers", metavar="FOLDER",
                   help="scratch folder for the counts")
    return parser


def prepare(argv):
    args, options = parse_job_args(build_parser(), argv)
    try:
        import pipeline_dp  # noqa: F401
    except ImportError:
        raise UsageError("this benchmark needs PipelineDP: pip install -e '.[bench]'") \
            from None
    with flag_errors():
        budget = Budget(args.epsilon, args.delta)
    require_selection_delta(budget.delta)
    if args.max_items_per_user == "auto":
        raise UsageError("--max-items-per-user auto is not offered here: PipelineDP's "
                             "max_partitions_contributed takes a fixed int")
    args.max_items_per_user = args.max_items_per_user or 100
    strategies = [s.strip() for s in args.peer_strategies.split(",") if s.strip()]
    unknown = set(strategies) - set(PEER_STRATEGIES)
    if unknown:
        raise UsageError(f"unknown PipelineDP strategies {sorted(unknown)}; choose from "
                             f"{list(PEER_STRATEGIES)}")
    mechanisms = [mechanism_from_args(args, name.strip(), ignore_unused=True)
                  for name in args.mechanisms.split(",") if name.strip()]
    with flag_errors(mechanism="--mechanisms"):
        for mechanism in mechanisms:
            mechanism.calibrate(budget)
    args.files = resolve_input(args, FORMATS)
    return SimpleNamespace(args=args, options=options, budget=budget, strategies=strategies,
                           mechanisms=mechanisms, output=None)


def run_prepared(job) -> str:
    args, budget, max_items = job.args, job.budget, job.args.max_items_per_user
    tokenizer = tokenizer_from_args(args)

    def read(p):
        return p | "ReadPairs" >> ReadPairs(args.input, args.format, args.user_field,
                                            args.text_field, tokenizer, args.skip_header_lines,
                                            files=args.files, items_field=args.items_field)

    runs = [(f"PipelineDP {s.lower()}", lambda pairs, s=s: pipeline_dp_select(
        pairs, s, budget, max_items)) for s in job.strategies]
    for mechanism in job.mechanisms:
        runs.append((f"beam_dpsu {mechanism.name}",
                     lambda pairs, m=mechanism: pairs | SelectItems(
                         m, budget, hot_key_fanout=args.hot_key_fanout)))

    print(f"budget (ε, δ) = ({budget.epsilon:g}, {budget.delta:g}), Δ0 = {max_items}")
    print(f"{'selection':>42} | {'released':>9} | {'wall s':>7}", flush=True)
    os.makedirs(args.workdir, exist_ok=True)  # scratch, kept: not a release folder
    for i, (name, select) in enumerate(runs):
        out = f"{args.workdir}/run{i}.txt"
        start = time.perf_counter()
        with job_pipeline(job.options) as p:
            _count_into(select(read(p)), out, "Released")
        seconds = time.perf_counter() - start
        print(f"{name:>42} | {_read_count(out):>9,} | {seconds:>7.1f}", flush=True)
    return ""


def main(argv=None) -> int:
    return run_job("benchmark_peers", argv, prepare, run_prepared)


if __name__ == "__main__":
    sys.exit(main())
