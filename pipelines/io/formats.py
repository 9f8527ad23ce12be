"""The input formats, what each reads, and the format file names imply (:func:`infer_format`)."""

from __future__ import annotations

import os
from typing import Sequence

from apache_beam.io.filesystem import CompressionTypes

from pipelines.io.errors import InputFormatError

__all__ = ["READING_RULES_VERSION", "FORMATS", "DOCUMENT_FORMATS", "FORMAT_HELP",
           "EXTENSION_FORMATS", "ROW_AS_USER", "uncompressed_name", "infer_format"]

# The version of the rules by which the readers turn a file into user ids, items and
# texts (what is stripped, decoded, refused). It must change with any such rule: a kept
# copy read under other rules (the evaluation job's --cache-dir) would mix the two
# (docs/explanation/reading.md#the-reading-rules).
READING_RULES_VERSION = 3

FORMATS = ("pairs", "csv", "jsonl", "text", "parquet")
DOCUMENT_FORMATS = ("csv", "jsonl", "text", "msnbc", "parquet")

FORMAT_HELP = {
    "pairs": "CSV records user,item (Python's csv dialect: a quoted field may hold commas, "
             "\"\" quotes and line breaks), each item exactly as written, whitespace kept; "
             "no blank line, no header (or --skip-header-lines 1)",
    "csv": "a CSV file with a header, read with --user-field and --text-field",
    "jsonl": "one JSON object per line, read with --user-field and --text-field",
    "text": "one user per line, the line is their text",
    "msnbc": "the UCI MSNBC sequence file, zipped or not",
    "parquet": "Parquet files, read with --user-field and --text-field or --items-field",
}

# File name endings (after any compression suffix) → the format they imply.
EXTENSION_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".txt": "text",
                     ".zip": "msnbc", ".seq": "msnbc", ".parquet": "parquet"}

ROW_AS_USER = "@row"  # the user field that makes each row (record) its own user


def uncompressed_name(path: str) -> str:
    """The file's name, lower-cased, without its compression suffix."""
    name = os.path.basename(path).lower()
    if CompressionTypes.detect_compression_type(name) == CompressionTypes.UNCOMPRESSED:
        return name
    return os.path.splitext(name)[0]  # Beam's compression suffixes are one extension each


def infer_format(files: Sequence[str], formats: Sequence[str]) -> str:
    """The format the file names imply; raises when they imply none of ``formats`` or disagree."""
    found: dict[str, str] = {}
    for path in files:
        ext = os.path.splitext(uncompressed_name(path))[1]
        fmt = EXTENSION_FORMATS.get(ext)
        if fmt is None or fmt not in formats:
            raise InputFormatError(
                f"cannot tell the format of {path} from its name; give --format, one of "
                f"{', '.join(formats)}")
        found.setdefault(fmt, path)
    if len(found) > 1:
        raise InputFormatError(
            "the input files have different formats (" + ", ".join(
                f"{os.path.basename(p)} → {f}" for f, p in found.items())
            + "); give --format")
    return next(iter(found))
