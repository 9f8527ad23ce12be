"""Peer comparison: PipelineDP's partition selection next to beam_dpsu, same data and budget.

    pip install -e ".[bench]"
    python -m pipelines.evaluation.peers --input data/imdb_50k_reviews.csv.gz \\
        --format csv --user-field @row --text-field review \\
        --epsilon 1 --delta 1e-5 --max-items-per-user 100 \\
        --peer-strategies TRUNCATED_GEOMETRIC,LAPLACE_THRESHOLDING,GAUSSIAN_THRESHOLDING \\
        --mechanisms sips:auto,sips

Each selection is one DirectRunner pipeline in a fresh Python process (this
script re-run with ``--selection I``). Times and memory are figures of the run,
not private: for evaluation only (docs/explanation/reading.md#the-peer-comparison).
PipelineDP is an optional dependency of this script only.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import time
from types import SimpleNamespace

from pipelines.flags import flags, int_or_auto, JobArgumentParser, parse_job_args
from pipelines.flag_groups import add_input_arguments, add_mechanism_arguments
from pipelines.settings import (check_calibrates, mechanism_from_args, read_input,
                                require_selection_delta, resolve_input)
from pipelines.evaluation.lists import comma_list
from pipelines.errors import flag_errors, UsageError
from pipelines.job_runner import check_scratch_folder, job_pipeline, read_json, run_job
from pipelines.interrupts import end_program
from pipelines.evaluation.benchmark import ROOT, absolute_inputs, read_count, time_process
import apache_beam as beam  # noqa: E402

from beam_dpsu.core.budgets import Budget  # noqa: E402
from beam_dpsu.core.checks import canonical_name  # noqa: E402
from beam_dpsu.core.max_items_choice import is_auto  # noqa: E402
from beam_dpsu.select_items import SelectItems  # noqa: E402
from pipelines.io.formats import FORMATS  # noqa: E402
from pipelines.io.read import ReadPairs  # noqa: E402

PROG = "python -m pipelines.evaluation.peers"

# Every strategy PipelineDP 0.3 offers; "its best strategy" is the best of these.
PEER_STRATEGIES = ("TRUNCATED_GEOMETRIC", "LAPLACE_THRESHOLDING", "GAUSSIAN_THRESHOLDING",
                   "WEIGHTED_GAUSSIAN_THRESHOLDING")
DEFAULT_MECHANISMS = "sips:auto,weighted-gaussian,policy-gaussian,sips,gw,truncated-geometric"


def _pipeline_dp_select(pairs, strategy_name: str, budget: Budget, max_items: int):
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
                    "same data and (ε, δ) budget, each in a fresh process: released items, "
                    "wall time and peak memory side by side.",
        examples=[f"{PROG} --input examples/imdb_2k.csv.gz --user-field user --text-field "
                  "review --epsilon 1 --delta 1e-5 --max-items-per-user 100 "
                  "--mechanisms sips:auto,sips"])
    add_input_arguments(parser, FORMATS)
    add_mechanism_arguments(
        parser, several=True, public_input=False, default=DEFAULT_MECHANISMS,
        several_metavar="NAME[:N|auto],…",
        several_help="; NAME:auto or NAME:N runs it at that --max-items-per-user instead "
                     "(sips:auto is the vocabulary job's default; PipelineDP keeps the fixed "
                     "one) (default: " + DEFAULT_MECHANISMS.replace(",", ", ") + ")")
    g = parser.add_argument_group("budget and peers")
    g.add_argument(*flags("epsilon"), type=float, required=True, metavar="E",
                   help="ε of the (ε, δ)-DP budget every selection gets")
    g.add_argument(*flags("delta"), type=float, required=True, metavar="D",
                   help="δ of the budget")
    g.add_argument(*flags("peer-strategies"), default=",".join(PEER_STRATEGIES), metavar="NAMES",
                   help="PipelineDP strategies to run (its weighted Gaussian recomputes σ for "
                        "every partition and is slow on large vocabularies)")
    g.add_argument(*flags("workdir"), default="/tmp/beam_dpsu_peers", metavar="FOLDER",
                   help="scratch folder for the counts and the processes' logs")
    g.add_argument(*flags("selection"), type=int, metavar="I",
                   help="run only the I-th selection (from 0: PipelineDP's strategies, then "
                        "--mechanisms) in this process and write its result to the workdir; "
                        "what each timed process runs")
    return parser


def prepare(argv):
    argv = list(sys.argv[1:] if argv is None else argv)
    args, options = parse_job_args(build_parser(), argv)
    # Found, not imported: only PipelineDP's own selections load it, so that our
    # rows' processes (time and peak memory) hold none of its modules.
    if importlib.util.find_spec("pipeline_dp") is None:
        raise UsageError("this benchmark needs PipelineDP: pip install -e '.[bench]'")
    with flag_errors():
        budget = Budget(args.epsilon, args.delta)
    require_selection_delta(budget.delta)
    if args.max_items_per_user == "auto":
        raise UsageError("--max-items-per-user auto is not offered here: PipelineDP's "
                         "max_partitions_contributed takes a fixed int (give our "
                         "mechanisms auto as --mechanisms sips:auto)")
    args.max_items_per_user = args.max_items_per_user or 100
    # PipelineDP's names, read as mechanism names are (case and spaces ignored).
    strategies = comma_list(args.peer_strategies, "--peer-strategies",
                            lambda name: canonical_name(name).upper(), "strategies")
    if unknown := set(strategies) - set(PEER_STRATEGIES):
        raise UsageError(f"unknown PipelineDP strategies {sorted(unknown)}; choose from "
                         f"{list(PEER_STRATEGIES)}")
    mechanisms = []
    for entry in comma_list(args.mechanisms, "--mechanisms", canonical_name, "mechanisms"):
        name, colon, value = entry.partition(":")  # NAME[:N|auto]
        try:
            max_items = int_or_auto(value) if colon else args.max_items_per_user
        except argparse.ArgumentTypeError as exc:
            raise UsageError(f"--mechanisms {entry!r}: {exc}") from None
        mechanisms.append(mechanism_from_args(
            argparse.Namespace(**{**vars(args), "max_items_per_user": max_items}), name,
            ignore_unused=True))
    with flag_errors(mechanism="--mechanisms"):
        for mechanism in mechanisms:
            check_calibrates(mechanism, budget)
    count = len(strategies) + len(mechanisms)
    if args.selection is not None and not 0 <= args.selection < count:
        raise UsageError(f"--selection must be in 0..{count - 1}, got {args.selection}")
    args.files = resolve_input(args, FORMATS)
    check_scratch_folder(args.workdir, "--workdir")  # created here, once the rest is checked
    args.workdir = os.path.abspath(args.workdir)
    return SimpleNamespace(args=args, argv=argv, options=options, budget=budget,
                           strategies=strategies, mechanisms=mechanisms, output=None)


def _selections(job) -> list:
    """(label, Δ0, PipelineDP strategy or our mechanism) per selection, in --selection order."""
    runs = [(f"PipelineDP {s.lower()}", job.args.max_items_per_user, s) for s in job.strategies]
    for m in job.mechanisms:
        default = m.name == "sips" and is_auto(m.max_items_per_user)
        runs.append((f"beam_dpsu {m.name}" + " (default job)" * default, m.max_items_per_user, m))
    return runs


def _child_argv(job, index: int) -> list:
    """This run's flags for selection ``index``'s process (run in the project's root)."""
    out, skip = [], False
    for arg in absolute_inputs(job.argv):
        if skip:
            skip = False
        elif arg.split("=")[0] in flags("workdir") + flags("selection"):
            skip = "=" not in arg
        else:
            out.append(arg)
    return [*out, "--workdir", job.args.workdir, "--selection", str(index)]


def run_prepared(job) -> str:
    args, budget = job.args, job.budget
    # --workdir: scratch, kept (not a release folder), created by prepare.
    if args.selection is not None:  # run it here; write {released, seconds, max_items}
        _, max_items, selection = _selections(job)[args.selection]
        base = os.path.join(args.workdir, f"run{args.selection}")
        chosen = None
        start = time.perf_counter()
        with job_pipeline(job.options) as p:
            pairs = p | "ReadPairs" >> read_input(ReadPairs, args)
            if isinstance(selection, str):
                released = _pipeline_dp_select(pairs, selection, budget, max_items)
            else:
                select = SelectItems(selection, budget, hot_key_fanout=args.hot_key_fanout)
                released, chosen = pairs | "SelectItems" >> select, select.chosen_max_items_per_user
            _ = (released | "CountReleased" >> beam.combiners.Count.Globally()
                 | "WriteReleased" >> beam.io.WriteToText(f"{base}.txt", shard_name_template=""))
            if chosen is not None:  # the Δ0 chosen privately (a DP release)
                _ = chosen | "WriteChosen" >> beam.io.WriteToText(f"{base}.chosen.txt",
                                                                   shard_name_template="")
        seconds = time.perf_counter() - start
        if chosen is not None:
            max_items = f"auto → {read_count(f'{base}.chosen.txt')}"
        with open(f"{base}.json", "w", encoding="utf-8") as f:
            json.dump({"released": read_count(f"{base}.txt"), "seconds": seconds,
                       "max_items": max_items}, f)
        return ""
    print(f"budget (ε, δ) = ({budget.epsilon:g}, {budget.delta:g}), "
          f"Δ0 = {args.max_items_per_user}; each selection in its own process; wall s: the "
          "pipeline, peak MiB: the process's ru_maxrss (non-private figures of the run)")
    print(f"{'selection':>42} | {'Δ0':>10} | {'released':>9} | {'wall s':>7} | "
          f"{'peak MiB':>8}", flush=True)
    for i, (name, _, _) in enumerate(_selections(job)):
        result_path = os.path.join(args.workdir, f"run{i}.json")
        if os.path.exists(result_path):
            os.remove(result_path)  # a previous run's
        command = [sys.executable, "-m", "pipelines.evaluation.peers", *_child_argv(job, i)]
        _, peak = time_process(command, ROOT, os.path.join(args.workdir, f"run{i}.log"))
        result = read_json(result_path)
        print(f"{name:>42} | {result['max_items']:>10} | {result['released']:>9,} | "
              f"{result['seconds']:>7.1f} | {peak:>8,.0f}", flush=True)
    return ""


def main(argv=None) -> int:
    return run_job("benchmark_peers", argv, prepare, run_prepared)


if __name__ == "__main__":
    end_program(main())
