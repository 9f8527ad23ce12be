"""The vocabulary job: release the words (or items) of a user corpus under user-level DP.

SIPS with Δ0 chosen privately unless ``--mechanism``/``--max-items-per-user``
say otherwise. Writes the released items, sorted, to ``OUT/items-*.txt`` (or
``.parquet``), ``OUT/report.json`` and, with ``--with-counts``, their noisy
counts. Raw counts of the input only with ``--non-private-stats``.
Details: docs/explanation/jobs.md#the-two-jobs-outputs
"""

from __future__ import annotations

import dataclasses
import functools
from types import SimpleNamespace

import apache_beam as beam

from beam_dpsu.core import mechanisms
from beam_dpsu.core.checks import canonical_name, plural
from beam_dpsu.core.report import NON_PRIVATE_NOTE
from beam_dpsu.select_items import SelectItems
from pipelines.errors import UsageError, flag_errors
from pipelines.flag_groups import (add_budget_arguments, add_counts_arguments,
                                   add_input_arguments, add_mechanism_arguments,
                                   add_non_private_stats_argument, add_output_arguments)
from pipelines.flags import JobArgumentParser, parse_job_args
from pipelines.io.formats import FORMATS, ROW_AS_USER
from pipelines.io.read import ReadPairs, ReadUserItems, items_of
from pipelines.interrupts import end_program
from pipelines.job_runner import (CHOSEN, chosen_side_inputs, run_and_read_report, run_job,
                                  write_report)
from pipelines.progress import LogCount
from pipelines.settings import (budget_from_args, budget_parts_from_args, check_calibrates,
                                check_counts, check_num_shards, check_public_input,
                                describe_budget, mechanism_from_args, privacy_unit_from_args,
                                read_input, resolve_input, summary_line, tokenizer_from_args,
                                with_counts_report, write_released)

__all__ = ["build_parser", "parse_args", "build_pipeline", "main", "InputStats"]

PROG = "python -m pipelines.vocabulary"


def build_parser(prog: str = PROG) -> JobArgumentParser:
    parser = JobArgumentParser(
        prog=prog,
        description="Release the vocabulary (the distinct words or items) of a user corpus "
                    "under user-level differential privacy. Writes the released items, "
                    "sorted, and report.json.",
        examples=[
            f"{prog} --input examples/imdb_2k.csv.gz --user-field user --text-field review "
            "--rho 0.1 --delta 1e-5 --max-items-per-user 100 --output out/vocabulary",
            f"{prog} --input 'pairs-*.csv' --format pairs --mechanism sips --epsilon 1 "
            "--delta 1e-6 --max-items-per-user 20 --output out/keys "
            "--direct_num_workers 4 --direct_running_mode multi_processing",
        ])
    add_input_arguments(parser, FORMATS)
    # SIPS by default: the most items at the same budget (docs/benchmarks.md).
    add_mechanism_arguments(parser, auto_default=True, default="sips")
    add_budget_arguments(parser)
    add_counts_arguments(parser, "--max-items-per-user, or 100")
    add_output_arguments(parser, "items")
    add_non_private_stats_argument(parser, "users, pairs, distinct items; items released "
                                           "per SIPS round")
    return parser


JOB_DEFAULTS_NOTE = ("not given, so the job's defaults: SIPS releases the most items of the "
                     "parallel mechanisms at a budget, and 'auto' chooses max_items_per_user "
                     "privately (the rule in max_items_per_user.rule)")

# Δ0 is "auto" by default for the mechanisms the Δ0 benchmark measured.
AUTO_BY_DEFAULT = ("weighted-gaussian", "policy-gaussian", "sips")


