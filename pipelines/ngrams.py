"""The n-gram job: release the n-grams (lengths 1..T) of a user corpus with DPNE.

Writes the released n-grams, sorted, to ``OUT/ngrams-*.txt`` (or ``.parquet``),
``OUT/report.json`` (the privacy parameters, per level the DP-safe figures, the
released count per length) and, with ``--with-counts``, their noisy counts.
``--method`` runs a DPSU baseline of dpne Table 3 instead. Raw figures only with
``--non-private-stats``. Details: docs/explanation/jobs.md#the-two-jobs-outputs
"""

from __future__ import annotations

import argparse
import functools
from types import SimpleNamespace

import apache_beam as beam

from beam_dpsu.core import checks
from beam_dpsu.core.checks import ParameterError, canonical_name, plural
from beam_dpsu.core.kgrams import PRUNINGS, kgrams_of
from beam_dpsu.core.report import NON_PRIVATE_NOTE
from beam_dpsu.core.ngram_parameters import LEVEL1_POLICIES, MAX_NGRAM_LENGTH
from beam_dpsu.extract_ngrams import ExtractNgrams
from beam_dpsu.ngram_baselines import BASELINES, NgramsByDPSU
from pipelines.errors import UsageError, flag_errors
from pipelines.flag_groups import (add_budget_arguments, add_counts_arguments,
                                   add_input_arguments, add_non_private_stats_argument,
                                   add_output_arguments, add_pre_threshold_argument)
from pipelines.flags import JobArgumentParser, flags, int_or_auto, parse_job_args
from pipelines.io.formats import DOCUMENT_FORMATS
from pipelines.io.read import ReadDocuments
from pipelines.interrupts import end_program
from pipelines.job_runner import (CHOSEN, chosen_side_inputs, run_and_read_report, run_job,
                                  write_report)
from pipelines.progress import LOG
from pipelines.settings import (budget_from_args, budget_parts_from_args, check_counts,
                                check_num_shards, describe_budget, privacy_unit_from_args,
                                read_input, resolve_input, summary_line, with_counts_report,
                                write_released)

__all__ = ["build_parser", "parse_args", "build_pipeline", "main", "DocumentStats",
           "privacy_unit_from_args"]

METHODS = ("dpne",) + BASELINES
PROG = "python -m pipelines.ngrams"


def _max_items(text: str):
    try:
        values = [int_or_auto(v) for v in text.split(",")]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            "--max-items-per-user takes an int, 'auto', or a comma-separated list of them, "
            f"got {text!r}") from None
    return values[0] if len(values) == 1 else values


def _levels(max_items_per_user) -> list:
    return max_items_per_user if isinstance(max_items_per_user, list) else [max_items_per_user]


def build_parser(prog: str = PROG) -> JobArgumentParser:
    parser = JobArgumentParser(
        prog=prog,
        description="Release the n-grams (word sequences of length 1 to T) of a user corpus "
                    "under user-level differential privacy with DPNE (Kim et al. 2021): "
                    "level k only considers k-grams whose (k−1)-grams level k−1 released. "
                    "Writes the released n-grams, sorted, and report.json.",
        examples=[
            f"{prog} --input data/msnbc990928.zip --max-n 6 --max-items-per-user 10 "
            "--epsilon 1 --delta 1e-7 --eta 0.01 --output out/ngrams",
            f"{prog} --input examples/imdb_2k.csv.gz --user-field user --text-field review "
            "--max-n 3 --rho 0.5 --delta 1e-6 --max-items-per-user 50 --output out/imdb-ngrams",
        ])
    add_input_arguments(parser, DOCUMENT_FORMATS)
    g = parser.add_argument_group("n-grams (DPNE)")
    g.add_argument(*flags("max-n"), type=int, default=3, metavar="T",
                   help=f"T, the longest n-gram length (at most {MAX_NGRAM_LENGTH})")
    g.add_argument(*flags("max-items-per-user"), type=_max_items, default=100,
                   metavar="N|auto[,…]",
                   help="Δ_k, the contribution bound per level: how many distinct k-grams of "
                        "each user are sampled; one value for every length or one per length, "
                        "comma-separated. 'auto' at level 1 spends 5%% of the budget on "
                        "choosing Δ_1 privately; at a level k >= 2 it is 1000, for free "
                        "(docs/how-to/choose-delta0.md)")
    g.add_argument(*flags("eta"), type=float, default=0.01, metavar="η",
                   help="η, the spurious-n-gram rate: at level k, at most η times as many "
                        "k-grams no user holds as (k−1)-grams released, in expectation "
                        "(η·|S_{k−1}|, S_{k−1} the released (k−1)-grams)")
    g.add_argument(*flags("noise-decay"), type=float, default=1.0, metavar="C",
                   help="c: the noise of level k is c times that of level k−1 (σ_k = "
                        "c·σ_{k−1}); 1 gives every level the same noise")
    g.add_argument(*flags("pruning"), type=canonical_name, choices=PRUNINGS, default="both",
                   help="which k-grams level k considers: both = both (k−1)-subgrams were "
                        "released; single = the prefix was")
    g.add_argument(*flags("level1"), type=canonical_name, choices=LEVEL1_POLICIES,
                   default="weighted-gaussian",
                   help="the mechanism of level 1 (single words)")
    g.add_argument(*flags("alpha"), type=float, default=3.0, metavar="A",
                   help="policy-gaussian level 1: α, how far above the threshold users fill "
                        "an item, in noise scales")
    g.add_argument(*flags("method"), type=canonical_name, choices=METHODS, default="dpne",
                   help="dpne, or a DPSU baseline of dpne Table 3: dpsu-all (one selection "
                        "over every length), dpsu-even (one per length, budget split evenly), "
                        "dpsu-single (one length, --single-n)")
    g.add_argument(*flags("single-n"), type=int, metavar="N",
                   help="dpsu-single: the one n-gram length to release")
    add_pre_threshold_argument(g, "a single word (level 1; --method dpne)")
    add_budget_arguments(parser)
    add_counts_arguments(parser, "the largest --max-items-per-user")
    add_output_arguments(parser, "ngrams")
    add_non_private_stats_argument(
        parser, "users, documents, tokens; per level the support and the held and spurious "
                "n-grams released")
    return parser


