"""The vocabulary job: release the words (or items) of a user corpus under user-level DP.

    python -m pipelines.vocabulary --input 'reviews*.csv.gz' --format csv \\
        --user-field author --text-field body \\
        --mechanism weighted-gaussian --rho 0.1 --delta 1e-5 \\
        --max-items-per-user 100 --output out/

Writes ``OUT/items-*.txt`` (one released item per line, sorted) and
``OUT/report.json``: the privacy report of the selection, the number of
released items, and input counts (users, pairs, distinct items) which are NOT
private. With ``--with-counts`` it also writes ``OUT/counts-*.tsv``
(``item<TAB>noisy number of users holding it`` for every released item and no
other, in the items' order), paid for by a share of the budget
(``--counts-share``, default 0.25); the report then records both parts.
Any other flag is a Beam pipeline option (``--runner``,
``--direct_num_workers``, Dataflow's ``--project``/``--region``/…); the
DirectRunner is the default.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beam_dpsu import configs
from beam_dpsu.accounting import Budget, ZCDPBudget
from beam_dpsu.bounding import InvalidRecordError
from beam_dpsu.counts import (DEFAULT_COUNTS_SHARE, CountReleased, SelectionAndCountsBudget,
                              split_selection_and_counts)
from beam_dpsu.mechanisms import SelectItems
from beam_dpsu.output import WriteReleased, format_released
from beam_dpsu.report import NON_PRIVATE_NOTE, to_json
from beam_dpsu.text import Tokenizer
from pipelines.inputs import (FORMATS, ROW_AS_USER, InputFormatError, ReadPairs,
                              check_input_exists)

__all__ = ["build_parser", "parse_args", "build_pipeline", "main", "InputStats"]


class UsageError(ValueError):
    """A bad command-line parameter."""


def boolean(text: str) -> bool:
    """A flag value: true/false, yes/no, 1/0 (Flex Templates pass --flag=value)."""
    value = text.strip().lower()
    if value in ("true", "yes", "1"):
        return True
    if value in ("false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def flags(name: str) -> tuple[str, ...]:
    """``--a-b`` and its ``--a_b`` spelling: Dataflow Flex Template parameter names
    cannot contain hyphens, so every job flag accepts both."""
    underscored = name.replace("-", "_")
    return (f"--{name}",) if underscored == name else (f"--{name}", f"--{underscored}")


def add_input_arguments(parser: argparse.ArgumentParser, formats=FORMATS,
                        default_format: str = "pairs") -> None:
    """The input and tokeniser flags shared by the jobs."""
    g = parser.add_argument_group("input")
    g.add_argument(*flags("input"), required=True, help="file pattern (glob) of the input files")
    g.add_argument(*flags("format"), default=default_format, choices=formats,
                   help="pairs: CSV user,item lines; csv/jsonl: records with --user-field and "
                        "--text-field; text: one user per line; msnbc: the UCI MSNBC sequence "
                        f"file, zipped or not (default: {default_format})")
    g.add_argument(*flags("user-field"),
                   help="csv/jsonl: the field holding the user id; csv: '@row' makes each row "
                        "its own user")
    g.add_argument(*flags("text-field"), help="csv/jsonl: the field holding the user's text")
    g.add_argument(*flags("skip-header-lines"), type=int, default=0,
                   help="pairs/text: lines to skip at the top of each file (default 0)")
    g.add_argument(*flags("keep-case"), type=boolean, nargs="?", const=True, default=False,
                   help="do not lower-case tokens (--keep-case or --keep-case=true)")
    g.add_argument(*flags("keep-urls"), type=boolean, nargs="?", const=True, default=False,
                   help="do not strip URLs before tokenising")


def add_mechanism_arguments(parser: argparse.ArgumentParser, several: bool = False) -> None:
    """--mechanism (or --mechanisms, comma-separated, with ``several``) and its parameters."""
    g = parser.add_argument_group("mechanism")
    if several:
        g.add_argument(*flags("mechanisms"), default="weighted-gaussian",
                       help=f"comma-separated names from {sorted(configs.MECHANISMS)}")
    else:
        g.add_argument(*flags("mechanism"), default="weighted-gaussian",
                       help=f"one of {sorted(configs.MECHANISMS)} (default weighted-gaussian)")
    g.add_argument(*flags("max-items-per-user"), type=int,
                   help="Δ0: distinct items per user, sampled uniformly (default 100) or, "
                        "for gw, the user's most frequent ones (default 30; 300 with "
                        "--public-input)")
    g.add_argument(*flags("rounds"), type=int, help="sips: number of rounds (default 3)")
    g.add_argument(*flags("ratio"), type=float,
                   help="sips: ratio between consecutive rounds' budgets, 0 < r <= 1 "
                        "(default 1/3)")
    g.add_argument(*flags("sips-removal"), choices=("side_input", "join"),
                   help="sips: remove released items by side input (default) or by join "
                        "(for released sets too large for worker memory)")
    g.add_argument(*flags("alpha"), type=float,
                   help="policy-laplace/policy-gaussian/gw: α in the cutoff Γ = ρ + α·scale "
                        "(default 3)")
    g.add_argument(*flags("shards"), type=int,
                   help="policy-laplace/policy-gaussian/gw: users split over this many "
                        "independent orders, summed (default 1, the papers' algorithm)")
    g.add_argument(*flags("public-input"),
                   help="gw: a public corpus (glob) whose item counts order each user's items "
                        "(GW-KT); free of privacy cost")
    g.add_argument(*flags("public-format"), choices=("text", "csv"), default="text",
                   help="format of --public-input: text (one document per line) or csv")
    g.add_argument(*flags("public-text-field"), help="csv --public-input: the text column")
    g.add_argument(*flags("hot-key-fanout"), type=int,
                   help="fan-out of the per-item sum, for very skewed data on large runners")


def add_budget_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("privacy budget (user-level)")
    g.add_argument(*flags("epsilon"), type=float, help="ε of an (ε, δ)-DP budget")
    g.add_argument(*flags("rho"), type=float, help="ρ of a δ-approximate ρ-zCDP budget")
    g.add_argument(*flags("delta"), type=float, required=True, help="δ of the budget")
    g.add_argument(*flags("seed"), type=int,
                   help="TESTS ONLY: fixed seed for noise and sampling; the release is then "
                        "not private and the report says so")


def add_counts_arguments(parser: argparse.ArgumentParser) -> None:
    """--with-counts and its budget share and Δ0 (vocabulary and n-gram jobs)."""
    g = parser.add_argument_group("counts of the released items (optional)")
    g.add_argument(*flags("with-counts"), type=boolean, nargs="?", const=True, default=False,
                   help="also write OUT/counts-*.tsv: item<TAB>noisy number of users holding "
                        "it, for every released item (exact discrete Laplace noise under "
                        "--epsilon, discrete Gaussian under --rho), paid for by "
                        "--counts-share of the budget")
    g.add_argument(*flags("counts-share"), type=float,
                   help="with --with-counts: the share of ε (or ρ) spent on the counts, "
                        f"0 < share < 1 (default {DEFAULT_COUNTS_SHARE}); the selection gets "
                        "the rest and all of δ")
    g.add_argument(*flags("counts-max-items-per-user"), type=int,
                   help="with --with-counts: Δ0 of the counts, the most released items each "
                        "user is counted on, sampled uniformly (default: --max-items-per-user, "
                        "or 100)")


def budget_parts_from_args(args, budget) -> SelectionAndCountsBudget | None:
    """The selection and counts parts of the budget with --with-counts, else None."""
    if not args.with_counts:
        if args.counts_share is not None or args.counts_max_items_per_user is not None:
            raise UsageError("--counts-share and --counts-max-items-per-user need --with-counts")
        return None
    share = DEFAULT_COUNTS_SHARE if args.counts_share is None else args.counts_share
    return split_selection_and_counts(budget, share)


def count_released(pairs, released, parts: SelectionAndCountsBudget, max_items_per_user: int,
                   seed, out: str) -> CountReleased:
    """Counts the released items and writes OUT/counts-*.tsv in the items' order."""
    counter = CountReleased(released, parts.counts, max_items_per_user, seed=seed)
    _ = (pairs
         | "CountReleased" >> counter
         | "WriteCounts" >> WriteReleased(f"{out}/counts", ".tsv", format_line=count_line,
                                          sort_key=lambda kv: kv[0]))
    return counter