def parse_args(argv, prog: str = PROG):
    """(job arguments, Beam PipelineOptions, mechanism config, budget); raises on bad input.

    Checks all that needs no pipeline, the first records of every input file too.
    """
    parser = build_parser(prog)
    args, options = parse_job_args(parser, argv)
    budget = budget_from_args(args)
    # The settings the job chose because they were not given (the report says so).
    args.job_defaults = {}
    if not parser.was_given("mechanism"):
        args.job_defaults["mechanism"] = args.mechanism
    if args.max_items_per_user is None and canonical_name(args.mechanism) in AUTO_BY_DEFAULT:
        # Close to the best fixed Δ0 of a grid (docs/benchmarks.md, "Choosing Δ0 privately").
        args.max_items_per_user = "auto"
        args.job_defaults["max_items_per_user"] = "auto"
    mechanism = mechanism_from_args(args)
    # Split once (the tight split calibrates the selection many times).
    args.budget_parts = parts = budget_parts_from_args(args, budget, mechanism,
                                                       counts_max_items(args))
    # A mechanism/budget mismatch fails before any input is read.
    with flag_errors():
        check_calibrates(mechanism, budget if parts is None else parts.selection,
                         args.pre_threshold)
    check_counts(parts, counts_max_items(args))
    check_num_shards(args)
    if args.public_input and not isinstance(mechanism, mechanisms.GreedyWithoutSampling):
        raise UsageError(f"--public-input applies to --mechanism gw only, not {mechanism.name!r}")
    args.files = resolve_input(args, FORMATS)
    check_public_input(args)
    return args, options, mechanism, budget


def with_public_counts(pipeline, args, mechanism, tokenizer):
    """GW-KT: (GW ranking by public counts, the public corpus's counts), or (mechanism, None)."""
    if not getattr(args, "public_input", None):
        return mechanism, None
    public_counts = (pipeline
                     | "ReadPublicItems" >> ReadPairs(
                         args.public_input, args.public_format, ROW_AS_USER,
                         args.public_text_field or None, tokenizer)
                     | "PublicItems" >> beam.Values()
                     | "CountPublicItems" >> beam.combiners.Count.PerElement())
    # Without --max-items-per-user, GW-KT gets its own default Δ0 (None → 300).
    return dataclasses.replace(mechanism, public_order=True,
                               max_items_per_user=args.max_items_per_user), public_counts


class InputStats(beam.PTransform):
    """(user, items) records → raw counts: users, pairs, distinct items (NOT private)."""

    def expand(self, elements):
        count = beam.combiners.Count.Globally
        n_pairs = (elements | "PairsPerElement" >> beam.Map(lambda e: len(items_of(e[1])))
                   | "SumPairs" >> beam.CombineGlobally(sum))
        # Users holding at least one item (a row without tokens adds no user).
        n_users = (elements | "NonEmpty" >> beam.Filter(lambda e: len(items_of(e[1])) > 0)
                   | "Users" >> beam.Keys() | "DistinctUsers" >> beam.Distinct()
                   | "CountUsers" >> count())
        n_items = (elements | "Items" >> beam.FlatMap(lambda e: items_of(e[1]))
                   | "DistinctItems" >> beam.Distinct() | "CountItems" >> count())
        single = beam.pvalue.AsSingleton
        return (elements.pipeline | "Seed" >> beam.Create([None])
                | "Assemble" >> beam.Map(
                    lambda _, users, pairs_, items: {
                        "users": users, "pairs": pairs_, "distinct_items": items},
                    users=single(n_users), pairs_=single(n_pairs), items=single(n_items)))


