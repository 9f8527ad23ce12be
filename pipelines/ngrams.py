"""The n-gram job: release the n-grams (lengths 1..T) of a user corpus with DPNE.

    python -m pipelines.ngrams --input ../shared/data/msnbc990928.zip --format msnbc \\
        --max-n 6 --max-items-per-user 10 --epsilon 1 --delta 1e-7 --eta 0.01 --output out/

Writes ``OUT/ngrams-*.txt`` (one released n-gram per line, tokens joined by a
space, sorted) and ``OUT/report.json``: the privacy parameters, per-level
statistics (Δ_k, σ_k, ρ_k, |S_{k−1}|, |V_k|, expected and drawn spurious
n-grams), the released count per length, and input counts that are NOT
private. With ``--with-counts`` it also writes ``OUT/counts-*.tsv``
(``n-gram<TAB>noisy number of users holding it`` for every released n-gram, in
the n-grams' order), paid for by ``--counts-share`` of the budget (default 0.25).
``--method`` runs one of the DPSU baselines of dpne Table 3 instead. Any other
flag is a Beam pipeline option (``--runner`` …); DirectRunner by default.
"""

from __future__ import annotations

import argparse
import sys

import apache_beam as beam
from apache_beam.options.pipeline_options import PipelineOptions

from beam_dpsu.kgrams import PRUNINGS, kgrams_of
from beam_dpsu.ngrams import BASELINES, LEVEL1_POLICIES, ExtractNgrams, NgramsByDPSU
from beam_dpsu.output import WriteReleased
from beam_dpsu.report import NON_PRIVATE_NOTE, to_json
from pipelines.inputs import DOCUMENT_FORMATS, ReadDocuments
from pipelines.vocabulary import (UsageError, add_budget_arguments, add_counts_arguments,
                                  add_input_arguments, budget_from_args,
                                  budget_parts_from_args, check_input_args, count_released,
                                  flags, run_reporting_errors, tokenizer_from_args,
                                  with_counts_report)

METHODS = ("dpne",) + BASELINES


def _max_items(text: str):
    try:
        values = [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--max-items-per-user takes an int or a comma-separated list of ints, got {text!r}")
    return values[0] if len(values) == 1 else values


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m pipelines.ngrams",
        description="Release the n-grams of a user corpus under user-level differential privacy "
                    "(DPNE). Unknown flags are passed to Beam as pipeline options.")
    add_input_arguments(parser, DOCUMENT_FORMATS, default_format="text")
    g = parser.add_argument_group("n-grams")
    g.add_argument(*flags("max-n"), type=int, default=3, help="T: the longest n-gram (default 3)")
    g.add_argument(*flags("max-items-per-user"), type=_max_items, default=100,
                   help="Δ_k: one int for all levels or one per level, comma-separated "
                        "(default 100)")
    g.add_argument(*flags("eta"), type=float, default=0.01,
                   help="η: expected spurious k-grams ≤ η·|S_{k−1}| per level (default 0.01)")
    g.add_argument(*flags("noise-decay"), type=float, default=1.0,
                   help="c: σ_k = c·σ_{k−1} (default 1, the same noise at every level)")
    g.add_argument(*flags("pruning"), choices=PRUNINGS, default="both",
                   help="valid k-grams: both (k−1)-subgrams released (default) or the prefix only")
    g.add_argument(*flags("level1"), choices=LEVEL1_POLICIES, default="weighted-gaussian",
                   help="the unigram mechanism (default weighted-gaussian)")
    g.add_argument(*flags("alpha"), type=float, default=3.0,
                   help="policy-gaussian level 1: α in the cutoff (default 3)")
    g.add_argument(*flags("method"), choices=METHODS, default="dpne",
                   help="dpne (default) or a DPSU baseline of dpne Table 3")
    g.add_argument(*flags("single-n"), type=int, help="dpsu-single: the one length to extract")
    add_budget_arguments(parser)
    add_counts_arguments(parser)
    parser.add_argument(*flags("output"), required=True, help="output directory (local or gs://…)")
    return parser


