"""The job's settings from its flags: budget, mechanism, counts, input, privacy unit, summary.

Each ``*_from_args`` turns parsed flags into the library's values and checks
them now, before any input is read, so a bad parameter is one error line
naming its flag; :func:`resolve_input` checks the input files' first records
too. Details: docs/explanation/jobs.md#settings-from-flags, #checking-the-input
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
from typing import Sequence

from beam_dpsu.beam.output import WriteReleased, WriteReleasedCounts
from beam_dpsu.core import checks, max_items_choice, mechanisms, thresholds
from beam_dpsu.core.max_items_choice import counts as counts_choice
from beam_dpsu.core.budgets import Budget, ZCDPBudget
from beam_dpsu.core.calibration import gaussian_dp_equivalents
from beam_dpsu.core.checks import ParameterError
from beam_dpsu.core.pre_threshold import check_pre_threshold
from beam_dpsu.core.pre_threshold.calibrations import with_pre_threshold
from beam_dpsu.core.report import dp_equivalents
from beam_dpsu.core.tokenizer import Tokenizer
from beam_dpsu.core.counts_budget import (DEFAULT_COUNTS_SHARE, SelectionAndCountsBudget,
                                          count_calibration, split_selection_and_counts)
from beam_dpsu.count_released import CountReleased
from pipelines.errors import FlagMessage, UsageError, flag_errors
from pipelines.io.checks import check_input_exists, inspect_input
from pipelines.io.errors import InputFormatError
from pipelines.io.formats import ROW_AS_USER, infer_format
from pipelines.io.parquet import ParquetFields, inspect_parquet
from pipelines.progress import NOTHING_RELEASED, log_written

__all__ = ["budget_from_args", "require_selection_delta", "describe_budget", "mechanism_from_args",
           "check_calibrates", "calibrate", "budget_parts_from_args",
           "check_counts", "write_released", "with_counts_report", "privacy_unit_from_args",
           "check_num_shards", "output_suffix", "MAX_NUM_SHARDS", "summary_line", "resolve_input",
           "check_public_input", "read_input", "tokenizer_from_args"]

MAX_NUM_SHARDS = 10_000  # the most --num-shards files a job writes


def budget_from_args(args) -> Budget | ZCDPBudget:
    """The job's budget from --epsilon or --rho and --delta (and --seed checked)."""
    if (args.epsilon is None) == (args.rho is None):
        raise UsageError("give exactly one of --epsilon (for (ε, δ)-DP) or --rho (for zCDP)")
    # A job refuses 0 too (require_selection_delta), so it states 0 < delta < 1.
    if isinstance(args.delta, float) and not 0.0 <= args.delta < 1.0:  # nan included
        raise UsageError(f"--delta must satisfy 0 < delta < 1, got {args.delta!r}")
    with flag_errors():
        budget = (Budget(args.epsilon, args.delta) if args.epsilon is not None
                  else ZCDPBudget(args.rho, args.delta))
        checks.seed(getattr(args, "seed", None))
    require_selection_delta(budget.delta)
    return budget


def require_selection_delta(delta: float) -> None:
    """--delta 0 is refused in flags: selecting items is never pure DP."""
    if delta <= 0:
        raise UsageError(f"--delta must be > 0, got {delta:g}: selecting items is never pure "
                         "differential privacy (an item held by one user is released with "
                         "probability at most δ)")