def count_line(item_count) -> str:
    """``item<TAB>count``; a tab inside the item is written as ``\\t`` (like line breaks)."""
    item, count = item_count
    return format_released(item).replace("\t", "\\t") + "\t" + str(count)


def with_counts_report(report: dict, parts: SelectionAndCountsBudget | None,
                       counter: CountReleased | None) -> dict:
    """The selection's report plus, with counts, the budget split and the counts' report."""
    if parts is None:
        return report
    return {**report, "total_budget": parts.total.to_dict(), "budget_split": parts.to_dict(),
            "counts": counter.report}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.vocabulary",
        description="Release the vocabulary of a user corpus under user-level differential "
                    "privacy. Unknown flags are passed to Beam as pipeline options.")
    add_input_arguments(parser)
    add_mechanism_arguments(parser)
    add_budget_arguments(parser)
    add_counts_arguments(parser)
    parser.add_argument(*flags("output"), required=True, help="output directory (local or gs://…)")
    return parser


def budget_from_args(args) -> Budget | ZCDPBudget:
    if (args.epsilon is None) == (args.rho is None):
        raise UsageError("give exactly one of --epsilon (for (ε, δ)-DP) or --rho (for zCDP)")
    if args.epsilon is not None:
        return Budget(args.epsilon, args.delta)
    return ZCDPBudget(args.rho, args.delta)


