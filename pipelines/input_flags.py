"""The input flags resolved: ``--format`` inferred from the file names, the files checked
before any pipeline is built. Details: docs/explanation/jobs.md#checking-the-input
"""

from __future__ import annotations

import re
from typing import Sequence

from beam_dpsu.core.tokenizer import Tokenizer
from pipelines.errors import UsageError
from pipelines.io.errors import InputFormatError
from pipelines.io.checks import check_input_exists, inspect_input
from pipelines.io.formats import ROW_AS_USER, infer_format
from pipelines.io.parquet import ParquetFields, inspect_parquet

__all__ = ["resolve_input", "check_public_input", "read_input", "tokenizer_from_args"]


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