def describe_budget(budget, equivalents=None) -> str:
    """``(ε = 1, δ = 1e-05)-DP`` or ``ρ = 0.1 zCDP, δ = 1e-05 (by …: ≈ (ε = 1.91, δ = 2e-05)-DP)``.

    The ε at δ′ = 2δ is that of ``equivalents`` (the report's ``dp_equivalents``)
    if given, else the zCDP conversion's (dp-sips Corollary 9).
    """
    if isinstance(budget, ZCDPBudget):
        text = f"ρ = {budget.rho:g} zCDP, δ = {budget.delta:g}"
        if 2 * budget.delta < 1:
            converted = budget.to_dp(2 * budget.delta).epsilon
            # A report that states only the conversion (e.g. under auto) is labelled so.
            exact = next((e["epsilon"] for e in equivalents or ()
                          if math.isclose(e["delta"], 2 * budget.delta, rel_tol=1e-12)
                          and not math.isclose(e["epsilon"], converted, rel_tol=1e-12)), None)
            epsilon, source = ((converted, "by the zCDP conversion") if exact is None
                               else (exact, "by the mechanism's privacy curve"))
            text += f" ({source}: ≈ (ε = {epsilon:.3g}, δ = {2 * budget.delta:g})-DP)"
        return text
    return f"(ε = {budget.epsilon:g}, δ = {budget.delta:g})-DP"


def mechanism_from_args(args, name: str | None = None,
                        ignore_unused: bool = False) -> mechanisms.MechanismConfig:
    """The mechanism config named ``name`` (default: --mechanism) with the flags it takes.

    A flag it does not take is an error naming both, unless ``ignore_unused``.
    """
    flag_of = {} if name is None else {"mechanism": "--mechanisms"}  # one of several
    name = checks.canonical_name(name or args.mechanism)  # as the library reads it
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
    params = {"max_items_per_user": args.max_items_per_user,
              "rounds": getattr(args, "rounds", None), "ratio": getattr(args, "ratio", None),
              "removal": getattr(args, "sips_removal", None),
              "alpha": getattr(args, "alpha", None), "shards": getattr(args, "shards", None)}
    taken = {field.name for field in dataclasses.fields(mechanisms.MECHANISMS[name])}
    unused = sorted(p for p, value in params.items() if value is not None and p not in taken)
    with flag_errors(**flag_of):
        if unused and not ignore_unused:
            raise FlagMessage(f"{{mechanism}} {name} does not take "
                              + ", ".join(f"{{{p}}}" for p in unused))
        return mechanisms.mechanism_from_name(name, ignore_unused, **params)


def check_calibrates(mechanism, budget, pre_threshold: int = 1) -> None:
    """Calibrates ``mechanism`` under ``budget`` now (under auto: every candidate Δ0)."""
    check_pre_threshold(pre_threshold)
    try:
        if max_items_choice.is_auto(getattr(mechanism, "max_items_per_user", None)):
            max_items_choice.plan_auto(mechanism, budget, pre_threshold)
        else:
            calibration = with_pre_threshold(calibrate(mechanism, budget), mechanism, pre_threshold)
            mu = getattr(calibration, "gaussian_mu", None)
            if mu is not None:
                # The report states these: computed now, they fail now if they can't.
                gaussian_dp_equivalents(mu, calibration.threshold_delta, calibration.budget.delta)
    except (RuntimeError, OverflowError):
        # Root finding in float64 fails to converge near its range's end (ε ≈ 1e308).
        flag = "{epsilon}" if isinstance(budget, Budget) else "{rho}"
        raise FlagMessage(f"{flag} is too large: the noise cannot be calibrated to it in "
                          f"floating point; give a smaller {flag}") from None


def calibrate(mechanism, budget):
    """``mechanism.calibrate(budget)``, truncated-geometric's two refusals worded in flags."""
    if not isinstance(mechanism, mechanisms.TruncatedGeometric):
        return mechanism.calibrate(budget)
    if not isinstance(budget, Budget):
        raise FlagMessage("{mechanism} truncated-geometric is (ε, δ)-DP only (Desfontaines et "
                          "al. 2022) and has no zCDP calibration: give it {epsilon} and {delta}")
    try:
        return mechanism.calibrate(budget)
    except ParameterError as exc:
        if exc.param != "delta":
            raise
        d0 = mechanism.max_items_per_user
        margin = thresholds.truncated_geometric_float_margin(budget.epsilon / d0, budget.delta / d0)
        raise FlagMessage(
            f"truncated-geometric: delta per item = delta/{{max_items_per_user}} "
            f"{budget.delta / d0:g} is too small for float64 keep probabilities at epsilon per "
            f"item = {budget.epsilon / d0:g} (it must be at least twice their float error "
            f"margin, {margin:.3g}); raise {{delta}}, lower {{epsilon}} or lower "
            "{max_items_per_user}") from None