def build_pipeline(pipeline: beam.Pipeline, args, mechanism, budget,
                   out: str | None = None) -> SelectItems:
    """Adds the job to ``pipeline``: read, select, write items and report into ``out``."""
    # Every row or document as one (user, tokens) record: never one element per token.
    tokenizer = tokenizer_from_args(args)
    elements = pipeline | "ReadUserItems" >> read_input(ReadUserItems, args,
                                                        log_records=args.non_private_stats)
    mechanism, public_counts = with_public_counts(pipeline, args, mechanism, tokenizer)
    # Where every row is its own user (@row, text lines): its tokens, no per-user shuffle.
    privacy_unit = privacy_unit_from_args(args)
    selected = (elements if privacy_unit == "user_id" else elements | "RowTokens" >> beam.Values())
    parts = args.budget_parts
    select = SelectItems(mechanism, budget if parts is None else parts.selection,
                         seed=args.seed, hot_key_fanout=args.hot_key_fanout,
                         privacy_unit=privacy_unit, non_private_stats=args.non_private_stats,
                         public_counts=public_counts, pre_threshold=args.pre_threshold)
    released = selected | "SelectItems" >> select
    # All outputs depend on the released set, its noisy counts and the parameters only.
    out = (out or args.output).rstrip("/")  # run_prepared: the staging folder
    counter = write_released(released, args, out, "items", None if parts is None else selected,
                             counts_max_items(args), privacy_unit)
    single = beam.pvalue.AsSingleton
    side = {"released_items": single(released | "LogReleased" >> LogCount(
        f"{mechanism.name}: released {{n:,}} item{{s}}")), **chosen_side_inputs(select, counter)}
    # Per-round sizes of SIPS are more than the released set: only with --non-private-stats.
    by_stage = select.non_private_released_by_stage
    for i, (stage, pcoll) in enumerate(by_stage.items(), start=1):
        side[stage] = single(pcoll | f"Count_{stage}" >> LogCount(
            f"SIPS round {i} of {len(by_stage)}: released {{n:,}} item{{s}} (non-private)"))
    static = with_counts_report(select.report, parts, counter, select.calibration)
    job_defaults = getattr(args, "job_defaults", None)
    if job_defaults:
        static = {**static, "job_defaults": {**job_defaults, "note": JOB_DEFAULTS_NOTE}}
    output_format = args.output_format

    def assemble(_, released_items, stats=None, **by_stage):
        report = {**static, "released_items": released_items}
        report.update((name, by_stage.pop(name)) for name in CHOSEN if name in by_stage)
        if stats is not None:
            report["non_private_counts"] = {**stats, "note": NON_PRIVATE_NOTE}
            if by_stage:
                report["non_private_counts"]["released_by_stage"] = by_stage
        report["output_format"] = output_format
        return report

    if args.non_private_stats:
        side["stats"] = single(elements | "InputStats" >> InputStats())
    write_report(pipeline, assemble, side, out)
    return select


def counts_max_items(args) -> int | str:
    """Δ0 of the counts: --counts-max-items-per-user, else --max-items-per-user, else 100."""
    if args.counts_max_items_per_user is not None:
        return args.counts_max_items_per_user
    return args.max_items_per_user or 100


def prepare(argv, prog: str = PROG):
    args, options, mechanism, budget = parse_args(argv, prog)
    return SimpleNamespace(args=args, options=options, mechanism=mechanism, budget=budget,
                           output=args.output, overwrite=args.overwrite,
                           inputs=args.files + [args.public_input or ""])


def run_prepared(job) -> str:
    args, mechanism = job.args, job.mechanism
    report = run_and_read_report(
        job, lambda pipeline, out: build_pipeline(pipeline, args, mechanism, job.budget, out),
        f"releasing items with {mechanism.name} under {describe_budget(job.budget)}")
    chosen = report.get("chosen_max_items_per_user")
    fixed = report.get("mechanism", {}).get("max_items_per_user")
    default = "mechanism" in getattr(args, "job_defaults", {})
    pre_threshold = report.get("pre_threshold", 1)
    settings = ([f"max items per user {chosen:,}, chosen privately"] if chosen is not None
                else [f"max items per user {fixed:,}"] if isinstance(fixed, int) else [])
    settings += [f"pre-threshold {pre_threshold:,}"] if pre_threshold > 1 else []
    released = report["released_items"]
    what = (f"{plural(released, 'item')} with {mechanism.name}"
            + (" (the default)" if default else "")
            + (f" ({', '.join(settings)})" if settings else ""))
    counts_chosen = report.get("counts_chosen_max_items_per_user")
    counts_note = ("" if counts_chosen is None
                   else f" (each user counted on at most {counts_chosen:,}, chosen privately)")
    return summary_line(args, "items", what, released, job.budget, report, counts_note)


def main(argv=None, prog: str = PROG) -> int:
    return run_job("vocabulary", argv, functools.partial(prepare, prog=prog), run_prepared)


if __name__ == "__main__":
    end_program(main())