def parse_args(argv, prog: str = PROG):
    """(job arguments, Beam PipelineOptions, the n-gram transform); raises on bad input."""
    args, options = parse_job_args(build_parser(prog), argv)
    total = budget_from_args(args)
    args.budget_parts = budget_parts_from_args(args, total)
    budget = total if args.budget_parts is None else args.budget_parts.selection
    transform: ExtractNgrams | NgramsByDPSU
    if args.method == "dpne":
        dpne = functools.partial(
            ExtractNgrams, args.max_n, budget, args.max_items_per_user, eta=args.eta,
            pruning=args.pruning, noise_schedule=args.noise_decay, level1=args.level1,
            alpha=args.alpha, seed=args.seed, non_private_stats=args.non_private_stats,
            progress_logger=LOG.name, pre_threshold=args.pre_threshold)
        with flag_errors():
            transform = dpne_checked(dpne, args)  # bad parameters fail before reading input
    else:
        if args.pre_threshold != 1:
            raise UsageError(f"--pre-threshold applies to --method dpne only, not {args.method}")
        if "auto" in _levels(args.max_items_per_user):
            raise UsageError(f"--method {args.method} takes a fixed int "
                             "--max-items-per-user, not auto")
        if not isinstance(args.max_items_per_user, int):
            raise UsageError(f"--method {args.method} takes one --max-items-per-user value")
        check_single_n(args)
        with flag_errors():
            checks.max_items(args.max_items_per_user)
            transform = NgramsByDPSU(args.method, args.max_n, budget, args.max_items_per_user,
                                     n=args.single_n, seed=args.seed)
    if args.single_n is not None and args.method != "dpsu-single":
        raise UsageError(f"--single-n applies to --method dpsu-single only, not {args.method}")
    check_num_shards(args)
    check_counts(args.budget_parts, counts_max_items(args))
    args.files = resolve_input(args, DOCUMENT_FORMATS)
    if args.method == "dpne" and privacy_unit_from_args(args) == "element":
        with flag_errors():
            transform = dpne_checked(dpne, args, "element")  # the format is known only now
    return args, options, transform


def dpne_checked(dpne, args, privacy_unit: str = "user_id") -> ExtractNgrams:
    """``dpne(privacy_unit)``, a --max-items-per-user list of the wrong length named in flags."""
    try:
        return dpne(privacy_unit=privacy_unit)
    except ParameterError as exc:
        values = args.max_items_per_user
        if exc.param == "max_items_per_user" and isinstance(values, list) \
                and len(values) != args.max_n:
            raise UsageError(f"--max-items-per-user needs one value per level (--max-n "
                             f"{args.max_n}), got {len(values)}: {values!r}") from None
        raise


def check_single_n(args) -> None:
    """dpsu-single releases one length: --single-n, between 1 and --max-n."""
    if args.method != "dpsu-single":
        return
    if args.single_n is None:
        raise UsageError("--method dpsu-single needs --single-n, the n-gram length to release")
    with flag_errors():
        max_n = checks.max_items(args.max_n, "max_n")
    if not 1 <= args.single_n <= max_n:
        raise UsageError(f"--single-n must lie between 1 and --max-n ({max_n}), got "
                         f"{args.single_n}")


def _static_report(transform, args) -> dict:
    if isinstance(transform, ExtractNgrams):
        return transform.report
    return {"mechanism": {"name": args.method, "max_n": args.max_n,
                          "max_items_per_user": args.max_items_per_user,
                          "single_n": args.single_n},
            "budget": transform.budget.to_dict(), "seeded": args.seed is not None,
            "source": "dpne (Kim et al. 2021) Table 3 baselines"}