def budget_parts_from_args(args, budget, mechanism=None,
                           counts_max_items: int | str | None = None
                           ) -> SelectionAndCountsBudget | None:
    """The selection and counts parts of the budget with --with-counts, else None.

    Split tightly given ``mechanism`` and ``counts_max_items`` (a ``Budget`` total).
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
        return basic  # a tight split is for one Δ0 of each part: under auto none yet
    # Bad Δ0 or mechanism parameters fail here, named by their flags.
    check_counts(basic, counts_max_items)
    with flag_errors():
        calibrate(mechanism, basic.selection)
        return split_selection_and_counts(budget, share, selection_mechanism=mechanism,
                                          counts_max_items_per_user=int(counts_max_items),
                                          composition="tight")


def check_counts(parts: SelectionAndCountsBudget | None, max_items_per_user: int | str) -> None:
    """The counts' calibration, computed now (under auto: every candidate Δ0's)."""
    if parts is not None:
        with flag_errors(max_items_per_user="--counts-max-items-per-user"):
            if max_items_per_user == "auto":
                counts_choice.plan_counts_auto(max_items_choice.AutoMaxItems(), parts.counts,
                                               count_calibration)
            else:
                count_calibration(parts.counts, int(max_items_per_user))


def write_released(released, args, out: str, what: str, records=None,
                   counts_max_items: int | str = 0, privacy_unit: str = "user_id"):
    """Writes the released set to OUT/WHAT-*.txt (or .parquet) and, given ``records`` (with
    --with-counts), their noisy counts to OUT/counts-*, sharded alike; returns the counter."""
    ngrams = what == "ngrams"
    written = released | f"Write{what.title()}" >> WriteReleased(
        f"{out}/{what}", file_name_suffix=output_suffix(args), num_shards=args.num_shards,
        format=args.output_format, ngrams=ngrams)
    log_written(written, what, staging=out, output=args.output)
    if records is None:
        return None
    counter = CountReleased(released, args.budget_parts.counts, max_items_per_user=counts_max_items,
                            seed=args.seed, ngrams=ngrams, privacy_unit=privacy_unit)
    _ = (records
         | "CountReleased" >> counter
         | "WriteCounts" >> WriteReleasedCounts(f"{out}/counts", num_shards=args.num_shards,
                                                format=args.output_format, ngrams=ngrams))
    return counter


def privacy_unit_from_args(args) -> str:
    """"element" when each record is its own user (``@row``, text, msnbc), else "user_id"."""
    if args.format in ("text", "msnbc") or (args.format in ("csv", "parquet")
                                            and args.user_field == ROW_AS_USER):
        return "element"
    return "user_id"


def with_counts_report(report: dict, parts: SelectionAndCountsBudget | None,
                       counter: CountReleased | None, selection_calibration=None) -> dict:
    """The selection's report plus, with counts, the budget split and the counts' report.

    With ``selection_calibration`` (and a fixed Δ0) the split states the tight total too.
    """
    if parts is None:
        return report
    assert counter is not None, "counts come with a budget split"
    if selection_calibration is not None and counter.calibration is not None:
        parts = parts.composed_with(selection_calibration, counter.calibration)
    report = dict(report)
    # The selection's (ε, δ) equivalents describe its share only.
    if "dp_equivalents" in report:
        report["selection_dp_equivalents"] = report.pop("dp_equivalents")
    report.update({"total_budget": parts.total.to_dict(), "budget_split": parts.to_dict(),
                   "counts": counter.report})
    if isinstance(parts.total, ZCDPBudget):
        report["dp_equivalents"] = dp_equivalents(parts.total)
    return report


def check_num_shards(args) -> None:
    if args.num_shards < 1:
        raise UsageError(f"--num-shards must be >= 1, got {args.num_shards}")
    if args.num_shards > MAX_NUM_SHARDS:
        # Each shard is a file, written even when empty: more is far more than needed.
        raise UsageError(f"--num-shards must be <= {MAX_NUM_SHARDS:,}, got {args.num_shards:,}")


def output_suffix(args, counts: bool = False) -> str:
    """The suffix of the job's item (or ``counts``) files: .txt, .tsv or .parquet."""
    return ".parquet" if args.output_format == "parquet" else ".tsv" if counts else ".txt"


