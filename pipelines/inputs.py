"""Reading user data into (user_id, item) pairs, for the jobs.

Formats (``--format``):

* ``pairs``: CSV lines ``user,item``; the item is used as is (no tokenising).
* ``csv``: a CSV file with a header row; ``--user-field`` names the user id
  column (or is ``@row``: each row is one user) and ``--text-field`` the text
  column, which is tokenised.
* ``jsonl``: one JSON object per line, with the same two fields.
* ``text``: one user per line, the whole line is their text; the user id is
  ``<file>:<line number>``.

Files are matched with Beam's filesystems (local, gs://, …) and decompressed
by extension (.gz, .bz2, .zst, …). Each file is parsed whole by one worker,
which keeps line numbers for error messages and lets CSV fields span lines.
A record without a user id or text field fails the pipeline with an
``InputFormatError`` naming the file, line and field; nothing is skipped.
"""

from __future__ import annotations

import csv
import io
import json
import zipfile
from typing import Iterator

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.io.filesystems import FileSystems

from beam_dpsu.text import Tokenizer

__all__ = ["FORMATS", "InputFormatError", "check_input_exists", "parse_pairs", "parse_csv",
           "parse_jsonl", "parse_text", "parse_msnbc", "ReadUserTexts", "ReadPairs",
           "ReadDocuments"]

FORMATS = ("pairs", "csv", "jsonl", "text")
DOCUMENT_FORMATS = ("csv", "jsonl", "text", "msnbc")

ROW_AS_USER = "@row"

csv.field_size_limit(1 << 30)


class InputFormatError(ValueError):
    """A record of an input file that cannot be read as (user, item/text)."""


def check_input_exists(pattern: str) -> list[str]:
    """The files matching ``pattern``; raises if there are none (before any pipeline runs)."""
    try:
        result = FileSystems.match([pattern])[0]
    except Exception as exc:  # BeamIOError and friends carry the cause
        raise InputFormatError(f"cannot read input {pattern!r}: {exc}") from None
    paths = [m.path for m in result.metadata_list]
    if not paths:
        raise InputFormatError(f"no input file matches {pattern!r}")
    return paths


class _RawReader(io.RawIOBase):
    """Adapts Beam's file objects (e.g. ``CompressedFile``, which lacks parts of
    the ``io`` protocol) so ``io.TextIOWrapper`` can stream them."""

    def __init__(self, stream):
        super().__init__()
        self._stream = stream

    def readable(self):
        return True

    def readinto(self, buffer):
        data = self._stream.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)

    def close(self):
        self._stream.close()
        super().close()


def _text(stream) -> io.TextIOWrapper:
    """A UTF-8 text stream over a binary file object, with newlines left intact for csv."""
    return io.TextIOWrapper(io.BufferedReader(_RawReader(stream), 1 << 20),
                            encoding="utf-8", newline="")


def _lines(path: str, stream) -> Iterator[tuple[int, str]]:
    text = _text(stream)
    lineno = 0
    try:
        for lineno, line in enumerate(text, start=1):
            yield lineno, line.rstrip("\r\n")
    except UnicodeDecodeError as exc:
        raise InputFormatError(f"{path}: line {lineno + 1} is not valid UTF-8 ({exc})") from None


def parse_pairs(path: str, stream, skip_header_lines: int = 0) -> Iterator[tuple[str, str]]:
    """``user,item`` CSV lines → (user, item); both fields must be non-empty."""
    for lineno, line in _lines(path, stream):
        if lineno <= skip_header_lines or not line.strip():
            continue
        fields = next(csv.reader([line]))
        if len(fields) != 2:
            raise InputFormatError(
                f"{path}:{lineno}: expected 2 fields 'user,item', got {len(fields)}: {line!r:.200}")
        user, item = fields[0].strip(), fields[1].strip()
        if not user:
            raise InputFormatError(f"{path}:{lineno}: missing user id in {line!r:.200}")
        if not item:
            raise InputFormatError(f"{path}:{lineno}: missing item in {line!r:.200}")
        yield user, item


