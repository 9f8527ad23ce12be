"""The command-line pieces every job shares: flags, inputs, budget, errors, reports, progress.

The jobs (``pipelines.vocabulary``, ``pipelines.ngrams``, ``pipelines.evaluate``,
``pipelines.benchmark``) are thin: each builds a :class:`JobArgumentParser`
from the ``add_*_arguments`` groups here, calls :func:`parse_job_args`, and
runs through :func:`run_job`, which turns every expected failure into one
``error: …`` line and exit code 2.

What a new user meets, and where it is handled:

* Flags (:class:`JobArgumentParser`): no abbreviations; ``--a-b`` and
  ``--a_b`` both accepted (Dataflow Flex Template parameter names cannot hold
  hyphens) but only ``--a-b`` shown in ``--help``; defaults shown; argparse's
  own errors become one line.
* Unknown flags (:func:`parse_job_args`): whatever the job does not know is
  parsed as Beam pipeline options by a parser built from Beam's own option
  classes; anything neither knows is an error naming the flag and the closest
  valid ones.
* Input (:func:`resolve_input`): ``--format`` inferred from the file names,
  then the first record of each file parsed on the launching machine before
  any pipeline is built, so a wrong format, a corrupt or binary file, a
  missing column or an empty input fails in a second with a clear message.
* Output (:func:`prepare_output`): checked writable before the pipeline
  starts; a folder this run created is removed again if the run fails.
* Beam's noise (``pipelines._BeamNoiseFilter``, installed when the package is
  imported): the ``apitools not found`` warning,
  ``Discarding unparseable args`` and Beam's ERROR log of an exception the job
  reports itself are dropped.
* Progress (:data:`LOG`, :class:`LogCount`, :func:`log_written`): lines on
  stderr naming the stage, SIPS round and DPNE level with their released
  counts, and one summary line on stdout when the job succeeds.

Only the released set leaves (DESIGN §4, invariant 6): progress lines and
error messages name files, line numbers, fields, parameters and released
counts, never a user id, a record's text or a raw count (raw counts are logged
only with ``--non-private-stats``).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import difflib
import json
import logging
import os
import re
import shutil
import sys
import tempfile
import textwrap
import time
import uuid
from typing import Callable, Iterable, Sequence

from pipelines import BEAM_NOISE_FILTER, quiet_beam  # noqa: E402  (first: quiets Beam)

import apache_beam as beam  # noqa: E402
from apache_beam.io.filesystems import FileSystems  # noqa: E402
from apache_beam.options.pipeline_options import (PipelineOptions,  # noqa: E402
                                                  StandardOptions, _BeamArgumentParser)
from apache_beam.runners.runner import create_runner  # noqa: E402

from beam_dpsu import configs  # noqa: E402
from beam_dpsu.accounting import Budget, ZCDPBudget  # noqa: E402
from beam_dpsu.bounding import InvalidRecordError  # noqa: E402
from beam_dpsu.counts import (DEFAULT_COUNTS_SHARE, CountReleased,  # noqa: E402
                              SelectionAndCountsBudget, count_calibration,
                              split_selection_and_counts)
from beam_dpsu.output import WriteReleased, format_released  # noqa: E402
from beam_dpsu.report import dp_equivalents, to_json  # noqa: E402
from beam_dpsu.text import Tokenizer  # noqa: E402
from beam_dpsu.windowing import NonGlobalWindowError  # noqa: E402
from pipelines.inputs import (FORMAT_HELP, ROW_AS_USER, InputFormatError,  # noqa: E402
                              check_input_exists, infer_format, inspect_input)

__all__ = [
    "UsageError", "JobArgumentParser", "flags", "boolean", "parse_job_args",
    "add_input_arguments", "add_mechanism_arguments", "add_budget_arguments",
    "add_output_arguments", "add_non_private_stats_argument", "add_counts_arguments",
    "budget_parts_from_args", "count_released", "count_line", "with_counts_report", "resolve_input", "check_num_shards",
    "budget_from_args", "describe_budget", "tokenizer_from_args", "mechanism_from_args",
    "check_public_input", "prepare_output", "WriteJson", "read_json", "LogCount",
    "log_written", "LOG", "progress", "run_job", "error_message",
]

LOG = logging.getLogger("pipelines")

NOTHING_RELEASED = (" (nothing cleared the release threshold: expected when few users hold "
                    "each item, e.g. on a small input, by design)")


class UsageError(ValueError):
    """A bad command-line parameter or a job that cannot start as asked."""


# -- flags and help ----------------------------------------------------------------------


def flags(name: str) -> tuple[str, ...]:
    """``--a-b`` and its ``--a_b`` spelling.

    Dataflow Flex Template parameter names cannot contain hyphens, so every
    job flag accepts both; ``--help`` shows the first only.
    """
    underscored = name.replace("-", "_")
    return (f"--{name}",) if underscored == name else (f"--{name}", f"--{underscored}")


def boolean(text: str) -> bool:
    """A flag value: true/false, yes/no, 1/0 (Flex Templates pass ``--flag=value``)."""
    value = text.strip().lower()
    if value in ("true", "yes", "1"):
        return True
    if value in ("false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """One spelling per flag, defaults shown, examples (the epilog) kept as written."""

    def _format_action_invocation(self, action):
        shown = [s for s in action.option_strings
                 if not (s.startswith("--") and "_" in s
                         and s.replace("_", "-") in action.option_strings)]
        if shown != list(action.option_strings):
            action = copy.copy(action)
            action.option_strings = shown
        return super()._format_action_invocation(action)

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if ("(default" in text or not action.option_strings or default is None
                or default is argparse.SUPPRESS or default is False
                or isinstance(action, argparse._HelpAction)):
            return text
        shown = "%(default)s" if not isinstance(default, bool) else str(default).lower()
        return f"{text} (default: {shown})"


def _wrap_command(command: str, width: int = 86) -> str:
    """A command line broken before flags into shell-continued lines of ≤ ``width``."""
    lines, line = [], "  "
    for word in re.split(r" (?=--)", command):
        if len(line) + len(word) + 1 > width and line.strip():
            lines.append(line + " \\")
            line = "      "
        line += ("" if line.strip() == "" else " ") + word
    return "\n".join(lines + [line])


class JobArgumentParser(argparse.ArgumentParser):
    """The jobs' argument parser: no abbreviations, errors as :class:`UsageError`.

    Args:
      prog: e.g. ``"python -m pipelines.vocabulary"``.
      description: what the job does, in a sentence or two.
      examples: command lines shown under "examples:" at the end of ``--help``.
    """

    def __init__(self, prog: str, description: str, examples: Sequence[str] = ()):
        epilog = "examples:\n" + "\n\n".join(_wrap_command(e) for e in examples) + "\n\n"
        epilog += textwrap.fill(
            "Flags are also accepted with underscores (--max_items_per_user). Any other flag "
            "must be a Beam pipeline option: --runner, --direct_num_workers N (local "
            "parallelism), --project, --region, --temp_location, …", width=88)
        super().__init__(prog=prog, description=textwrap.fill(description, width=88),
                         epilog=epilog, formatter_class=HelpFormatter, allow_abbrev=False)

    def error(self, message):
        raise UsageError(f"{message} (see {self.prog} --help)")

    def option_names(self) -> list[str]:
        """Every flag as shown in help (hyphenated)."""
        return sorted({s for a in self._actions for s in a.option_strings
                       if s.startswith("--") and not ("_" in s and s.replace("_", "-")
                                                      in a.option_strings)})


class _BeamOptionsParser(_BeamArgumentParser):
    """Beam's own option parser (every registered ``PipelineOptions`` class), strict."""

    def __init__(self):
        super().__init__(allow_abbrev=False, add_help=False)
        seen = set()
        for cls in PipelineOptions.__subclasses__():
            if cls.__name__ not in seen:
                seen.add(cls.__name__)
                cls._add_argparse_args(self)  # pylint: disable=protected-access

    def error(self, message):
        raise UsageError(f"bad Beam pipeline option: {message}")