def tokenizer_from_args(args) -> Tokenizer:
    return Tokenizer(lowercase=not args.keep_case, strip_urls=not args.keep_urls)


def check_input_args(args) -> None:
    if args.format in ("csv", "jsonl") and not (args.user_field and args.text_field):
        raise UsageError(f"--format {args.format} needs --user-field and --text-field")
    if args.skip_header_lines < 0:
        raise UsageError(f"--skip-header-lines must be >= 0, got {args.skip_header_lines}")
    check_input_exists(args.input)
    public = getattr(args, "public_input", None)
    if public:
        if args.public_format == "csv" and not args.public_text_field:
            raise UsageError("--public-format csv needs --public-text-field")
        check_input_exists(public)


def with_public_counts(pipeline, args, mechanism, tokenizer):
    """GW-KT: counts the public corpus in the pipeline and hands them to GW."""
    if not getattr(args, "public_input", None):
        return mechanism
    if not isinstance(mechanism, configs.GreedyWithoutSampling):
        raise UsageError(f"--public-input applies to --mechanism gw only, not {mechanism.name!r}")
    public_counts = (pipeline
                     | "ReadPublicItems" >> ReadPairs(
                         args.public_input, args.public_format, ROW_AS_USER,
                         args.public_text_field or None, tokenizer)
                     | "PublicItems" >> beam.Values()
                     | "CountPublicItems" >> beam.combiners.Count.PerElement())
    # Without --max-items-per-user, GW-KT gets its own default Δ0 (None → 300).
    return dataclasses.replace(mechanism, public_counts=public_counts,
                               max_items_per_user=args.max_items_per_user)


def mechanism_from_args(args, name: str | None = None,
                        ignore_unused: bool = False) -> configs.MechanismConfig:
    """The mechanism config named ``name`` (default: --mechanism) with the flags it takes."""
    return configs.mechanism_from_name(
        name or args.mechanism, ignore_unused, max_items_per_user=args.max_items_per_user,
        rounds=getattr(args, "rounds", None), ratio=getattr(args, "ratio", None),
        removal=getattr(args, "sips_removal", None), alpha=getattr(args, "alpha", None),
        shards=getattr(args, "shards", None))


def parse_args(argv):
    """(job arguments, Beam PipelineOptions, mechanism config, budget); raises on bad input.

    With --with-counts the budget is the total; ``build_pipeline`` splits it.
    """
    args, beam_args = build_parser().parse_known_args(argv)
    check_input_args(args)
    budget = budget_from_args(args)
    mechanism = mechanism_from_args(args)
    parts = budget_parts_from_args(args, budget)  # validated now, before anything runs
    mechanism.calibrate(budget if parts is None else parts.selection)
    return args, PipelineOptions(beam_args), mechanism, budget


