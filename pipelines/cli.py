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
  own errors become one line; a negative number is a value (``--delta -1e-5``
  gets the range error) and a flag given twice is an error naming it.
* Parameters (:func:`flag_errors`): a library ``ValueError`` about a bad
  parameter is reworded in flags through one mapping (:data:`FLAG_OF`), so an
  error says ``--max-items-per-user``, never ``max_items_per_user=`` or a
  ``Budget(...)``.
* Unknown flags (:func:`parse_job_args`): whatever the job does not know is
  parsed as Beam pipeline options by a parser built from Beam's own option
  classes; anything neither knows is an error naming the flag and the closest
  valid ones.
* Input (:func:`resolve_input`): ``--format`` inferred from the file names,
  then the first records (up to 100) of each file parsed on the launching machine before
  any pipeline is built, so a wrong format, a corrupt or binary file, a
  missing column or an empty input fails in a second with a clear message
  (Parquet: every file's footer, its schema and null counts, is read instead).
* Output (:func:`prepare_output`): a folder that holds files is refused
  unless ``--overwrite``; the run writes into a hidden sibling folder renamed
  into place when it succeeds, so the folder appears complete or not at all.
* Interrupts (:func:`run_job`): SIGINT/SIGTERM end a job with one line
  ``interrupted`` (exit 130/143) and leave no output.
* Beam's noise (``pipelines._BeamNoiseFilter``, installed when the package is
  imported): the ``apitools not found`` warning,
  ``Discarding unparseable args`` and Beam's ERROR log of an exception the job
  reports itself are dropped.