def parse_args(argv):
    """(job arguments, Beam PipelineOptions, transform); with --with-counts the
    transform gets the selection's part of the budget and ``args.budget_parts``
    holds both parts."""
    args, beam_args = build_parser().parse_known_args(argv)
    check_input_args(args)
    total = budget_from_args(args)
    args.budget_parts = budget_parts_from_args(args, total)
    budget = total if args.budget_parts is None else args.budget_parts.selection
    if args.method == "dpne":
        transform = ExtractNgrams(args.max_n, budget, args.max_items_per_user, args.eta,
                                  args.pruning, args.noise_decay, args.level1, args.alpha,
                                  seed=args.seed)  # --noise-decay 1 is the equal schedule
    else:
        if not isinstance(args.max_items_per_user, int):
            raise UsageError(f"--method {args.method} takes one --max-items-per-user value")
        transform = NgramsByDPSU(args.method, args.max_n, budget, args.max_items_per_user,
                                 args.single_n, seed=args.seed)
    return args, PipelineOptions(beam_args), transform


def _static_report(transform, args) -> dict:
    if isinstance(transform, ExtractNgrams):
        return transform.report
    return {"mechanism": {"name": args.method, "max_n": args.max_n,
                          "max_items_per_user": args.max_items_per_user,
                          "single_n": args.single_n},
            "budget": transform.budget.to_dict(), "seeded": args.seed is not None,
            "source": "dpne (Kim et al. 2021) Table 3 baselines"}


class DocumentStats(beam.PTransform):
    """Raw (NOT private) counts: users, documents, tokens."""

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


def counts_max_items(args) -> int:
    """Δ0 of the counts: --counts-max-items-per-user, else the largest Δ_k."""
    if args.counts_max_items_per_user is not None:
        return args.counts_max_items_per_user
    per_level = args.max_items_per_user
    return max(per_level) if isinstance(per_level, list) else per_level


def build_pipeline(pipeline, args, transform) -> None:
    # First read the documents as (user, tokens).
    documents = pipeline | "ReadDocuments" >> ReadDocuments(
        args.input, args.format, args.user_field, args.text_field, tokenizer_from_args(args),
        args.skip_header_lines)
    # Then extract the n-grams.
    released = documents | "Extract" >> transform
    # Finally write them (sorted), their counts, and the report with per-length and
    # per-level counts.
    out = args.output.rstrip("/")
    _ = released | "WriteNgrams" >> WriteReleased(f"{out}/ngrams", ".txt")
    counter = None
    if args.budget_parts is not None:
        # Every user's n-grams of lengths 1..T (CountReleased keeps the released ones).
        max_n = args.max_n
        user_ngrams = documents | "UserNgrams" >> beam.FlatMap(
            lambda doc: ((doc[0], gram) for k in range(1, max_n + 1)
                         for gram in kgrams_of(doc[1], k)))
        counter = count_released(user_ngrams, released, args.budget_parts,
                                 counts_max_items(args), args.seed, out)
    per_length = (released
                  | "Length" >> beam.Map(len)
                  | "CountPerLength" >> beam.combiners.Count.PerElement()
                  | "AsDict" >> beam.combiners.ToDict())
    level_stats = (transform.level_stats | "StatsList" >> beam.combiners.ToList()
                   if isinstance(transform, ExtractNgrams)
                   else pipeline | "NoStats" >> beam.Create([[]]))
    static = with_counts_report(_static_report(transform, args), args.budget_parts, counter)

    def assemble(stats, lengths, levels):
        report = dict(static)
        report["released_per_length"] = {str(k): lengths.get(k, 0)
                                         for k in range(1, args.max_n + 1)}
        report["released_ngrams"] = sum(lengths.values())
        if levels:
            report["level_stats"] = sorted(levels, key=lambda s: s["k"])
        report["non_private_counts"] = {**stats, "note": NON_PRIVATE_NOTE}
        return to_json(report)

    _ = (documents
         | "DocumentStats" >> DocumentStats()
         | "AssembleReport" >> beam.Map(assemble, beam.pvalue.AsSingleton(per_length),
                                        beam.pvalue.AsSingleton(level_stats))
         | "WriteReport" >> beam.io.WriteToText(f"{out}/report", file_name_suffix=".json",
                                                shard_name_template=""))


def run(argv=None) -> None:
    args, options, transform = parse_args(argv)
    with beam.Pipeline(options=options) as pipeline:
        build_pipeline(pipeline, args, transform)


def main(argv=None) -> int:
    return run_reporting_errors(run, argv)


if __name__ == "__main__":
    sys.exit(main())