class InputStats(beam.PTransform):
    """(user, item) pairs → one dict of raw counts: users, pairs, distinct items.

    These counts are exact and NOT differentially private; they are for the
    operator's report only.
    """

    def expand(self, pairs):
        count = beam.combiners.Count.Globally
        n_pairs = pairs | "CountPairs" >> count()
        n_users = (pairs | "Users" >> beam.Keys() | "DistinctUsers" >> beam.Distinct()
                   | "CountUsers" >> count())
        n_items = (pairs | "Items" >> beam.Values() | "DistinctItems" >> beam.Distinct()
                   | "CountItems" >> count())
        return (pairs.pipeline
                | "Seed" >> beam.Create([None])
                | "Assemble" >> beam.Map(
                    lambda _, users, pairs_, items: {
                        "users": users, "pairs": pairs_, "distinct_items": items},
                    users=beam.pvalue.AsSingleton(n_users),
                    pairs_=beam.pvalue.AsSingleton(n_pairs),
                    items=beam.pvalue.AsSingleton(n_items)))


class WriteReport(beam.PTransform):
    """Writes ``OUT/report.json``: the static report plus the run's counts."""

    def __init__(self, output: str, static_report: dict, released, released_by_stage=None):
        super().__init__()
        self._output = output.rstrip("/")
        self._static = static_report
        self._released = released
        self._by_stage = dict(released_by_stage or {})

    def expand(self, input_stats):
        static = self._static
        count = beam.combiners.Count.Globally
        n_released = self._released | "CountReleased" >> count()
        stage_counts = {
            name: beam.pvalue.AsSingleton(pc | f"Count_{name}" >> count())
            for name, pc in self._by_stage.items()}

        def assemble(stats, released, **by_stage):
            report = dict(static)
            report["released_items"] = released
            if by_stage:
                report["released_by_stage"] = by_stage
            report["non_private_counts"] = {**stats, "note": NON_PRIVATE_NOTE}
            return to_json(report)

        return (input_stats
                | "AssembleReport" >> beam.Map(
                    assemble, released=beam.pvalue.AsSingleton(n_released), **stage_counts)
                | "WriteReportJson" >> beam.io.WriteToText(
                    f"{self._output}/report", file_name_suffix=".json",
                    shard_name_template=""))


def build_pipeline(pipeline: beam.Pipeline, args, mechanism, budget) -> SelectItems:
    """Adds the job to ``pipeline``: read, select, write items and report."""
    # First read every input record as (user, item) occurrences.
    tokenizer = tokenizer_from_args(args)
    pairs = pipeline | "ReadPairs" >> ReadPairs(
        args.input, args.format, args.user_field, args.text_field,
        tokenizer, args.skip_header_lines)
    mechanism = with_public_counts(pipeline, args, mechanism, tokenizer)
    # Then release items with the chosen mechanism (on its part of the budget
    # when the counts take a share of it).
    parts = budget_parts_from_args(args, budget)
    select = SelectItems(mechanism, budget if parts is None else parts.selection,
                         seed=args.seed, hot_key_fanout=args.hot_key_fanout)
    released = pairs | "SelectItems" >> select
    # Finally write the released items (sorted), their counts and the report.
    out = args.output.rstrip("/")
    _ = released | "WriteItems" >> WriteReleased(f"{out}/items", ".txt")
    counter = None
    if parts is not None:
        counter = count_released(pairs, released, parts, counts_max_items(args), args.seed, out)
    _ = (pairs
         | "InputStats" >> InputStats()
         | "WriteReport" >> WriteReport(out, with_counts_report(select.report, parts, counter),
                                        released, select.released_by_stage))
    return select


def counts_max_items(args) -> int:
    """Δ0 of the counts: --counts-max-items-per-user, else --max-items-per-user, else 100."""
    if args.counts_max_items_per_user is not None:
        return args.counts_max_items_per_user
    return args.max_items_per_user or 100


def run(argv=None) -> None:
    args, options, mechanism, budget = parse_args(argv)
    with beam.Pipeline(options=options) as pipeline:
        build_pipeline(pipeline, args, mechanism, budget)


def run_reporting_errors(run_job, argv) -> int:
    """Runs a job; a bad parameter or record prints one clear line and exits 2."""
    try:
        run_job(argv)
    except (UsageError, InputFormatError, InvalidRecordError, ValueError, TypeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def main(argv=None) -> int:
    return run_reporting_errors(run, argv)


if __name__ == "__main__":
    sys.exit(main())