def _closest(flag: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """The valid flags closest to ``flag`` (hyphens and underscores alike): similarity
    ≥ 0.7 and within 0.1 of the best match, at most ``n``."""
    norm = {c.replace("_", "-"): c for c in candidates if c not in ("-h", "--help")}
    target = flag.replace("_", "-")
    scored = sorted(((difflib.SequenceMatcher(None, target, c).ratio(), c) for c in norm),
                    reverse=True)
    scored = [(r, c) for r, c in scored if r >= 0.7]
    if not scored:
        return []
    best = scored[0][0]
    return [norm[c] for r, c in scored[:n] if r >= best - 0.1]


def parse_job_args(parser: JobArgumentParser, argv: Sequence[str] | None):
    """(job arguments, Beam ``PipelineOptions``) from the command line.

    Flags the job does not define are parsed by Beam's own option parser; a
    flag neither knows is a :class:`UsageError` naming it and the closest
    valid flags of both.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    args, rest = parser.parse_known_args(argv)
    beam_parser = _BeamOptionsParser()
    _, unknown = beam_parser.parse_known_args(rest)
    if unknown:
        flag = next((u for u in unknown if u.startswith("-")), None)
        if flag is None:
            raise UsageError(f"unexpected argument {unknown[0]!r} (flags take the form "
                             f"--name value; see {parser.prog} --help)")
        name = flag.split("=", 1)[0]
        beam_flags = [s for a in beam_parser._actions for s in a.option_strings
                      if s.startswith("--")]
        close = _closest(name, parser.option_names() + beam_flags)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise UsageError(f"unknown flag {name}{hint} (see {parser.prog} --help)")
    if ("multi_processing" in " ".join(rest) and not any(
            a.startswith("--default_sdk_harness_log_level") for a in rest)):
        # The DirectRunner's worker processes log at INFO to the console otherwise.
        rest = rest + ["--default_sdk_harness_log_level=WARNING"]
    options = PipelineOptions(rest)
    runner = options.view_as(StandardOptions).runner
    if runner is not None:
        try:
            create_runner(runner)  # an unknown --runner fails now, not after the checks
        except (ValueError, ImportError) as exc:
            raise UsageError(f"--runner {runner}: {str(exc).split('. ')[0]}") from None
    return args, options


# -- argument groups ---------------------------------------------------------------------


def add_input_arguments(parser: argparse.ArgumentParser, formats: Sequence[str]) -> None:
    """--input, --format (one of ``formats``), fields, header lines, tokeniser flags."""
    g = parser.add_argument_group("input")
    g.add_argument(*flags("input"), required=True, metavar="PATTERN",
                   help="input file or glob (local, gs://, …); .gz, .bz2, .zst, .deflate and "
                        ".xz files are decompressed")
    inferable = ", ".join(f"{ext} → {fmt}" for ext, fmt in
                          ((".csv", "csv"), (".jsonl", "jsonl"), (".txt", "text"),
                           (".zip/.seq", "msnbc")) if fmt in formats)
    g.add_argument(*flags("format"), choices=formats, metavar="{" + ",".join(formats) + "}",
                   help="; ".join(f"{f}: {FORMAT_HELP[f]}" for f in formats)
                        + f" (default: inferred from the file names: {inferable})")
    g.add_argument(*flags("user-field"), metavar="FIELD",
                   help="csv/jsonl: the field holding the user id; csv: '@row' makes each row "
                        "its own user")
    g.add_argument(*flags("text-field"), metavar="FIELD",
                   help="csv/jsonl: the field holding the user's text")
    if "pairs" in formats or "text" in formats:
        g.add_argument(*flags("skip-header-lines"), type=int, default=0, metavar="N",
                       help="pairs/text: lines to skip at the top of each file")
    g.add_argument(*flags("keep-case"), type=boolean, nargs="?", const=True, default=False,
                   metavar="BOOL", help="do not lower-case tokens (--keep-case or "
                                        "--keep-case=true)")
    g.add_argument(*flags("keep-urls"), type=boolean, nargs="?", const=True, default=False,
                   metavar="BOOL", help="do not strip URLs before tokenising")


def add_mechanism_arguments(parser: argparse.ArgumentParser, several: bool = False,
                            public_input: bool = True) -> None:
    """--mechanism (or --mechanisms, comma-separated, with ``several``) and its parameters;
    ``public_input``: GW-KT's public corpus flags, for jobs that read it."""
    g = parser.add_argument_group("mechanism (see README 'Mechanisms')")
    names = ", ".join(sorted(configs.MECHANISMS))
    if several:
        g.add_argument(*flags("mechanisms"), default="weighted-gaussian", metavar="NAMES",
                       help=f"comma-separated mechanisms from: {names}")
    else:
        g.add_argument(*flags("mechanism"), default="weighted-gaussian", metavar="NAME",
                       help=f"one of: {names}")
    g.add_argument(*flags("max-items-per-user"), type=int, metavar="N",
                   help="Δ0, the contribution bound: how many distinct items of each user are "
                        "kept before anything is counted, sampled uniformly (default: 100) or, "
                        "for gw, the user's most frequent ones (default: 30; 300 with "
                        "--public-input)")
    g.add_argument(*flags("rounds"), type=int, metavar="N",
                   help="sips: number of rounds (default: 3, at most 100)")
    g.add_argument(*flags("ratio"), type=float, metavar="R",
                   help="sips: each round gets R times the budget of the next, 0 < R <= 1 "
                        "(default: 1/3)")
    g.add_argument(*flags("sips-removal"), choices=("side_input", "join"),
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
        _add_public_input_arguments(g)
    g.add_argument(*flags("hot-key-fanout"), type=int, metavar="N",
                   help="fan-out of the per-item sum, for very skewed data on large runners "
                        "(default: none)")


def _add_public_input_arguments(g) -> None:
    g.add_argument(*flags("public-input"), metavar="PATTERN",
                   help="gw: a public corpus whose item counts order each user's items "
                        "(GW-KT); costs no privacy budget")
    g.add_argument(*flags("public-format"), choices=("text", "csv"), default="text",
                   help="format of --public-input: text (one document per line) or csv")
    g.add_argument(*flags("public-text-field"), metavar="FIELD",
                   help="csv --public-input: the text column")


def add_budget_arguments(parser: argparse.ArgumentParser) -> None:
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


def add_output_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """--output and --num-shards for a job that writes ``what`` (e.g. "items")."""
    g = parser.add_argument_group("output")
    g.add_argument(*flags("output"), required=True, metavar="FOLDER",
                   help=f"output folder (local or gs://…) for {what}-*.txt and report.json")
    g.add_argument(*flags("num-shards"), type=int, default=1, metavar="N",
                   help=f"number of {what} files; lines are sorted and each {what[:-1]} goes "
                        "to the file its own hash picks, so the files depend on the released "
                        "set only")


def add_non_private_stats_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """--non-private-stats: raw-data counts in the report, opt-in."""
    g = parser.add_argument_group("raw statistics (opt-in, NOT private)")
    g.add_argument(*flags("non-private-stats"), type=boolean, nargs="?", const=True,
                        default=False, metavar="BOOL",
                        help=f"also compute raw counts of the input ({what}) into the "
                             "report's non_private_counts and the progress lines; they are "
                             "NOT differentially private and cost extra passes over the data")


def add_counts_arguments(parser: argparse.ArgumentParser, default_max_items: str) -> None:
    """--with-counts and its budget share and Δ0 (vocabulary and n-gram jobs)."""
    g = parser.add_argument_group("counts of the released items (optional)")
    g.add_argument(*flags("with-counts"), type=boolean, nargs="?", const=True, default=False,
                   metavar="BOOL",
                   help="also write OUT/counts-*.tsv: item<TAB>noisy number of users holding "
                        "it, for every released item (exact discrete Laplace noise under "
                        "--epsilon, discrete Gaussian under --rho), paid for by "
                        "--counts-share of the budget")
    g.add_argument(*flags("counts-share"), type=float, metavar="S",
                   help="with --with-counts: the share of ε (or ρ) spent on the counts, "
                        f"0 < S < 1 (default: {DEFAULT_COUNTS_SHARE}); the selection gets "
                        "the rest and all of δ")
    g.add_argument(*flags("counts-max-items-per-user"), type=int, metavar="N",
                   help="with --with-counts: Δ0 of the counts, the most released items each "
                        "user is counted on, sampled uniformly (default: "
                        f"{default_max_items})")


# -- turning arguments into checked values -----------------------------------------------


def resolve_input(args, formats: Sequence[str], option: str = "input") -> list[str]:
    """Infers ``args.format`` when it was not given and checks the input; returns its files.

    The first record of (up to 32 of) the matched files is parsed here, before
    any pipeline is built, so a wrong format, a corrupt or binary file, a
    missing field or an input with no records fails at once (with the file,
    line and field, never the record's text).
    """
    files = check_input_exists(getattr(args, option))
    inferred = args.format is None
    if inferred:
        args.format = infer_format(files, formats)
    if args.format in ("csv", "jsonl") and not (args.user_field and args.text_field):
        how = " (inferred from the file name)" if inferred else ""
        hint = ("; for headerless lines of user,item give --format pairs"
                if args.format == "csv" and "pairs" in formats else "")
        raise UsageError(f"--format {args.format}{how} needs --user-field and "
                         f"--text-field{hint}")
    if args.format not in ("csv", "jsonl") and (args.user_field or args.text_field):
        raise UsageError(f"--user-field and --text-field apply to --format csv or jsonl, "
                         f"not {args.format}")
    skip = getattr(args, "skip_header_lines", 0) or 0
    if skip < 0:
        raise UsageError(f"--skip-header-lines must be >= 0, got {skip}")
    inspect_input(files, args.format, args.user_field, args.text_field, skip)
    return files


def check_public_input(args) -> None:
    """GW-KT's --public-input: the format's fields, and the files exist and parse."""
    if not getattr(args, "public_input", None):
        return
    if args.public_format == "csv" and not args.public_text_field:
        raise UsageError("--public-format csv needs --public-text-field")
    files = check_input_exists(args.public_input)
    inspect_input(files, args.public_format,
                  ROW_AS_USER if args.public_format == "csv" else None,
                  args.public_text_field or None, 0)


def budget_parts_from_args(args, budget) -> SelectionAndCountsBudget | None:
    """The selection and counts parts of the budget with --with-counts, else None."""
    if not args.with_counts:
        if args.counts_share is not None or args.counts_max_items_per_user is not None:
            raise UsageError("--counts-share and --counts-max-items-per-user need --with-counts")
        return None
    share = DEFAULT_COUNTS_SHARE if args.counts_share is None else args.counts_share
    return split_selection_and_counts(budget, share)


def check_counts(parts: SelectionAndCountsBudget | None, max_items_per_user: int) -> None:
    """The counts' calibration, computed now so a bad Δ0 fails before anything runs."""
    if parts is not None:
        count_calibration(parts.counts, max_items_per_user)


def count_line(item_count) -> str:
    """``item<TAB>count``; a tab inside the item is written as ``\\t`` (like line breaks)."""
    item, count = item_count
    return format_released(item).replace("\t", "\\t") + "\t" + str(count)


def count_released(records, released, parts: SelectionAndCountsBudget,
                   max_items_per_user: int, seed, out: str, num_shards: int = 1,
                   ngrams: bool = False, privacy_unit: str = "user_id") -> CountReleased:
    """Counts the released items and writes OUT/counts-*.tsv in the items' order and
    shards (both sorted and sharded by the item alone)."""
    counter = CountReleased(released, parts.counts, max_items_per_user, seed=seed,
                            ngrams=ngrams, privacy_unit=privacy_unit)
    _ = (records
         | "CountReleased" >> counter
         | "WriteCounts" >> WriteReleased(f"{out}/counts", ".tsv", num_shards=num_shards,
                                          format_line=count_line, sort_key=lambda kv: kv[0]))
    return counter


def privacy_unit_from_args(args) -> str:
    """"element" when the job makes each record its own user (csv with ``--user-field
    @row``, text: one user per line), else "user_id" (records merged per user id).

    Those records' ids (``<file>:<row>``) are distinct by construction, so
    the per-user merge, a shuffle of every record, has nothing to merge.
    """
    if args.format == "text" or (args.format == "csv" and args.user_field == ROW_AS_USER):
        return "element"
    return "user_id"


def with_counts_report(report: dict, parts: SelectionAndCountsBudget | None,
                       counter: CountReleased | None) -> dict:
    """The selection's report plus, with counts, the budget split and the counts' report."""
    if parts is None:
        return report
    report = dict(report)
    # The selection's (ε, δ) equivalents describe its share only: keep them
    # under a name that says so, and state the total's (zCDP adds up).
    if "dp_equivalents" in report:
        report["selection_dp_equivalents"] = report.pop("dp_equivalents")
    report.update({"total_budget": parts.total.to_dict(), "budget_split": parts.to_dict(),
                   "counts": counter.report})
    if isinstance(parts.total, ZCDPBudget):
        report["dp_equivalents"] = dp_equivalents(parts.total)
    return report


def budget_from_args(args) -> Budget | ZCDPBudget:
    if (args.epsilon is None) == (args.rho is None):
        raise UsageError("give exactly one of --epsilon (for (ε, δ)-DP) or --rho (for zCDP)")
    if args.epsilon is not None:
        return Budget(args.epsilon, args.delta)
    return ZCDPBudget(args.rho, args.delta)


def describe_budget(budget) -> str:
    """``(ε = 1, δ = 1e-05)-DP`` or ``ρ = 0.1 zCDP, δ = 1e-05 (≈ (ε = 1.91, δ = 2e-05)-DP)``."""
    if isinstance(budget, ZCDPBudget):
        text = f"ρ = {budget.rho:g} zCDP, δ = {budget.delta:g}"
        if 2 * budget.delta < 1:
            dp = budget.to_dp(2 * budget.delta)
            text += f" (≈ (ε = {dp.epsilon:.3g}, δ = {dp.delta:g})-DP)"
        return text
    return f"(ε = {budget.epsilon:g}, δ = {budget.delta:g})-DP"


def tokenizer_from_args(args) -> Tokenizer:
    return Tokenizer(lowercase=not args.keep_case, strip_urls=not args.keep_urls)


def mechanism_from_args(args, name: str | None = None,
                        ignore_unused: bool = False) -> configs.MechanismConfig:
    """The mechanism config named ``name`` (default: --mechanism) with the flags it takes."""
    name = (name or args.mechanism).strip()
    if name not in configs.MECHANISMS:
        close = difflib.get_close_matches(name, list(configs.MECHANISMS), n=2, cutoff=0.6)
        try:
            configs.mechanism_from_name(name)
        except ValueError as exc:
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            raise UsageError(f"{exc}{hint}") from None
    return configs.mechanism_from_name(
        name, ignore_unused, max_items_per_user=args.max_items_per_user,
        rounds=getattr(args, "rounds", None), ratio=getattr(args, "ratio", None),
        removal=getattr(args, "sips_removal", None), alpha=getattr(args, "alpha", None),
        shards=getattr(args, "shards", None))


def check_num_shards(args) -> None:
    if args.num_shards < 1:
        raise UsageError(f"--num-shards must be >= 1, got {args.num_shards}")


# -- output ------------------------------------------------------------------------------


def _is_local(path: str) -> bool:
    return "://" not in path


def prepare_output(folder: str) -> bool:
    """Checks that ``folder`` can be written, before any pipeline runs.

    A local folder is created (with its parents) and a probe file written and
    removed in it; a remote one (gs://, s3://, …) must have a Beam
    filesystem. Returns whether this call created the folder, so that a failed
    run can remove it again (:func:`remove_output`).
    """
    if not _is_local(folder):
        try:
            FileSystems.get_filesystem(folder)
        except ValueError as exc:
            raise UsageError(f"cannot write output {folder!r}: {exc}") from None
        return False
    existed = os.path.isdir(folder)
    if os.path.exists(folder) and not existed:
        raise UsageError(f"cannot write output {folder!r}: it is a file, not a folder")
    try:
        os.makedirs(folder, exist_ok=True)
        probe = os.path.join(folder, f".beam_dpsu-probe-{uuid.uuid4().hex}")
        with open(probe, "w", encoding="utf-8"):
            pass
        os.remove(probe)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        parent = _existing_ancestor(folder)
        if parent and os.path.exists(parent) and not os.path.isdir(parent):
            reason = f"{parent} is a file"
        if not existed:
            remove_output(folder, True)
        raise UsageError(f"cannot write output folder {folder!r}: {reason}") from None
    return not existed


def _existing_ancestor(path: str) -> str | None:
    path = os.path.abspath(path)
    while path and not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent
    return path


def remove_output(folder: str, created: bool) -> None:
    """After a failed run: removes ``folder`` if this run created it, else only the
    ``beam-temp-*`` folders Beam's file sinks may have left in it."""
    if not _is_local(folder) or not os.path.isdir(folder):
        return
    if created:
        shutil.rmtree(folder, ignore_errors=True)
        return
    for name in os.listdir(folder):
        if name.startswith("beam-temp-"):
            shutil.rmtree(os.path.join(folder, name), ignore_errors=True)


def _write_file(text: str, path: str) -> str:
    """Writes ``text`` to a temporary name beside ``path``, then renames it: a failed
    write never leaves a partial file under the final name."""
    temporary = f"{path}.tmp-{uuid.uuid4().hex}"
    handle = FileSystems.create(temporary)
    try:
        handle.write(text.encode("utf-8"))
    finally:
        handle.close()
    FileSystems.rename([temporary], [path])
    return path


class WriteJson(beam.PTransform):
    """Writes the one dict of a PCollection as a JSON file at ``path``.

    Written as one file (no temporary folder; a temporary name renamed), as
    strict JSON with keys in insertion order, so the same report is the same bytes.
    """

    def __init__(self, path: str):
        super().__init__()
        self._path = path

    def expand(self, reports):
        path = self._path
        return (reports
                | "ToJson" >> beam.Map(to_json)
                | "WriteFile" >> beam.Map(lambda text: _write_file(text + "\n", path)))


@contextlib.contextmanager
def scratch_folder(folder: str | None, prefix: str):
    """``folder`` (created if needed, and kept), or a temporary folder removed at the end."""
    if folder:
        os.makedirs(folder, exist_ok=True)
        yield folder
        return
    temporary = tempfile.mkdtemp(prefix=prefix)
    try:
        yield temporary
    finally:
        shutil.rmtree(temporary, ignore_errors=True)


def read_json(path: str) -> dict:
    """A JSON file written by the run (local or remote), for the closing summary."""
    with FileSystems.open(path) as f:
        return json.loads(f.read().decode("utf-8"))


# -- progress ----------------------------------------------------------------------------


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a line is logged (tests swap it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _):
        pass


class _ProgressFormatter(logging.Formatter):
    def __init__(self):
        super().__init__()
        self.job = "job"
        self.start = time.monotonic()

    def format(self, record):
        return f"[{self.job} {time.monotonic() - self.start:6.1f}s] {record.getMessage()}"


_HANDLER = _StderrHandler()
_FORMATTER = _ProgressFormatter()
_HANDLER.setFormatter(_FORMATTER)


def configure_progress(job: str) -> None:
    """Progress lines of the ``pipelines`` logger on stderr, timed from now."""
    _FORMATTER.job, _FORMATTER.start = job, time.monotonic()
    if _HANDLER not in LOG.handlers:
        LOG.addHandler(_HANDLER)
    LOG.setLevel(logging.INFO)
    LOG.propagate = False
    quiet_beam()


def progress(message: str) -> None:
    """One progress line (driver side)."""
    LOG.info(message)


class LogCount(beam.PTransform):
    """Counts a PCollection and logs ``message.format(n=count)``; returns the count.

    For released sets only (a round's or a level's release), whose size is a
    DP output: logging it says nothing the release does not.
    """

    def __init__(self, message: str):
        super().__init__()
        self._message = message

    def expand(self, pcoll):
        message = self._message

        def log(n):
            logging.getLogger("pipelines").info(message.format(n=n))
            return n

        return (pcoll
                | "Count" >> beam.combiners.Count.Globally()
                | "Log" >> beam.Map(log))


def log_written(paths, what: str):
    """Logs each file a writer returns as written."""
    return paths | f"Log{what.title()}Written" >> beam.Map(
        lambda path: logging.getLogger("pipelines").info(f"wrote {path}"))


# -- running a job -----------------------------------------------------------------------

_CLEAN_ERRORS = (UsageError, InputFormatError, InvalidRecordError, NonGlobalWindowError)
_WRAPPED = re.compile(r"\b(InputFormatError|InvalidRecordError|NonGlobalWindowError|UsageError)"
                      r": (.+)")
_STEP = re.compile(r"\s*\[while running '[^']*'\]")


def error_message(exc: BaseException) -> str | None:
    """The one-line message of an expected failure, or None for a bug.

    Beam re-raises a DoFn's exception with ``[while running 'Step']``
    appended (dropped here); portable runners wrap it in a RuntimeError whose
    text holds the original ``InputFormatError: …`` line (found here).
    """
    if isinstance(exc, _CLEAN_ERRORS):
        text = str(exc)
    else:
        match = _WRAPPED.search(str(exc))
        if not match:
            return None
        text = match.group(2)
    return _STEP.sub("", text.strip().splitlines()[0] if text.strip() else text).strip()


def run_job(name: str, argv, prepare: Callable, run: Callable[..., str]) -> int:
    """Runs a job: one ``error: …`` line and exit code 2 for every expected failure.

    Args:
      name: the job's name in progress lines.
      argv: the command line (None: ``sys.argv[1:]``).
      prepare: argv → job; parses and checks everything that can be checked
        without data, and exposes ``job.output`` (the output folder, or None).
        Bad parameters may raise ``ValueError``/``TypeError`` here.
      run: job → the closing summary line; runs the pipeline(s).
    """
    configure_progress(name)
    try:
        job = prepare(argv)
    except (ValueError, TypeError) as exc:  # includes UsageError and InputFormatError
        print(f"error: {error_message(exc) or exc}", file=sys.stderr)
        return 2
    output = getattr(job, "output", None)
    created = False
    try:
        if output:
            created = prepare_output(output)
        summary = run(job)
    except Exception as exc:  # noqa: BLE001 - re-raised unless it is an expected failure
        if output:
            remove_output(output, created)
        message = error_message(exc)
        if message is None:
            raise
        print(f"error: {message}", file=sys.stderr)
        return 2
    if summary:
        print(summary, flush=True)
    return 0