def parse_csv(path: str, stream, user_field: str, text_field: str) -> Iterator[tuple[str, str]]:
    """A headed CSV file → (user, text) per row.

    ``user_field="@row"`` makes every row its own user (``<file>:<row>``), for
    corpora such as IMDb where each document is one user.
    """
    reader = csv.DictReader(_text(stream))
    row_is_user = user_field == ROW_AS_USER
    try:
        header = reader.fieldnames or []
        for name in ((text_field,) if row_is_user else (user_field, text_field)):
            if name not in header:
                raise InputFormatError(
                    f"{path}: header has no field {name!r} (fields: {header})")
        for row_number, row in enumerate(reader, start=1):
            user = f"{path}:{row_number}" if row_is_user else row.get(user_field)
            value = row.get(text_field)
            if user is None or not user.strip():
                raise InputFormatError(
                    f"{path}:{reader.line_num}: missing user id field {user_field!r}")
            if value is None:
                raise InputFormatError(
                    f"{path}:{reader.line_num}: missing text field {text_field!r}")
            yield user.strip(), value
    except UnicodeDecodeError as exc:
        raise InputFormatError(f"{path}: not valid UTF-8 near line {reader.line_num} ({exc})") from None
    except csv.Error as exc:
        raise InputFormatError(f"{path}:{reader.line_num}: malformed CSV ({exc})") from None


def parse_jsonl(path: str, stream, user_field: str, text_field: str) -> Iterator[tuple[str, str]]:
    """JSON lines → (user, text); the user id may be a string or an integer."""
    for lineno, line in _lines(path, stream):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputFormatError(f"{path}:{lineno}: not valid JSON ({exc})") from None
        if not isinstance(record, dict):
            raise InputFormatError(f"{path}:{lineno}: expected a JSON object, got {line!r:.200}")
        user, value = record.get(user_field), record.get(text_field)
        if isinstance(user, bool) or not isinstance(user, (str, int)) or user == "":
            raise InputFormatError(
                f"{path}:{lineno}: missing or non-scalar user id field {user_field!r}: {user!r:.100}")
        if not isinstance(value, str):
            raise InputFormatError(
                f"{path}:{lineno}: text field {text_field!r} must be a string, got {value!r:.100}")
        yield str(user), value


def parse_text(path: str, stream, skip_header_lines: int = 0) -> Iterator[tuple[str, str]]:
    """One user per line → (``path:line``, line)."""
    for lineno, line in _lines(path, stream):
        if lineno <= skip_header_lines:
            continue
        yield f"{path}:{lineno}", line


def _msnbc_stream(path: str, stream):
    """The .seq member of a zipped MSNBC file, or the stream itself."""
    if not path.lower().endswith(".zip"):
        return stream
    archive = zipfile.ZipFile(io.BytesIO(stream.read()))
    members = [n for n in archive.namelist()
               if not n.endswith("/") and not n.startswith("__MACOSX/")]
    if len(members) != 1:
        raise InputFormatError(f"{path}: expected one sequence file in the zip, got {members}")
    return archive.open(members[0])


def parse_msnbc(path: str, stream) -> Iterator[tuple[str, tuple]]:
    """The UCI MSNBC sequence file (zipped or not) → (``path:line``, page categories).

    The header (lines starting with '%' up to '% Sequences:' and the blank
    lines around it) is skipped; every other line is one user's visit
    sequence, space-separated category numbers.
    """
    in_header, seen_data = True, False
    for lineno, line in _lines(path, _msnbc_stream(path, stream)):
        if in_header:
            if lineno == 1 and not line.startswith("%"):
                in_header = False
            elif line.startswith("% Sequences"):
                in_header = False
                continue
            else:
                continue
        if not line.strip():
            if not seen_data:  # the blank line(s) between header and data
                continue
            raise InputFormatError(f"{path}:{lineno}: empty visit sequence")
        seen_data = True
        yield f"{path}:{lineno}", tuple(line.split())


