"""The flags the jobs share, in the groups ``--help`` shows: input, mechanism, budget, …

Each ``add_*_arguments(parser, …)`` adds one group to a
:class:`~pipelines.flags.JobArgumentParser`; ``pipelines.settings`` reads them.
"""

from __future__ import annotations

from typing import Sequence

from beam_dpsu.beam.output import FORMATS as OUTPUT_FORMATS
from beam_dpsu.core import mechanisms
from beam_dpsu.core.checks import canonical_name
from beam_dpsu.core.counts_budget import DEFAULT_COUNTS_SHARE
from pipelines.flags import JobArgumentParser, boolean, flags, int_or_auto
from pipelines.io.formats import FORMAT_HELP
from pipelines.settings import MAX_NUM_SHARDS

__all__ = ["add_input_arguments", "add_mechanism_arguments", "add_pre_threshold_argument",
           "add_budget_arguments", "add_output_arguments", "add_overwrite_argument",
           "add_non_private_stats_argument", "add_counts_arguments"]


def add_input_arguments(parser: JobArgumentParser, formats: Sequence[str]) -> None:
    """--input, --format (one of ``formats``), fields, header lines, tokeniser flags."""
    g = parser.add_argument_group("input")
    g.add_argument(*flags("input"), required=True, metavar="PATTERN",
                   help="input file or glob (local, gs://, …); .gz, .bz2, .zst, .deflate and "
                        ".xz/.lzma files are decompressed")
    inferable = ", ".join(f"{ext} → {fmt}" for ext, fmt in
                          ((".csv", "csv"), (".jsonl", "jsonl"), (".txt", "text"),
                           (".zip/.seq", "msnbc"), (".parquet", "parquet")) if fmt in formats)
    g.add_argument(*flags("format"), choices=formats, metavar="{" + ",".join(formats) + "}",
                   help="; ".join(f"{f}: {FORMAT_HELP[f]}" for f in formats)
                        + f" (default: inferred from the file names: {inferable})")
    g.add_argument(*flags("user-field"), metavar="FIELD",
                   help="csv/jsonl/parquet: the field holding the user id; csv/parquet: '@row' "
                        "makes each row its own user")
    g.add_argument(*flags("text-field"), metavar="FIELD",
                   help="csv/jsonl/parquet: the field holding the user's text (tokenised)")
    if "parquet" in formats:
        g.add_argument(*flags("items-field"), metavar="FIELD",
                       help="parquet, instead of --text-field: a list-of-strings column "
                            "holding items already tokenised, used as they are")
    if "pairs" in formats or "text" in formats:
        headed = "/".join(f for f in ("pairs", "text") if f in formats)
        g.add_argument(*flags("skip-header-lines"), type=int, default=0, metavar="N",
                       help=f"{headed}: lines to skip at the top of each file")
    _add_switch(g, "keep-case", "do not lower-case tokens (--keep-case or --keep-case=true)")
    _add_switch(g, "keep-urls", "do not strip URLs before tokenising")


def _add_switch(group, name: str, help: str) -> None:
    """A ``--name [BOOL]`` flag: false unless given, true if given bare."""
    group.add_argument(*flags(name), type=boolean, nargs="?", const=True, default=False,
                       metavar="BOOL", help=help)


def add_mechanism_arguments(parser: JobArgumentParser, several: bool = False,
                            public_input: bool = True, auto_default: bool = False,
                            default: str = "weighted-gaussian",
                            several_metavar: str = "NAMES", several_help: str = "") -> None:
    """--mechanism (or, with ``several``, --mechanisms) and its parameters.

    Args:
      parser: the job's parser.
      several: --mechanisms, comma-separated, instead of --mechanism.
      public_input: add GW-KT's public corpus flags.
      auto_default: the help says Δ0 is auto by default where the job makes it so.
      default: the mechanism(s) when not given.
      several_metavar: --mechanisms' metavar.
      several_help: appended to --mechanisms' help.
    """
    g = parser.add_argument_group("mechanism (see docs/explanation/mechanisms.md)")
    names = ", ".join(sorted(mechanisms.MECHANISMS))
    if several:
        g.add_argument(*flags("mechanisms"), default=default, metavar=several_metavar,
                       help=f"comma-separated mechanisms from: {names}{several_help}")
    else:
        g.add_argument(*flags("mechanism"), default=default, metavar="NAME",
                       help=f"one of: {names}")
    default = ("auto for weighted-gaussian, policy-gaussian and sips, 100 for the others"
               if auto_default else "100")
    g.add_argument(*flags("max-items-per-user"), type=int_or_auto, metavar="N|auto",
                   help="Δ0, the contribution bound: how many distinct items of each user are "
                        f"kept before anything is counted, sampled uniformly (default: {default}) "
                        "or, for gw, the user's most frequent ones (default: 30"
                        + ("; 300 with --public-input)" if public_input else ")")
                        + "; 'auto' spends 5%% of the budget (sips: 1.5%%) on choosing it "
                          "privately (docs/how-to/choose-delta0.md)")
    g.add_argument(*flags("rounds"), type=int, metavar="N",
                   help="sips: number of rounds (default: 3, at most "
                        f"{mechanisms.SIPS.MAX_ROUNDS})")
    g.add_argument(*flags("ratio"), type=float, metavar="R",
                   help="sips: each round gets R times the budget of the next, 0 < R <= 1 "
                        "(default: 1/3)")
    g.add_argument(*flags("sips-removal"), type=canonical_name, choices=("side_input", "join"),
                   help="sips: remove released items by side input, or by join when the "
                        "released set is too large for worker memory (default: side_input)")
    g.add_argument(*flags("alpha"), type=float, metavar="A",
                   help="policy-laplace/policy-gaussian/gw: α, how far above the release "
                        "threshold users fill an item, in noise scales: the cutoff Γ = "
                        "threshold + α·scale (default: 3)")
    g.add_argument(*flags("shards"), type=int, metavar="P",
                   help="policy-laplace/policy-gaussian/gw: split users over P independent "
                        "orders and sum them, for scale (default: 1, the papers' algorithm)")
    if public_input:
        g.add_argument(*flags("public-input"), metavar="PATTERN",
                       help="gw: a public corpus whose item counts order each user's items "
                            "(GW-KT); costs no privacy budget")
        g.add_argument(*flags("public-format"), choices=("text", "csv"), default="text",
                       help="format of --public-input: text (one document per line) or csv")
        g.add_argument(*flags("public-text-field"), metavar="FIELD",
                       help="csv --public-input: the text column")
    g.add_argument(*flags("hot-key-fanout"), type=int, metavar="N",
                   help="fan-out of the per-item sum, for very skewed data on large runners "
                        "(default: none)")
    if not several:
        add_pre_threshold_argument(g, "an item")