class DocumentStats(beam.PTransform):
    """Raw (NOT private) counts: users, documents, tokens; only with --non-private-stats."""

    def expand(self, documents):
        count = beam.combiners.Count.Globally
        users = (documents | "Users" >> beam.Keys() | "DistinctUsers" >> beam.Distinct()
                 | "CountUsers" >> count())
        docs = documents | "CountDocuments" >> count()
        tokens = (documents | "Tokens" >> beam.Map(lambda d: len(d[1]))
                  | "SumTokens" >> beam.CombineGlobally(sum))
        single = beam.pvalue.AsSingleton
        return (documents.pipeline | "Once" >> beam.Create([None])
                | "Assemble" >> beam.Map(
                    lambda _, u, d, t: {"users": u, "documents": d, "tokens": t},
                    single(users), single(docs), single(tokens)))


def counts_max_items(args) -> int | str:
    """Δ0 of the counts: --counts-max-items-per-user, else the largest Δ_k (or auto)."""
    if args.counts_max_items_per_user is not None:
        return args.counts_max_items_per_user
    values = _levels(args.max_items_per_user)
    return max(values) if all(isinstance(v, int) for v in values) else "auto"


def build_pipeline(pipeline, args, transform, out: str | None = None) -> None:
    # Where every record is its own user, the n-grams come from each record's tokens
    # alone, read as such unless the counts or raw statistics need the records' ids.
    parts = getattr(args, "budget_parts", None)
    elements = getattr(transform, "privacy_unit", "user_id") == "element"
    read_elements = elements and parts is None and not args.non_private_stats

    documents = extract_input = pipeline | "ReadDocuments" >> read_input(
        ReadDocuments, args, log_records=args.non_private_stats, as_elements=read_elements)
    if elements and not read_elements:
        extract_input = documents | "OnePersonEach" >> beam.Map(lambda doc: list(doc[1]))
    released = extract_input | "Extract" >> transform
    out = (out or args.output).rstrip("/")  # run_prepared: the staging folder
    user_ngrams = None
    if parts is not None:
        # Every user's n-grams of lengths 1..T (CountReleased keeps the released ones).
        max_n = args.max_n
        user_ngrams = documents | "UserNgrams" >> beam.FlatMap(
            lambda doc: ((doc[0], gram) for k in range(1, max_n + 1)
                         for gram in kgrams_of(doc[1], k)))
    counter = write_released(released, args, out, "ngrams", user_ngrams, counts_max_items(args))
    # (DPNE logs each level's release itself: progress_logger.)
    per_length = (released | "Length" >> beam.Map(len)
                  | "CountPerLength" >> beam.combiners.Count.PerElement()
                  | "AsDict" >> beam.combiners.ToDict())
    single = beam.pvalue.AsSingleton
    side = {"lengths": single(per_length), **chosen_side_inputs(transform, counter)}
    if isinstance(transform, ExtractNgrams):
        side["levels"] = single(transform.level_stats | "StatsList" >> beam.combiners.ToList())
    if args.non_private_stats:
        side["stats"] = single(documents | "DocumentStats" >> DocumentStats())
        if isinstance(transform, ExtractNgrams):
            side["raw_levels"] = single(transform.non_private_level_stats
                                        | "RawStatsList" >> beam.combiners.ToList())
    static = with_counts_report(_static_report(transform, args), parts, counter)
    output_format = args.output_format

    def assemble(_, lengths, levels=None, stats=None, raw_levels=None, **chosen):
        report = {**static, **{name: chosen[name] for name in CHOSEN if name in chosen}}
        report["released_per_length"] = {str(k): lengths.get(k, 0)
                                         for k in range(1, args.max_n + 1)}
        report["released_ngrams"] = sum(lengths.values())
        if levels:
            report["level_stats"] = sorted(levels, key=lambda s: s["k"])
        if stats is not None:
            raw = dict(stats)
            if raw_levels:
                raw["level_stats"] = sorted(raw_levels, key=lambda s: s["k"])
            report["non_private_counts"] = {**raw, "note": NON_PRIVATE_NOTE}
        report["output_format"] = output_format
        return report

    write_report(pipeline, assemble, side, out)


def prepare(argv, prog: str = PROG):
    args, options, transform = parse_args(argv, prog)
    return SimpleNamespace(args=args, options=options, transform=transform, output=args.output,
                           overwrite=args.overwrite, inputs=args.files)


def run_prepared(job) -> str:
    args, transform = job.args, job.transform
    report = run_and_read_report(
        job, lambda pipeline, out: build_pipeline(pipeline, args, transform, out),
        f"releasing n-grams of length 1 to {args.max_n} with {args.method} under "
        f"{describe_budget(transform.budget)}"
        + (" (the selection's part)" if args.budget_parts is not None else ""))
    per_length = ", ".join(f"{n:,} of length {k}" for k, n in report["released_per_length"].items())
    released = report["released_ngrams"]
    chosen = report.get("chosen_max_items_per_user")
    what = (f"{plural(released, 'n-gram')} ({per_length}) with {args.method}"
            + ("" if chosen is None
               else f" (max items per user at level 1 {chosen:,}, chosen privately)"))
    budget = transform.budget if args.budget_parts is None else args.budget_parts.total
    return summary_line(args, "ngrams", what, released, budget, report)


def main(argv=None, prog: str = PROG) -> int:
    return run_job("ngrams", argv, functools.partial(prepare, prog=prog), run_prepared)


if __name__ == "__main__":
    end_program(main())