class _ReadFiles(beam.PTransform):
    """Matches ``pattern`` and applies ``parse(path, binary stream)`` to each file."""

    def __init__(self, pattern: str, parse):
        super().__init__()
        self._pattern = pattern
        self._parse = parse

    def expand(self, pbegin):
        parse = self._parse
        return (pbegin
                | "MatchFiles" >> fileio.MatchFiles(self._pattern)
                | "ReadMatches" >> fileio.ReadMatches()
                | "ParseRecords" >> beam.FlatMap(
                    lambda f: parse(f.metadata.path, f.open())))


class ReadUserTexts(beam.PTransform):
    """Files in a text format (csv, jsonl, text) → (user, text) records."""

    def __init__(self, pattern: str, fmt: str, user_field: str | None = None,
                 text_field: str | None = None, skip_header_lines: int = 0):
        super().__init__()
        if fmt in ("csv", "jsonl"):
            if not user_field or not text_field:
                raise ValueError(f"--format {fmt} needs --user-field and --text-field")
            parser = parse_csv if fmt == "csv" else parse_jsonl
            self._parse = lambda path, stream: parser(path, stream, user_field, text_field)
        elif fmt == "text":
            self._parse = lambda path, stream: parse_text(path, stream, skip_header_lines)
        else:
            raise ValueError(f"format {fmt!r} has no text field; use one of csv, jsonl, text")
        self._pattern = pattern

    def expand(self, pbegin):
        return pbegin | "ReadFiles" >> _ReadFiles(self._pattern, self._parse)


class ReadPairs(beam.PTransform):
    """Files of any format → (user, item) pairs, one per occurrence.

    Text formats are tokenised with ``tokenizer``; ``pairs`` is read as is.
    """

    def __init__(self, pattern: str, fmt: str, user_field: str | None = None,
                 text_field: str | None = None, tokenizer: Tokenizer = Tokenizer(),
                 skip_header_lines: int = 0):
        super().__init__()
        if fmt not in FORMATS:
            raise ValueError(f"unknown format {fmt!r}; choose one of {list(FORMATS)}")
        self._pattern = pattern
        self._fmt = fmt
        self._user_field = user_field
        self._text_field = text_field
        self._tokenizer = tokenizer
        self._skip = skip_header_lines

    def expand(self, pbegin):
        if self._fmt == "pairs":
            skip = self._skip
            return pbegin | "ReadPairFiles" >> _ReadFiles(
                self._pattern, lambda path, stream: parse_pairs(path, stream, skip))
        tokenizer = self._tokenizer
        return (pbegin
                | "ReadUserTexts" >> ReadUserTexts(self._pattern, self._fmt, self._user_field,
                                                   self._text_field, self._skip)
                | "Tokenize" >> beam.FlatMap(
                    lambda record: ((record[0], token) for token in tokenizer(record[1]))))



class ReadDocuments(beam.PTransform):
    """Files → (user, tokens) documents, for n-gram extraction.

    csv/jsonl/text are tokenised with ``tokenizer``; ``msnbc`` is the UCI
    sequence file, one user per line (its header skipped).
    """

    def __init__(self, pattern: str, fmt: str, user_field: str | None = None,
                 text_field: str | None = None, tokenizer: Tokenizer = Tokenizer(),
                 skip_header_lines: int = 0):
        super().__init__()
        if fmt not in DOCUMENT_FORMATS:
            raise ValueError(f"unknown document format {fmt!r}; choose one of "
                             f"{list(DOCUMENT_FORMATS)}")
        self._pattern, self._fmt = pattern, fmt
        self._user_field, self._text_field = user_field, text_field
        self._tokenizer, self._skip = tokenizer, skip_header_lines

    def expand(self, pbegin):
        if self._fmt == "msnbc":
            return pbegin | "ReadMsnbc" >> _ReadFiles(self._pattern, parse_msnbc)
        tokenizer = self._tokenizer
        return (pbegin
                | "ReadUserTexts" >> ReadUserTexts(self._pattern, self._fmt, self._user_field,
                                                   self._text_field, self._skip)
                | "Tokenize" >> beam.Map(lambda record: (record[0], tuple(tokenizer(record[1])))))
