"""The vocabulary job: release the words (or items) of a user corpus under user-level DP.

    python -m pipelines.vocabulary --input 'reviews*.csv.gz' \\
        --user-field author --text-field body \\
        --rho 0.1 --delta 1e-5 --output out/

SIPS with Δ0 chosen privately (``--max-items-per-user auto``) unless
``--mechanism``/``--max-items-per-user`` say otherwise.

Writes ``OUT/items-00000-of-00001.txt`` (the released items, one per line,
sorted; ``--num-shards`` splits them by a hash of the item) and
``OUT/report.json``: the privacy report of the selection, the output format and
the number of released items (per SIPS round only with
``--non-private-stats``). With ``--with-counts`` it also writes
``OUT/counts-*.tsv`` (``item<TAB>noisy number of users holding it`` for every
released item and no other, in the items' order), paid for by a share of the
budget (``--counts-share``, default 0.25); the report then records both
parts. Raw counts of the input (users, pairs, distinct items) are NOT
private: they are computed, into ``non_private_counts``, only with
``--non-private-stats``. Any other flag
must be a Beam pipeline option (``--runner``, ``--direct_num_workers``,
Dataflow's ``--project``/``--region``/…); the DirectRunner is the default.
``--output-format parquet`` writes the same shards as ``.parquet`` files
(``beam_dpsu.WriteReleased(format="parquet")``).
"""

from __future__ import annotations

import dataclasses
import functools
from types import SimpleNamespace

import apache_beam as beam

from beam_dpsu.beam.output import WriteReleased
from beam_dpsu.core import mechanisms
from beam_dpsu.core.checks import canonical_name, plural
from beam_dpsu.core.report import NON_PRIVATE_NOTE
from beam_dpsu.select_items import SelectItems
from pipelines.errors import UsageError, flag_errors
from pipelines.flag_groups import (add_budget_arguments, add_counts_arguments,
                                   add_input_arguments, add_mechanism_arguments,
                                   add_non_private_stats_argument, add_output_arguments)
from pipelines.flags import JobArgumentParser, parse_job_args
from pipelines.input_flags import check_public_input, resolve_input
from pipelines.io.formats import FORMATS, ROW_AS_USER
from pipelines.io.read import ReadPairs, ReadUserItems, items_of
from pipelines.job_files import WriteJson, read_json
from pipelines.interrupts import end_program
from pipelines.job_runner import job_pipeline, run_job
from pipelines.output_folder import run_with_output, staging_of
from pipelines.progress import NOTHING_RELEASED, LogCount, log_written, progress
from pipelines.settings import (budget_from_args, budget_parts_from_args, check_calibrates,
                                check_counts, check_num_shards, count_released, describe_budget,
                                mechanism_from_args, output_suffix, privacy_unit_from_args,
                                tokenizer_from_args, with_counts_report)

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
    # SIPS by default: the most items of the parallel mechanisms at the same budget
    # (docs/benchmarks.md), with Δ0 chosen privately.
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

# The mechanisms whose Δ0 is "auto" when --max-items-per-user is not given: those the
# Δ0 benchmark measured (the others keep their documented defaults, 100 or GW's 30).
AUTO_BY_DEFAULT = ("weighted-gaussian", "policy-gaussian", "sips")


