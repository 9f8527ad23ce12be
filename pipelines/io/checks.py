"""What is checked on the launching machine before a pipeline is built: that the
input pattern matches files (:func:`check_input_exists`), and that the first
records of each file parse (:func:`inspect_input`), so that most mistakes fail
at once. (Parquet inputs are checked from their footers instead:
:func:`pipelines.io.parquet.inspect_parquet`.)"""

from __future__ import annotations

import os
from typing import Sequence

from apache_beam.io.filesystems import FileSystems

from pipelines.io.decompression import corruption_first, open_input
from pipelines.io.errors import InputFormatError
from pipelines.io.parsers import record_parser

__all__ = ["INSPECT_RECORDS", "check_input_exists", "inspect_input"]

# Records of each file that inspect_input parses on the launching machine.
INSPECT_RECORDS = 100


def check_input_exists(pattern: str) -> list[str]:
    """The files matching ``pattern``, sorted; raises if there are none."""
    try:
        result = FileSystems.match([pattern])[0]
    except Exception as exc:  # BeamIOError and friends carry the cause
        raise InputFormatError(f"cannot read input {pattern!r}: {exc}") from None
    paths = sorted(m.path for m in result.metadata_list)
    if not paths:
        raise InputFormatError(f"no input file matches {pattern!r}")
    folder = next((p for p in paths if "://" not in p and os.path.isdir(p)), None)
    if folder is not None:
        raise InputFormatError(f"the input {folder} is a directory, not a file: give a glob of "
                               f"its files (e.g. {os.path.join(folder, '*')})")
    return paths


def inspect_input(files: Sequence[str], fmt: str, user_field: str | None = None,
                  text_field: str | None = None, skip_header_lines: int = 0,
                  max_files: int = 32, max_records: int = INSPECT_RECORDS) -> None:
    """Parses the first ``max_records`` records of each of the first ``max_files``
    files; raises with the file and what is wrong when one is corrupt, binary, of
    another format than ``fmt`` (each parser checks its format's shape), lacks a
    field, or when none of them holds a record (then the input is empty or headers
    only). Only the start of each file is read: truncation shows at run time."""
    parse = record_parser(fmt, user_field, text_field, skip_header_lines)
    checked = list(files)[:max_files]
    any_record = False
    for path in checked:
        stream = open_input(path)
        try:
            for n, _ in enumerate(parse(path, stream), start=1):
                any_record = True
                if n >= max_records:
                    break
        except InputFormatError as exc:
            raise corruption_first(stream, exc) from None
        finally:
            stream.close()
    if not any_record and len(checked) == len(files):
        what = (f"{files[0]} is" if len(files) == 1
                else f"all {len(files)} files ({os.path.dirname(files[0])}/…) are")
        # JSON lines have no header (and a blank line is refused): such a file is empty.
        holds = "" if fmt == "jsonl" else " or only a header"
        raise InputFormatError(f"no records in the input: {what} empty{holds}")