def summary_line(args, files: str, released: str, n_released: int, budget, report: dict,
                 counts_note: str = "") -> str:
    """``released {released} under {budget}; wrote`` the job's ``files`` (``items``), its
    counts (``counts_note`` said of them) and report; ``budget`` is the total."""
    out = args.output.rstrip("/")
    shards = f"{'00000' if args.num_shards == 1 else '*'}-of-{args.num_shards:05d}"
    counts = (f", their noisy counts{counts_note} to {out}/counts-{shards}"
              f"{output_suffix(args, counts=True)}" if args.with_counts else "")
    # The report's equivalents are this budget's only without counts.
    equivalents = None if args.with_counts else report.get("dp_equivalents")
    return (f"released {released} under {describe_budget(budget, equivalents)}"
            + (" (SEEDED: not private)" if args.seed is not None else "")
            + f"; wrote {out}/{files}-{shards}{output_suffix(args)}{counts} and {out}/report.json"
            + (NOTHING_RELEASED if n_released == 0 else ""))


def resolve_input(args, formats: Sequence[str], option: str = "input") -> list[str]:
    """Infers ``args.format`` when it was not given and checks the input; returns its files
    (the first 100 records of up to 32 files parsed, Parquet files' footers read)."""
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
    if args.user_field == ROW_AS_USER and args.format not in ("csv", "parquet"):
        raise UsageError(f"--user-field {ROW_AS_USER} (each row its own user) applies to "
                         f"--format csv or parquet, not {args.format}{how}"
                         + ("; a JSON lines file needs a field holding the user id"
                            if args.format == "jsonl" else ""))
    if args.format in ("csv", "jsonl") and not (args.user_field and args.text_field):
        hint = ("; for headerless lines of user,item give --format pairs"
                if args.format == "csv" and "pairs" in formats else "")
        raise UsageError(f"--format {args.format}{how} needs --user-field and --text-field{hint}")
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
    try:
        inspect_input(files, args.public_format,
                      ROW_AS_USER if args.public_format == "csv" else None,
                      args.public_text_field or None, 0)
    except InputFormatError as exc:
        raise InputFormatError(_public_hint(str(exc))) from None


_FORMAT_HINT = re.compile(r"give --format (\w+)[^;]*$")  # pipelines.io.parsers' hint


def _public_hint(message: str) -> str:
    """An input error's hint to give another ``--format``, worded for --public-input."""
    hint = _FORMAT_HINT.search(message)
    if hint is None:
        return message
    if (fmt := hint.group(1)) == "csv":
        said = ("give --public-format csv --public-text-field T for a headed CSV "
                "(--public-format takes text or csv)")
    else:
        said = (f"--public-input is read with --public-format text or csv, not {fmt}: "
                "convert it to one of those")
    return message[:hint.start()] + said


def tokenizer_from_args(args) -> Tokenizer:
    return Tokenizer(lowercase=not args.keep_case, strip_urls=not args.keep_urls)


def read_input(transform, args, **kwargs):
    """The reader ``transform`` (``ReadUserItems``, ``ReadPairs``, ``ReadDocuments``) of the
    input flags, as :func:`resolve_input` checked them; ``kwargs`` go to it too."""
    return transform(args.input, args.format, args.user_field, args.text_field,
                     tokenizer_from_args(args), args.skip_header_lines,
                     files=getattr(args, "files", None),
                     items_field=getattr(args, "items_field", None), **kwargs)