def parse_args(argv, prog: str = PROG):
    """(job arguments, Beam PipelineOptions, mechanism config, budget); raises on bad input.

    Everything that needs no pipeline is checked here: flags, budget, mechanism
    parameters, and the first records of every input file.
    """
    parser = build_parser(prog)
    args, options = parse_job_args(parser, argv)
    budget = budget_from_args(args)
    # The settings the job chose because they were not given (the report says so).
    args.job_defaults = {}
    if not parser.was_given("mechanism"):
        args.job_defaults["mechanism"] = args.mechanism
    if args.max_items_per_user is None and canonical_name(args.mechanism) in AUTO_BY_DEFAULT:
        # Chosen privately unless given: close to the best fixed Δ0 of a grid for these
        # mechanisms (docs/benchmarks.md, "Choosing Δ0 privately").
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
    elements = pipeline | "ReadUserItems" >> ReadUserItems(
        args.input, args.format, args.user_field, args.text_field, tokenizer,
        args.skip_header_lines, files=getattr(args, "files", None),
        log_records=args.non_private_stats, items_field=args.items_field)
    mechanism, public_counts = with_public_counts(pipeline, args, mechanism, tokenizer)
    # Where every row is its own user (@row, text lines) the selection takes its tokens
    # as they are, with no per-user shuffle; else a user's rows are merged by user id.
    privacy_unit = privacy_unit_from_args(args)
    selected = (elements if privacy_unit == "user_id" else elements | "RowTokens" >> beam.Values())
    parts = args.budget_parts
    select = SelectItems(mechanism, budget if parts is None else parts.selection,
                         seed=args.seed, hot_key_fanout=args.hot_key_fanout,
                         privacy_unit=privacy_unit, non_private_stats=args.non_private_stats,
                         public_counts=public_counts, pre_threshold=args.pre_threshold)
    released = selected | "SelectItems" >> select
    # All outputs depend on the released set, its noisy counts and the parameters only
    # (raw counts are opt-in).
    out = (out or args.output).rstrip("/")  # run_prepared: the staging folder
    written = released | "WriteItems" >> WriteReleased(
        f"{out}/items", file_name_suffix=output_suffix(args), num_shards=args.num_shards,
        format=args.output_format)
    log_written(written, "items", staging=out, output=args.output)
    counter = None
    if parts is not None:
        counter = count_released(selected, released, parts, counts_max_items(args), args.seed,
                                 out, args.num_shards, privacy_unit=privacy_unit,
                                 output_format=args.output_format)
    released_counts = {"released_items": released | "LogReleased" >> LogCount(
        f"{mechanism.name}: released {{n:,}} item{{s}}")}
    if select.chosen_max_items_per_user is not None:
        # "auto": the chosen Δ0 is a DP output (the noisy size histogram's choice).
        released_counts["chosen_max_items_per_user"] = select.chosen_max_items_per_user
    if counter is not None and counter.chosen_max_items_per_user is not None:
        # The counts' own "auto": a DP output too.
        released_counts["counts_chosen_max_items_per_user"] = counter.chosen_max_items_per_user
    # Per-round sizes of SIPS are not a function of the released set (which
    # round released an item is more than the set): only with --non-private-stats.
    by_stage = select.non_private_released_by_stage
    for i, (stage, pcoll) in enumerate(by_stage.items(), start=1):
        released_counts[stage] = pcoll | f"Count_{stage}" >> LogCount(
            f"SIPS round {i} of {len(by_stage)}: released {{n:,}} item{{s}} (non-private)")
    static = with_counts_report(select.report, parts, counter, select.calibration)
    job_defaults = getattr(args, "job_defaults", None)
    if job_defaults:
        static = {**static, "job_defaults": {**job_defaults, "note": JOB_DEFAULTS_NOTE}}
    output_format = args.output_format

    def assemble(_, released_items, stats=None, chosen_max_items_per_user=None,
                 counts_chosen_max_items_per_user=None, **by_stage):
        report = dict(static)
        report["released_items"] = released_items
        if chosen_max_items_per_user is not None:
            report["chosen_max_items_per_user"] = chosen_max_items_per_user
        if counts_chosen_max_items_per_user is not None:
            report["counts_chosen_max_items_per_user"] = counts_chosen_max_items_per_user
        if stats is not None:
            report["non_private_counts"] = {**stats, "note": NON_PRIVATE_NOTE}
            if by_stage:
                report["non_private_counts"]["released_by_stage"] = by_stage
        report["output_format"] = output_format
        return report

    side = {name: beam.pvalue.AsSingleton(pc) for name, pc in released_counts.items()}
    if args.non_private_stats:
        side["stats"] = beam.pvalue.AsSingleton(elements | "InputStats" >> InputStats())
    _ = (pipeline | "ReportOnce" >> beam.Create([None])
         | "AssembleReport" >> beam.Map(assemble, **side)
         | "WriteReport" >> WriteJson(f"{out}/report.json"))
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
    files = args.files
    progress(f"reading {len(files)} {args.format} file{'s' * (len(files) != 1)} "
             f"({args.input}); releasing items with {mechanism.name} under "
             f"{describe_budget(job.budget)}")
    with job_pipeline(job.options) as pipeline:
        build_pipeline(pipeline, args, mechanism, job.budget, staging_of(job))
        progress("built the pipeline; running it")  # seconds before the first record
    report = read_json(f"{staging_of(job)}/report.json")
    out = args.output.rstrip("/")
    shard = "00000" if args.num_shards == 1 else "*"
    shards = f"items-{shard}-of-{args.num_shards:05d}{output_suffix(args)}"
    counts_chosen = report.get("counts_chosen_max_items_per_user")
    counts = (", their noisy counts"
              + ("" if counts_chosen is None
                 else f" (each user counted on at most {counts_chosen:,}, chosen privately)")
              + f" to {out}/counts-{shard}-of-{args.num_shards:05d}"
              f"{output_suffix(args, counts=True)}"
              if args.with_counts else "")
    released = report["released_items"]
    # With counts the report's equivalents state the total's, not this budget's.
    equivalents = None if args.with_counts else report.get("dp_equivalents")
    chosen = report.get("chosen_max_items_per_user")
    fixed = report.get("mechanism", {}).get("max_items_per_user")
    default = "mechanism" in getattr(args, "job_defaults", {})
    pre_threshold = report.get("pre_threshold", 1)
    settings = ([f"max items per user {chosen:,}, chosen privately"] if chosen is not None
                else [f"max items per user {fixed:,}"] if isinstance(fixed, int) else [])
    settings += [f"pre-threshold {pre_threshold:,}"] if pre_threshold > 1 else []
    return (f"released {plural(released, 'item')} with {mechanism.name}"
            + (" (the default)" if default else "")
            + (f" ({', '.join(settings)})" if settings else "")
            + f" under {describe_budget(job.budget, equivalents)}"
            + (" (SEEDED: not private)" if args.seed is not None else "")
            + f"; wrote {out}/{shards}{counts} and {out}/report.json"
            + (NOTHING_RELEASED if released == 0 else ""))


def run(argv=None) -> None:
    """Runs the job; raises on bad parameters or records (for library use)."""
    run_with_output(prepare(argv), run_prepared)


def main(argv=None, prog: str = PROG) -> int:
    return run_job("vocabulary", argv, functools.partial(prepare, prog=prog), run_prepared)


if __name__ == "__main__":
    end_program(main())