def add_pre_threshold_argument(group, what: str) -> None:
    """--pre-threshold K: on top of the DP selection, release only what ≥ K users hold."""
    group.add_argument(*flags("pre-threshold"), type=int, default=1, metavar="K",
                       help=f"release {what} only if at least K distinct users hold it after "
                            "bounding, on top of the DP selection, at the same budget: its "
                            "release threshold rises by K − 1 (policy-gaussian: by more, its "
                            "base threshold becoming one for unequal weights; "
                            "truncated-geometric keeps with the count minus K − 1); "
                            "docs/how-to/pre-threshold.md (default: 1, none)")


def add_budget_arguments(parser: JobArgumentParser) -> None:
    """--epsilon or --rho, --delta, and the test-only --seed."""
    g = parser.add_argument_group("privacy budget (user-level: one user's records all count "
                                  "as one)")
    g.add_argument(*flags("epsilon"), type=float, metavar="E",
                   help="ε of an (ε, δ)-DP budget: the privacy loss bound (smaller is more "
                        "private)")
    g.add_argument(*flags("rho"), type=float, metavar="R",
                   help="ρ of a δ-approximate ρ-zCDP budget (zero-concentrated DP, which "
                        "composes Gaussian noise tightly); give --epsilon or --rho")
    g.add_argument(*flags("delta"), type=float, required=True, metavar="D",
                   help="δ of the budget: bounds the chance that an item only one user holds "
                        "is released")
    g.add_argument(*flags("seed"), type=int, metavar="N",
                   help="TESTS ONLY: fixed seed for noise and sampling; the release is then "
                        "not private and the report says so")


def add_output_arguments(parser: JobArgumentParser, what: str) -> None:
    """--output, --output-format and --num-shards for a job that writes ``what`` ("items")."""
    g = parser.add_argument_group("output")
    g.add_argument(*flags("output"), required=True, metavar="FOLDER",
                   help=f"output folder (local or gs://…) for {what}-*.txt (or .parquet) and "
                        "report.json")
    g.add_argument(*flags("output-format"), choices=OUTPUT_FORMATS, default="text",
                   help=f"text: {what}-*.txt, one escaped {what[:-1]} per line (and "
                        f"counts-*.tsv); parquet: {what}-*.parquet with a column "
                        + ("'ngram' (list of tokens)" if what == "ngrams" else "'item'")
                        + " (and counts-*.parquet with 'count'), sorted and sharded alike "
                          "(default: text)")
    g.add_argument(*flags("num-shards"), type=int, default=1, metavar="N",
                   help=f"number of {what} files; lines are sorted and each {what[:-1]} goes "
                        "to the file its own hash picks, so the files depend on the released "
                        f"set only; at most {MAX_NUM_SHARDS:,}")
    add_overwrite_argument(g)


def add_overwrite_argument(group) -> None:
    """--overwrite: replace an --output folder that holds files (refused otherwise)."""
    _add_switch(group, "overwrite", "replace the --output folder if it holds files: everything "
                "in it goes (without this flag such a folder is refused); the new folder takes "
                "its place only once it is complete")


def add_non_private_stats_argument(parser: JobArgumentParser, what: str) -> None:
    """--non-private-stats: raw-data counts in the report, opt-in."""
    g = parser.add_argument_group("raw statistics (opt-in, NOT private)")
    _add_switch(g, "non-private-stats", f"also compute raw counts of the input ({what}) into "
                "the report's non_private_counts and the progress lines; they are NOT "
                "differentially private and cost extra passes over the data")


def add_counts_arguments(parser: JobArgumentParser, default_max_items: str) -> None:
    """--with-counts and its budget share and Δ0 (vocabulary and n-gram jobs)."""
    g = parser.add_argument_group("counts of the released items (optional)")
    _add_switch(g, "with-counts", "also write OUT/counts-*.tsv (.parquet with --output-format "
                "parquet): item<TAB>noisy number of users holding it, for every released item "
                "(exact discrete Laplace noise under --epsilon, discrete Gaussian under --rho), "
                "paid for by --counts-share of the budget")
    g.add_argument(*flags("counts-share"), type=float, metavar="S",
                   help="with --with-counts: the share of ε (or ρ) spent on the counts, "
                        f"0 < S < 1 (default: {DEFAULT_COUNTS_SHARE}); the selection gets "
                        "the rest and all of δ")
    g.add_argument(*flags("counts-max-items-per-user"), type=int_or_auto, metavar="N|auto",
                   help="with --with-counts: Δ0 of the counts, the most released items each "
                        "user is counted on, sampled uniformly (default: "
                        f"{default_max_items}; auto with --max-items-per-user auto); 'auto' "
                        "spends 5%% of the counts' share on choosing it privately")