* Progress (:data:`LOG`, :class:`LogCount`, :func:`log_written`): lines on
  stderr naming the stage and DPNE level with their released counts (SIPS
  rounds' only with ``--non-private-stats``), and one summary line on stdout
  when the job succeeds.

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
import math
import os
import re
import shutil
import sys
import tempfile
import textwrap
import time
import uuid
from typing import Callable, Iterable, Sequence

# First: importing pipelines quiets Beam; BEAM_NOISE_FILTER is re-exported for the tests.
from pipelines import BEAM_NOISE_FILTER, quiet_beam  # noqa: E402, F401

import apache_beam as beam  # noqa: E402
from apache_beam.io.filesystems import FileSystems  # noqa: E402
from apache_beam.options.pipeline_options import (PipelineOptions,  # noqa: E402
                                                  StandardOptions, _BeamArgumentParser)
from apache_beam.runners.runner import create_runner  # noqa: E402

from beam_dpsu.core import mechanisms  # noqa: E402

from beam_dpsu.core import max_items_choice  # noqa: E402

from beam_dpsu.core import hashing  # noqa: E402
from beam_dpsu.core.budgets import Budget, ZCDPBudget  # noqa: E402
from beam_dpsu.beam.bounding import InvalidRecordError  # noqa: E402
from beam_dpsu.count_released import (DEFAULT_COUNTS_SHARE, CountReleased,  # noqa: E402
                              SelectionAndCountsBudget, count_calibration,
                              split_selection_and_counts)
from beam_dpsu.beam.output import WriteReleased, format_count_line  # noqa: E402
from beam_dpsu.core.report import dp_equivalents, to_json  # noqa: E402
from beam_dpsu.core.tokenizer import Tokenizer  # noqa: E402
from beam_dpsu.beam.windowing import NonGlobalWindowError  # noqa: E402
from pipelines.inputs import (FORMAT_HELP, ROW_AS_USER, InputFormatError,  # noqa: E402
                              ParquetFields, check_input_exists, infer_format, inspect_input,
                              inspect_parquet, parquet_read_error)

__all__ = [
    "UsageError", "JobArgumentParser", "flags", "boolean", "parse_job_args",
    "add_input_arguments", "add_mechanism_arguments", "add_budget_arguments",
    "add_output_arguments", "add_non_private_stats_argument", "add_counts_arguments",
    "budget_parts_from_args", "count_released", "count_line", "with_counts_report", "resolve_input",
    "check_num_shards",
    "budget_from_args", "describe_budget", "tokenizer_from_args", "mechanism_from_args",
    "check_public_input", "prepare_output", "written_whole", "run_with_output", "staging_of",
    "add_overwrite_argument", "WriteJson", "read_json", "LogCount",
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


def _fill(text: str, width: int = 88) -> str:
    """``textwrap.fill`` that never breaks a flag (``--keep-case``) at its hyphens."""
    return textwrap.fill(text, width=width, break_on_hyphens=False)


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """One spelling per flag, defaults shown, examples (the epilog) kept as written."""

    def _split_lines(self, text, width):
        # argparse's own wrapping breaks at hyphens: "--keep-" / "case".
        text = self._whitespace_matcher.sub(" ", text).strip()
        return textwrap.wrap(text, width, break_on_hyphens=False)

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


# A value that starts with "-" but is a number (or a comma-separated list of
# them, e.g. --epsilons -1,2): argparse's own pattern misses -1e-5, -.5e-2 and
# -inf and would read them as flags ("expected one argument").
_NUMBER = r"(?:(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan)"
_NEGATIVE_NUMBER = re.compile(rf"^-{_NUMBER}(?:,\s*-?{_NUMBER})*$", re.IGNORECASE)


def _shown_flag(action) -> str:
    """The spelling ``--help`` shows (``--a-b``, not ``--a_b``)."""
    return next((s for s in action.option_strings if s.startswith("--")),
                action.option_strings[0])


class _GivenOnce:
    """An action that refuses its flag a second time in one command line, where
    argparse would let the last value win silently (``--epsilon 1 --epsilon 2``)."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = parser.__dict__.setdefault("_given_flags", set())
        if self.dest in given:
            parser.error(f"{_shown_flag(self)} is given more than once: give each flag once")
        given.add(self.dest)
        super().__call__(parser, namespace, values, option_string)


class _StoreOnce(_GivenOnce, argparse._StoreAction):
    pass


class _StoreConstOnce(_GivenOnce, argparse._StoreConstAction):
    pass


class _StoreTrueOnce(_GivenOnce, argparse._StoreTrueAction):
    pass


class _StoreFalseOnce(_GivenOnce, argparse._StoreFalseAction):
    pass


class _StrictValues:
    """Parser mixin: negative numbers are values, single-valued flags are given once
    (list-valued ones, action="append", may repeat)."""

    def _strict_values(self):
        self._negative_number_matcher = _NEGATIVE_NUMBER
        for name, action in ((None, _StoreOnce), ("store", _StoreOnce),
                             ("store_const", _StoreConstOnce), ("store_true", _StoreTrueOnce),
                             ("store_false", _StoreFalseOnce)):
            self.register("action", name, action)

    def parse_known_args(self, args=None, namespace=None):
        self._given_flags = set()  # one command line at a time
        return super().parse_known_args(args, namespace)


class JobArgumentParser(_StrictValues, argparse.ArgumentParser):
    """The jobs' argument parser: no abbreviations, errors as :class:`UsageError`.

    Negative numbers are values (``--delta -1e-5`` gets the range error), and
    a flag given twice is an error naming it.

    Args:
      prog: e.g. ``"python -m pipelines.vocabulary"``.
      description: what the job does, in a sentence or two.
      examples: command lines shown under "examples:" at the end of ``--help``.
      beam_options: whether other flags are Beam pipeline options (the help says so).
    """

    def __init__(self, prog: str, description: str, examples: Sequence[str] = (),
                 beam_options: bool = True):
        self._examples = "examples:\n" + "\n\n".join(_wrap_command(e) for e in examples)
        self._beam_options = beam_options
        super().__init__(prog=prog, description=_fill(description),
                         formatter_class=HelpFormatter, allow_abbrev=False)
        self._strict_values()

    def format_help(self):
        # The epilog names flags of this parser only, so it is written when shown.
        underscored = [s for a in self._actions for s in a.option_strings
                       if s.startswith("--") and "_" in s]
        example = ("--max_items_per_user" if "--max_items_per_user" in underscored
                   else next(iter(underscored), None))
        notes = []
        if example:
            notes.append(f"Flags are also accepted with underscores ({example}).")
        if self._beam_options:
            notes.append("Any other flag must be a Beam pipeline option: --runner, "
                         "--direct_num_workers N (local parallelism), --project, --region, "
                         "--temp_location, …")
        self.epilog = self._examples + ("\n\n" + _fill(" ".join(notes)) if notes else "")
        return super().format_help()

    def error(self, message):
        raise UsageError(f"{message} (see {self.prog} --help)")

    def option_names(self) -> list[str]:
        """Every flag as shown in help (hyphenated)."""
        return sorted({s for a in self._actions for s in a.option_strings
                       if s.startswith("--") and not ("_" in s and s.replace("_", "-")
                                                      in a.option_strings)})


class _BeamOptionsParser(_StrictValues, _BeamArgumentParser):
    """Beam's own option parser (every registered ``PipelineOptions`` class), strict."""

    def __init__(self):
        super().__init__(allow_abbrev=False, add_help=False)
        self._strict_values()
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
    # Beam parses the options again with its own parser, which would read a
    # negative number (-1e-5) as a flag: give such values as --flag=value.
    joined: list[str] = []
    for arg in rest:
        if joined and _NEGATIVE_NUMBER.match(arg) and joined[-1].startswith("--") \
                and "=" not in joined[-1]:
            joined[-1] = f"{joined[-1]}={arg}"
        else:
            joined.append(arg)
    options = PipelineOptions(joined)
    runner = options.view_as(StandardOptions).runner
    if runner is not None:
        try:
            create_runner(runner)  # an unknown --runner fails now, not after the checks
        except (ValueError, ImportError) as exc:
            raise UsageError(f"--runner {runner}: {str(exc).split('. ')[0]}") from None
    return args, options


# -- library errors in the jobs' words ---------------------------------------------------

# The library's parameter names and the flags that set them, in one place: a
# library ValueError that reaches a job's error line is worded in flags
# (:func:`flag_errors`); the library's own messages stay as they are.
FLAG_OF = {
    "epsilon": "--epsilon", "delta": "--delta", "rho": "--rho",
    "mechanism": "--mechanism", "max_items_per_user": "--max-items-per-user",
    "rounds": "--rounds", "ratio": "--ratio", "removal": "--sips-removal",
    "alpha": "--alpha", "shards": "--shards", "hot_key_fanout": "--hot-key-fanout",
    "counts_share": "--counts-share", "num_shards": "--num-shards", "seed": "--seed",
    "max_n": "--max-n", "eta": "--eta", "decay": "--noise-decay",
    "noise_schedule": "--noise-decay", "pruning": "--pruning", "level1": "--level1",
}
_BUDGET_DICT = re.compile(r"\{'type': '[\w-]+'((?:, '\w+': [^,}]+)+)\}")
_BUDGET_REPR = re.compile(r"\b(?:ZCDP)?Budget\(((?:\w+=[^,)]+(?:, )?)+)\)")
_BUDGET_TYPE = re.compile(r"\b(?:an? )?(?:ZCDP)?Budget\((\w+), (\w+)\)")
_NAME_LIST = re.compile(r"\[('\w+'(?:, '\w+')*)\]")


def _number(text: str) -> str:
    try:
        return f"{float(text):g}"
    except ValueError:
        return text


def in_flags(message: str, flag_of: dict | None = None) -> str:
    """A library message in the words of the command line: parameter names as
    flags (where they name the parameter: at the start, before ``must``/``needs``/
    ``=``, after raise/lower/give), budget reprs and dicts as flags with values."""
    names = FLAG_OF if flag_of is None else flag_of

    def pairs(text, pattern):
        out = []
        for name, value in re.findall(pattern, text):
            if name in names:
                out.append(f"{names[name]} {_number(value.strip().strip(chr(39)))}")
        return " ".join(out)

    message = _BUDGET_DICT.sub(lambda m: pairs(m.group(1), r"'(\w+)': ([^,]+)"), message)
    message = _BUDGET_REPR.sub(lambda m: pairs(m.group(1), r"(\w+)=([^,]+)"), message)
    message = _BUDGET_TYPE.sub(lambda m: " and ".join(names.get(g, g) for g in m.groups("")),
                               message)
    message = _NAME_LIST.sub(
        lambda m: (", ".join(names[n.strip("'")] for n in m.group(1).split(", "))
                   if all(n.strip("'") in names for n in m.group(1).split(", "))
                   else m.group(0)), message)
    for name in sorted(names, key=len, reverse=True):
        flag = names[name]
        # mechanism 'sips' → --mechanism sips; name=value / name = value → flag value
        message = re.sub(rf"(?<![\w-]){name} '([^']*)'", rf"{flag} \1", message)
        message = re.sub(rf"(?<![\w-]){name} ?= ?(?!=)", f"{flag} ", message)
        message = re.sub(rf"^{name}\b|(?<![\w-]){name}(?= (?:must|needs)\b)"
                         rf"|(?<=raise ){name}\b|(?<=lower ){name}\b|(?<=give ){name}\b",
                         flag, message)
    return message


@contextlib.contextmanager
def flag_errors(**flag_of):
    """Library ``ValueError``/``TypeError`` raised inside become :class:`UsageError` in
    flags (:func:`in_flags`); ``flag_of`` overrides :data:`FLAG_OF` for this call
    (e.g. ``max_items_per_user="--counts-max-items-per-user"``)."""
    try:
        yield
    except (ValueError, TypeError) as exc:
        if isinstance(exc, _CLEAN_ERRORS):
            raise
        raise UsageError(in_flags(str(exc), {**FLAG_OF, **flag_of})) from None


# -- argument groups ---------------------------------------------------------------------


def add_input_arguments(parser: argparse.ArgumentParser, formats: Sequence[str]) -> None:
    """--input, --format (one of ``formats``), fields, header lines, tokeniser flags."""
    g = parser.add_argument_group("input")
    g.add_argument(*flags("input"), required=True, metavar="PATTERN",
                   help="input file or glob (local, gs://, …); .gz, .bz2, .zst, .deflate and "
                        ".xz files are decompressed")
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
        g.add_argument(*flags("skip-header-lines"), type=int, default=0, metavar="N",
                       help="pairs/text: lines to skip at the top of each file")
    g.add_argument(*flags("keep-case"), type=boolean, nargs="?", const=True, default=False,
                   metavar="BOOL", help="do not lower-case tokens (--keep-case or "
                                        "--keep-case=true)")
    g.add_argument(*flags("keep-urls"), type=boolean, nargs="?", const=True, default=False,
                   metavar="BOOL", help="do not strip URLs before tokenising")


def int_or_auto(text: str):
    """A --max-items-per-user value: an int, or "auto" (chosen privately,
    beam_dpsu.core.max_items_choice)."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int or 'auto', got {text!r}") from None


def check_calibrates(mechanism, budget) -> None:
    """Calibrates ``mechanism`` under ``budget`` now, so bad parameters fail before anything
    runs; with --max-items-per-user auto, every candidate Δ0 (``max_items_choice.plan_auto``)."""
    if max_items_choice.is_auto(getattr(mechanism, "max_items_per_user", None)):
        max_items_choice.plan_auto(mechanism, budget)
    else:
        mechanism.calibrate(budget)


def add_mechanism_arguments(parser: argparse.ArgumentParser, several: bool = False,
                            public_input: bool = True, auto_default: bool = False) -> None:
    """--mechanism (or --mechanisms, comma-separated, with ``several``) and its parameters;
    ``public_input``: GW-KT's public corpus flags, for jobs that read it."""
    g = parser.add_argument_group("mechanism (see README 'Mechanisms')")
    names = ", ".join(sorted(mechanisms.MECHANISMS))
    if several:
        g.add_argument(*flags("mechanisms"), default="weighted-gaussian", metavar="NAMES",
                       help=f"comma-separated mechanisms from: {names}")
    else:
        g.add_argument(*flags("mechanism"), default="weighted-gaussian", metavar="NAME",
                       help=f"one of: {names}")
    default = ("auto for weighted-gaussian, policy-gaussian and sips, 100 for the others"
               if auto_default else "100")
    g.add_argument(*flags("max-items-per-user"), type=int_or_auto, metavar="N|auto",
                   help="Δ0, the contribution bound: how many distinct items of each user are "
                        f"kept before anything is counted, sampled uniformly (default: {default}) "
                        "or, for gw, the user's most frequent ones (default: 30"
                        + ("; 300 with --public-input)" if public_input else ")")
                        + "; 'auto' spends 5%% of the budget on choosing it privately "
                          "(README 'Choosing Δ0')")
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
    add_overwrite_argument(g)


def add_overwrite_argument(group) -> None:
    """--overwrite: replace an --output folder that holds files (refused otherwise)."""
    group.add_argument(*flags("overwrite"), type=boolean, nargs="?", const=True, default=False,
                       metavar="BOOL",
                       help="replace the --output folder if it holds files: everything in it "
                            "goes (without this flag such a folder is refused); the new folder "
                            "takes its place only once it is complete")


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
    g.add_argument(*flags("counts-max-items-per-user"), type=int_or_auto, metavar="N|auto",
                   help="with --with-counts: Δ0 of the counts, the most released items each "
                        "user is counted on, sampled uniformly (default: "
                        f"{default_max_items}; auto with --max-items-per-user auto); 'auto' "
                        "spends 5%% of the counts' share on choosing it privately")


# -- turning arguments into checked values -----------------------------------------------


def resolve_input(args, formats: Sequence[str], option: str = "input") -> list[str]:
    """Infers ``args.format`` when it was not given and checks the input; returns its files.

    The first records (up to 100) of (up to 32 of) the matched files are
    parsed here, before any pipeline is built, so a wrong format, a corrupt or
    binary file, a missing field or an input with no records fails at once
    (with the file, line and field, never the record's text). Parquet files
    are checked from their footers instead (``inputs.inspect_parquet``).
    """
    items_field = getattr(args, "items_field", None)
    if args.text_field and items_field:
        raise UsageError("--text-field and --items-field exclude each other: give the text "
                         "column (tokenised) or the items column (used as is)")
    files = check_input_exists(getattr(args, option))
    inferred = args.format is None
    if inferred:
        args.format = infer_format(files, formats)
    how = " (inferred from the file name)" if inferred else ""
    if items_field and args.format != "parquet":
        raise UsageError(f"--items-field applies to --format parquet, not {args.format}{how}")
    if args.format in ("csv", "jsonl") and not (args.user_field and args.text_field):
        hint = ("; for headerless lines of user,item give --format pairs"
                if args.format == "csv" and "pairs" in formats else "")
        raise UsageError(f"--format {args.format}{how} needs --user-field and "
                         f"--text-field{hint}")
    if args.format == "parquet" and not (args.user_field and (args.text_field or items_field)):
        raise UsageError(f"--format parquet{how} needs --user-field and --text-field (a text "
                         "column) or --items-field (a list-of-strings column)")
    if args.format not in ("csv", "jsonl", "parquet") and (args.user_field or args.text_field):
        raise UsageError(f"--user-field and --text-field apply to --format csv, jsonl or "
                         f"parquet, not {args.format}")
    skip = getattr(args, "skip_header_lines", 0) or 0
    if skip < 0:
        raise UsageError(f"--skip-header-lines must be >= 0, got {skip}")
    if skip and args.format not in ("pairs", "text"):
        # A csv/jsonl header names the fields; msnbc skips its own header.
        raise UsageError(f"--skip-header-lines applies to --format pairs or text, not "
                         f"{args.format}")
    if args.format == "parquet":
        inspect_parquet(files, ParquetFields(args.user_field, args.text_field or None,
                                             items_field or None))
    else:
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


def budget_parts_from_args(args, budget, mechanism=None,
                           counts_max_items: int | str | None = None
                           ) -> SelectionAndCountsBudget | None:
    """The selection and counts parts of the budget with --with-counts, else None.

    Given the selection ``mechanism`` and the counts' Δ0, a ``Budget`` total is
    split tightly (``composition="tight"``: both parts scaled up while the two
    as calibrated still compose to the total; beam_dpsu.core.composition): the job uses
    exactly that mechanism and Δ0, which the tight split is valid for.
    """
    if not args.with_counts:
        if args.counts_share is not None or args.counts_max_items_per_user is not None:
            raise UsageError("--counts-share and --counts-max-items-per-user need --with-counts")
        return None
    share = DEFAULT_COUNTS_SHARE if args.counts_share is None else args.counts_share
    with flag_errors():
        basic = split_selection_and_counts(budget, share)
    if mechanism is None or counts_max_items is None or not isinstance(budget, Budget) or (
            max_items_choice.is_auto(getattr(mechanism, "max_items_per_user", None))
            or counts_max_items == "auto"):
        # A tight split is computed for one Δ0 of each part; with "auto" there is none yet.
        return basic
    # Bad Δ0 or mechanism parameters fail here, named by their flags, as without
    # the tight split.
    check_counts(basic, counts_max_items)
    with flag_errors():
        mechanism.calibrate(basic.selection)
        return split_selection_and_counts(budget, share, selection_mechanism=mechanism,
                                          counts_max_items_per_user=int(counts_max_items),
                                          composition="tight")


def check_counts(parts: SelectionAndCountsBudget | None, max_items_per_user: int | str) -> None:
    """The counts' calibration, computed now so a bad Δ0 fails before anything runs; with
    --counts-max-items-per-user auto, every candidate's (``max_items_choice.plan_counts_auto``)."""
    if parts is not None:
        with flag_errors(max_items_per_user="--counts-max-items-per-user"):
            if max_items_per_user == "auto":
                max_items_choice.plan_counts_auto(max_items_choice.AutoMaxItems(), parts.counts,
                                           count_calibration)
            else:
                count_calibration(parts.counts, int(max_items_per_user))


def count_line(item_count) -> str:
    """``item<TAB>count``; a tab inside the item is written as ``\\t`` (like line breaks)."""
    return format_count_line(item_count)


def count_released(records, released, parts: SelectionAndCountsBudget,
                   max_items_per_user: int | str, seed, out: str, num_shards: int = 1,
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
    """"element" when the job makes each record its own user (csv or parquet with
    ``--user-field @row``, text: one user per line), else "user_id" (records merged
    per user id).

    Those records' ids (``<file>:<row>``) are distinct by construction, so
    the per-user merge, a shuffle of every record, has nothing to merge.
    """
    if args.format == "text" or (args.format in ("csv", "parquet")
                                 and args.user_field == ROW_AS_USER):
        return "element"
    return "user_id"


def with_counts_report(report: dict, parts: SelectionAndCountsBudget | None,
                       counter: CountReleased | None, selection_calibration=None) -> dict:
    """The selection's report plus, with counts, the budget split and the counts' report.

    With ``selection_calibration`` (and counts at a fixed Δ0) the split also
    states the tight total (ε, δ) of the selection and counts as run
    (``budget_split.composed_guarantee``).
    """
    if parts is None:
        return report
    assert counter is not None, "counts come with a budget split"
    if selection_calibration is not None and counter.calibration is not None:
        parts = parts.composed_with(selection_calibration, counter.calibration)
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
    """The job's budget from --epsilon or --rho and --delta (and --seed checked)."""
    if (args.epsilon is None) == (args.rho is None):
        raise UsageError("give exactly one of --epsilon (for (ε, δ)-DP) or --rho (for zCDP)")
    with flag_errors():
        budget = (Budget(args.epsilon, args.delta) if args.epsilon is not None
                  else ZCDPBudget(args.rho, args.delta))
        hashing.check_seed(getattr(args, "seed", None))
    require_selection_delta(budget.delta)
    return budget


def require_selection_delta(delta: float) -> None:
    """Every job selects items, which is never pure DP: --delta 0 is refused here, in
    flags (the library would name the selection's share of the budget)."""
    if delta <= 0:
        raise UsageError(f"--delta must be > 0, got {delta:g}: selecting items is never pure "
                         "differential privacy (an item held by one user is released with "
                         "probability at most δ)")


def describe_budget(budget, equivalents=None) -> str:
    """``(ε = 1, δ = 1e-05)-DP`` or ``ρ = 0.1 zCDP, δ = 1e-05 (≈ (ε = 1.91, δ = 2e-05)-DP)``.

    ``equivalents``: the report's ``dp_equivalents`` for this budget, if any;
    their ε at δ′ = 2δ is stated (exact for Gaussian mechanisms, smaller than
    the zCDP conversion's), else the zCDP conversion (dp-sips Corollary 9).
    """
    if isinstance(budget, ZCDPBudget):
        text = f"ρ = {budget.rho:g} zCDP, δ = {budget.delta:g}"
        if 2 * budget.delta < 1:
            exact = [e for e in equivalents or ()
                     if math.isclose(e["delta"], 2 * budget.delta, rel_tol=1e-12)]
            epsilon = (exact[0]["epsilon"] if exact
                       else budget.to_dp(2 * budget.delta).epsilon)
            text += f" (≈ (ε = {epsilon:.3g}, δ = {2 * budget.delta:g})-DP)"
        return text
    return f"(ε = {budget.epsilon:g}, δ = {budget.delta:g})-DP"


def tokenizer_from_args(args) -> Tokenizer:
    return Tokenizer(lowercase=not args.keep_case, strip_urls=not args.keep_urls)


def mechanism_from_args(args, name: str | None = None,
                        ignore_unused: bool = False) -> mechanisms.MechanismConfig:
    """The mechanism config named ``name`` (default: --mechanism) with the flags it takes."""
    flag_of = {} if name is None else {"mechanism": "--mechanisms"}  # one of several
    name = (name or args.mechanism).strip()
    fanout = getattr(args, "hot_key_fanout", None)
    if fanout is not None and fanout < 1:
        raise UsageError(f"--hot-key-fanout must be >= 1, got {fanout}")
    if name not in mechanisms.MECHANISMS:
        close = difflib.get_close_matches(name, list(mechanisms.MECHANISMS), n=2, cutoff=0.6)
        try:
            mechanisms.mechanism_from_name(name)
        except ValueError as exc:
            hint = f" (did you mean {' or '.join(close)}?)" if close else ""
            raise UsageError(f"{exc}{hint}") from None
    with flag_errors(**flag_of):
        return mechanisms.mechanism_from_name(
            name, ignore_unused, max_items_per_user=args.max_items_per_user,
            rounds=getattr(args, "rounds", None), ratio=getattr(args, "ratio", None),
            removal=getattr(args, "sips_removal", None), alpha=getattr(args, "alpha", None),
            shards=getattr(args, "shards", None))


def check_num_shards(args) -> None:
    if args.num_shards < 1:
        raise UsageError(f"--num-shards must be >= 1, got {args.num_shards}")


# -- output ------------------------------------------------------------------------------
#
# One folder, one release (DESIGN §4 invariant 9): a job writes into a folder
# that holds nothing (or, with --overwrite, replaces all of it), and the folder
# appears complete or not at all. The run writes into a hidden sibling (same
# parent: one filesystem, so a rename moves it) that is renamed into place
# once everything is written; a failed or interrupted run removes the sibling.

STAGING = ".beam_dpsu-staging-"


def _is_local(path: str) -> bool:
    return "://" not in path


def _sibling(folder: str, kind: str = STAGING) -> str:
    """A hidden, unique name beside ``folder``: ``PARENT/.NAME.beam_dpsu-staging-<hex>``."""
    parent, name = folder.rstrip("/").rsplit("/", 1) if "/" in folder.rstrip("/") \
        else (".", folder.rstrip("/"))
    return f"{parent}/.{name}{kind}{uuid.uuid4().hex[:12]}"


def _refuse_used(folder: str) -> None:
    raise UsageError(f"--output {folder} already holds files (an earlier release?); give "
                     "--overwrite to replace the whole folder, or choose a new or empty one")


def _swap_folders(a: str, b: str) -> bool:
    """Exchanges two folders' names in one step (Linux ``renameat2`` RENAME_EXCHANGE), so
    that ``b`` always holds one of them whole; False where the system cannot."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                          ctypes.c_uint]
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


class _LocalOutput:
    """A local output folder written whole or not at all.

    ``staging`` is a hidden sibling the run writes into; :meth:`commit`
    renames it onto the final path (an empty or missing folder) or, with
    ``--overwrite``, exchanges it with the old folder in one step (two
    renames where the system has no exchange: the final path is then missing
    for an instant, never a mix) and removes the old one afterwards.
    """

    def __init__(self, folder: str, overwrite: bool = False, inputs: Sequence[str] = ()):
        self.folder, self.overwrite = folder, overwrite
        self._path = os.path.realpath(folder)  # a symlinked folder: replaced where it is
        if os.path.exists(self._path) and not os.path.isdir(self._path):
            raise UsageError(f"cannot write output {folder!r}: it is a file, not a folder")
        if os.path.isdir(self._path):
            if os.listdir(self._path) and not overwrite:
                _refuse_used(folder)
            self._check_replaceable(inputs)
        parent = os.path.dirname(self._path)
        self._created = _missing_ancestor(parent)  # removed again if the run fails
        self.staging = _sibling(self._path)
        try:
            os.makedirs(parent, exist_ok=True)
            os.mkdir(self.staging)
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            blocker = _existing_ancestor(parent)
            if blocker and not os.path.isdir(blocker):
                reason = f"{blocker} is a file"
            self._remove_created()
            raise UsageError(f"cannot write output folder {folder!r}: {reason}") from None

    def _check_replaceable(self, inputs: Sequence[str]) -> None:
        inside = self._path.rstrip(os.sep) + os.sep
        if (os.getcwd() + os.sep).startswith(inside):
            raise UsageError(f"--output {self.folder} holds the working folder, which the "
                             "job would replace; choose another --output")
        for f in inputs:
            if f and _is_local(f) and os.path.realpath(f).startswith(inside):
                raise UsageError(f"--output {self.folder} holds the input {f}; --overwrite "
                                 "would remove it: choose another --output")

    def commit(self) -> None:
        for name in os.listdir(self.staging):
            if _LEFTOVER_TEMPORARY.search(name):
                os.remove(os.path.join(self.staging, name))
        try:
            if os.path.isdir(self._path) and os.listdir(self._path):
                if not self.overwrite:  # filled by someone else while the job ran
                    _refuse_used(self.folder)
                if _swap_folders(self.staging, self._path):
                    shutil.rmtree(self.staging, ignore_errors=True)  # now the old folder
                    return
                old = _sibling(self._path, ".beam_dpsu-old-")
                os.rename(self._path, old)
                try:
                    os.rename(self.staging, self._path)
                except OSError:
                    os.rename(old, self._path)  # the old folder back, whole
                    raise
                shutil.rmtree(old, ignore_errors=True)
                return
            os.replace(self.staging, self._path)  # onto a missing or empty folder
        except OSError as exc:
            raise UsageError(f"cannot put output folder {self.folder!r} in place: "
                             f"{exc.strerror or exc}") from None

    def discard(self) -> None:
        shutil.rmtree(self.staging, ignore_errors=True)
        self._remove_created()

    def _remove_created(self) -> None:
        """Removes the parent folders this run created, while they are empty."""
        if not self._created:
            return
        path = os.path.dirname(self._path)
        while True:
            try:
                os.rmdir(path)
            except OSError:
                return
            if path == self._created:
                return
            path = os.path.dirname(path)


class _RemoteOutput:
    """A remote output (gs://, s3://, …) through Beam's FileSystems: NOT atomic.

    Object stores cannot rename a folder in one step. The run writes under a
    hidden sibling prefix; :meth:`commit` then deletes the old files (with
    ``--overwrite``; refused otherwise) and renames the new ones file by file.
    A failed run never touches the output, but while :meth:`commit` runs (and
    if it is cut short) the prefix can hold part of the old or new files.
    """

    def __init__(self, folder: str, overwrite: bool = False, inputs: Sequence[str] = ()):
        self.folder, self.overwrite = folder.rstrip("/"), overwrite
        try:
            FileSystems.get_filesystem(folder)
        except ValueError as exc:
            raise UsageError(f"cannot write output {folder!r}: {exc}") from None
        if self._files(self.folder) and not overwrite:
            _refuse_used(folder)
        inside = [f for f in inputs if f and f.startswith(self.folder + "/")]
        if inside:
            raise UsageError(f"--output {folder} holds the input {inside[0]}; choose another "
                             "--output")
        self.staging = _sibling(self.folder)

    @staticmethod
    def _files(prefix: str) -> list[str]:
        """Every file under ``prefix`` (none when it does not exist)."""
        try:
            return [m.path for m in FileSystems.match([prefix + "/**"])[0].metadata_list]
        except Exception as exc:  # noqa: BLE001 - BeamIOError wraps the store's own error
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            raise UsageError(f"cannot list output {prefix!r}: {first}") from None

    def commit(self) -> None:
        old = self._files(self.folder)
        if old:
            if not self.overwrite:
                _refuse_used(self.folder)
            FileSystems.delete(old)
        new = self._files(self.staging)
        leftovers = [p for p in new if _LEFTOVER_TEMPORARY.search(p[len(self.staging):])]
        if leftovers:
            FileSystems.delete(leftovers)
            new = [p for p in new if p not in leftovers]
        FileSystems.rename(new, [self.folder + p[len(self.staging):] for p in new])
        self.discard()

    def discard(self) -> None:
        with contextlib.suppress(Exception):  # best effort, after a failure already reported
            left = self._files(self.staging)
            if left:
                FileSystems.delete(left)
            if FileSystems.exists(self.staging):
                FileSystems.delete([self.staging])


def prepare_output(folder: str, overwrite: bool = False, inputs: Sequence[str] = ()):
    """The output folder, checked before any pipeline runs; its ``staging`` is where the run
    writes, :meth:`commit` puts it in place, :meth:`discard` removes it after a failure.

    Refused: a folder that holds files, unless ``overwrite`` (then one that
    holds an input file or the working folder); a file; an unwritable place.
    """
    check_names_a_folder(folder)
    if _is_local(folder):
        return _LocalOutput(folder, overwrite, inputs)
    return _RemoteOutput(folder, overwrite, inputs)


def check_names_a_folder(folder: str) -> None:
    """Refuses an --output that names no folder of its own: empty or blank (the files
    would land in the filesystem root or in a folder named by spaces), or the root itself."""
    if not folder.strip():
        raise UsageError(f"--output is empty ({folder!r}): give the folder to write into")
    path = folder.split("://", 1)[1] if not _is_local(folder) else os.path.realpath(folder)
    if not path.strip("/").strip():
        raise UsageError(f"--output {folder} is the root folder, which the job would fill; "
                         "give a folder of its own")


def _missing_ancestor(path: str) -> str | None:
    """The topmost folder of ``path`` (itself included) that does not exist yet."""
    missing = None
    while path and not os.path.exists(path):
        missing = path
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return missing


def _existing_ancestor(path: str) -> str | None:
    path = os.path.abspath(path)
    while path and not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent
    return path


@contextlib.contextmanager
def written_whole(folder: str | None, overwrite: bool = False, inputs: Sequence[str] = ()):
    """Yields where to write ``folder`` (None: the job writes nothing); puts it in place
    when the block ends, removes it if the block raises (an interrupt too). An empty or
    root ``folder`` is refused (:func:`check_names_a_folder`)."""
    if folder is None:
        yield None
        return
    output = None
    try:
        with _INTERRUPTS.held():  # an interrupt waits until the sibling exists
            output = prepare_output(folder, overwrite, inputs)
        yield output.staging
        if _INTERRUPTS.signal is not None:
            raise KeyboardInterrupt  # one came and was swallowed on the way here
        with _INTERRUPTS.held(then_raise=False):  # once started, too late to stop
            output.commit()
    except BaseException:
        if output is not None:
            with _INTERRUPTS.held(then_raise=False):
                output.discard()
        raise


def run_with_output(job, run: Callable[..., str]) -> str:
    """``run(job)`` with ``job.staging`` the place to write ``job.output`` (see
    :func:`written_whole`); ``job.overwrite`` and ``job.inputs`` as in
    :func:`prepare_output`."""
    with written_whole(getattr(job, "output", None), getattr(job, "overwrite", False),
                       getattr(job, "inputs", ())) as staging:
        job.staging = staging
        return run(job)


# A writer's temporary file (``<name>.tmp-<32 hex>…``), renamed when complete; one
# left behind by a worker that died before its rename (its bundle was retried
# and wrote the file again) is not part of the release.
_LEFTOVER_TEMPORARY = re.compile(r"\.tmp-[0-9a-f]{32}")


def staging_of(job) -> str:
    """Where the job writes its output: the staging folder when run through
    :func:`run_with_output`, else ``job.output`` itself."""
    staging = getattr(job, "staging", None)
    return (job.output if staging is None else staging).rstrip("/")


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
    """Counts a PCollection and logs ``message.format(n=count, s=…)``; returns the count.

    ``{s}`` is "s" unless the count is 1 ("released {n:,} item{s}").

    For released sets only (a round's or a level's release), whose size is a
    DP output: logging it says nothing the release does not.
    """

    def __init__(self, message: str):
        super().__init__()
        self._message = message

    def expand(self, pcoll):
        message = self._message

        def log(n):
            logging.getLogger("pipelines").info(message.format(n=n, s="" if n == 1 else "s"))
            return n

        return (pcoll
                | "Count" >> beam.combiners.Count.Globally()
                | "Log" >> beam.Map(log))


def log_written(paths, what: str, staging: str | None = None, output: str | None = None):
    """Logs each file a writer returns as written, named where it will be: under
    ``output`` once the ``staging`` folder it was written into is put in place."""

    def log(path):
        if staging and output and path.startswith(staging.rstrip("/") + "/"):
            path = output.rstrip("/") + path[len(staging.rstrip("/")):]
        logging.getLogger("pipelines").info(f"wrote {path}")

    return paths | f"Log{what.title()}Written" >> beam.Map(log)


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
            return parquet_read_error(exc)
        text = match.group(2)
    return _STEP.sub("", text.strip().splitlines()[0] if text.strip() else text).strip()


import signal  # noqa: E402
import threading  # noqa: E402


class _Interrupts:
    """SIGINT and SIGTERM while a job runs: one line ``interrupted``, exit 128 + signal.

    The first signal is recorded and raised as ``KeyboardInterrupt`` wherever
    the job is (Beam re-raises it from a step as a ``RuntimeError``, which is
    why the signal is recorded rather than recognised by the exception's
    type), and logging stops, so that Beam's ERROR log of the interrupted step
    and its threads' lines do not follow. Later signals are ignored while the
    job cleans up. Once the output is being put in place (:meth:`held`) a
    signal is too late to stop it: the job then completes.
    """

    def __init__(self):
        self.signal: int | None = None
        self._held, self._pending = False, None
        self._previous: dict = {}

    def __enter__(self):
        self.signal, self._held, self._pending = None, False, None
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc_info):
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous = {}
        logging.disable(logging.NOTSET)
        return False

    def _handle(self, signum, _frame):
        if self._held:
            self._pending = self._pending or signum
            return
        if self.signal is None:
            self._interrupt(signum)

    def _interrupt(self, signum):
        self.signal = signum
        logging.disable(logging.CRITICAL)
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def held(self, then_raise: bool = True):
        """A signal inside the block waits until it ends, then interrupts (or, without
        ``then_raise``, is dropped: the block put the output in place or cleaned up)."""
        self._held, self._pending = True, None
        try:
            yield
        finally:
            self._held = False
        if then_raise and self._pending is not None and self.signal is None:
            self._interrupt(self._pending)


_INTERRUPTS = _Interrupts()


def run_job(name: str, argv, prepare: Callable, run: Callable[..., str]) -> int:
    """Runs a job: one ``error: …`` line and exit code 2 for every expected failure; one
    line ``interrupted`` and exit 130 (SIGINT) or 143 (SIGTERM) for an interrupt.

    Args:
      name: the job's name in progress lines.
      argv: the command line (None: ``sys.argv[1:]``).
      prepare: argv → job; parses and checks everything that can be checked
        without data, and exposes ``job.output`` (the output folder, or None),
        ``job.overwrite`` and ``job.inputs`` (see :func:`prepare_output`).
        Bad parameters may raise ``ValueError``/``TypeError`` here.
      run: job → the closing summary line; runs the pipeline(s), writing the
        output into ``job.staging`` (:func:`staging_of`), which is put in
        place as ``job.output`` when it returns (:func:`written_whole`).
    """
    configure_progress(name)
    with _INTERRUPTS as interrupts:
        try:
            try:
                job = prepare(argv)
            except (ValueError, TypeError) as exc:  # includes UsageError, InputFormatError
                print(f"error: {error_message(exc) or exc}", file=sys.stderr)
                return 2
            summary = run_with_output(job, run)
        except BaseException as exc:  # noqa: BLE001 - re-raised unless expected
            if interrupts.signal is not None or isinstance(exc, KeyboardInterrupt):
                print("interrupted", file=sys.stderr, flush=True)
                return 128 + (interrupts.signal or signal.SIGINT)
            message = error_message(exc) if isinstance(exc, Exception) else None
            if message is None:
                raise
            print(f"error: {message}", file=sys.stderr)
            return 2
    if summary:
        print(summary, flush=True)
    return 0
