"""Reading user data into (user_id, items) records, (user_id, item) pairs or (user_id,
tokens) documents, for the jobs.

A row or document of text formats is read as one per-user record (its
tokens), the compact form ``SelectItems`` takes (``ReadUserItems``), and
never exploded into one element per token; ``ReadPairs`` does that, for
consumers that need pairs.

Formats (``--format``; inferred from the file names when not given, see
:func:`infer_format`):

* ``pairs``: CSV lines ``user,item``; the item is used as is (no tokenising).
  Never inferred: a ``.csv`` file is read as ``csv``.
* ``csv``: a CSV file with a header row; ``--user-field`` names the user id
  column (or is ``@row``: each row is one user) and ``--text-field`` the text
  column, which is tokenised.
* ``jsonl``: one JSON object per line, with the same two fields.
* ``text``: one user per line, the whole line is their text; the user id is
  ``<file>:<line number>``.
* ``msnbc`` (n-grams only): the UCI MSNBC sequence file, zipped or not.

Files are matched with Beam's filesystems (local, gs://, …) and decompressed
by extension (.gz, .bz2, .zst, .deflate, .xz/.lzma). Each file is parsed whole
by one worker, which keeps line numbers for error messages and lets CSV fields
span lines.

A record that cannot be read fails the pipeline with an ``InputFormatError``
naming the file, the line (and record) number and the field, and saying what
is wrong; it never quotes the record, a user id or text (runner logs keep
error messages). Nothing is skipped silently. :func:`inspect_input` parses the
first record of each file on the launching machine, before a pipeline is
built, so that most mistakes fail at once.
"""

from __future__ import annotations

import csv
import functools
import io
import json
import logging
import os
import zipfile
from typing import Callable, Iterator, Sequence

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from beam_dpsu.text import Tokenizer, a_type, plural

__all__ = ["FORMATS", "DOCUMENT_FORMATS", "FORMAT_HELP", "InputFormatError",
           "check_input_exists", "infer_format", "inspect_input", "record_parser",
           "parse_pairs", "parse_csv", "parse_jsonl", "parse_text", "parse_msnbc",
           "ReadUserTexts", "ReadPairs", "ReadUserItems", "ReadDocuments", "items_of"]

FORMATS = ("pairs", "csv", "jsonl", "text")
DOCUMENT_FORMATS = ("csv", "jsonl", "text", "msnbc")

FORMAT_HELP = {
    "pairs": "CSV lines user,item, items used as is",
    "csv": "a CSV file with a header, read with --user-field and --text-field",
    "jsonl": "one JSON object per line, read with --user-field and --text-field",
    "text": "one user per line, the line is their text",
    "msnbc": "the UCI MSNBC sequence file, zipped or not",
}

# File name endings (after any compression suffix) → the format they imply.
EXTENSION_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".txt": "text",
                     ".zip": "msnbc", ".seq": "msnbc"}
COMPRESSION_SUFFIXES = (".gz", ".bz2", ".zst", ".zstd", ".deflate", ".xz", ".lzma")

ROW_AS_USER = "@row"

# A pairs file whose first line is two of these (case-insensitively) has a header.
_USER_HEADERS = {"user", "users", "user_id", "userid", "user id", "uid", "id", "author",
                 "person", "client", "customer", "member", "account", "privacy_id"}
_ITEM_HEADERS = {"item", "items", "word", "words", "token", "tokens", "term", "key", "text",
                 "review", "body", "content", "value", "name", "partition", "category",
                 "query", "url", "page", "document", "sequence"}

csv.field_size_limit(1 << 30)

_LOG = logging.getLogger("pipelines")


class InputFormatError(ValueError):
    """A record of an input file that cannot be read as (user, item/text)."""


def check_input_exists(pattern: str) -> list[str]:
    """The files matching ``pattern``, sorted; raises if there are none."""
    try:
        result = FileSystems.match([pattern])[0]
    except Exception as exc:  # BeamIOError and friends carry the cause
        raise InputFormatError(f"cannot read input {pattern!r}: {exc}") from None
    paths = sorted(m.path for m in result.metadata_list)
    if not paths:
        raise InputFormatError(f"no input file matches {pattern!r}")
    return paths


def _uncompressed_name(path: str) -> str:
    name = os.path.basename(path).lower()
    for suffix in COMPRESSION_SUFFIXES:
        if name.endswith(suffix):
            return name[:-len(suffix)]
    return name


def infer_format(files: Sequence[str], formats: Sequence[str]) -> str:
    """The format the file names imply (``.csv`` → csv, ``.jsonl`` → jsonl, ``.txt`` →
    text, ``.zip``/``.seq`` → msnbc, compressed or not); raises when they imply none
    of ``formats`` or disagree."""
    found = {}
    for path in files:
        ext = os.path.splitext(_uncompressed_name(path))[1]
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


class _RawReader(io.RawIOBase):
    """Adapts Beam's file objects (e.g. ``CompressedFile``, which lacks parts of the
    ``io`` protocol) so ``io.TextIOWrapper`` can stream them; a read or decompression
    failure becomes an ``InputFormatError`` naming the file."""

    def __init__(self, path: str, stream):
        super().__init__()
        self._path = path
        self._stream = stream

    def readable(self):
        return True

    def readinto(self, buffer):
        try:
            data = self._stream.read(len(buffer))
        except InputFormatError:
            raise
        except Exception as exc:  # zlib.error, OSError, EOFError, ZstdError, LZMAError, …
            compression = CompressionTypes.detect_compression_type(self._path)
            what = ("cannot be decompressed as " + compression
                    if compression != CompressionTypes.UNCOMPRESSED else "cannot be read")
            kind = f"{type(exc).__module__}.{type(exc).__name__}".replace("builtins.", "")
            raise InputFormatError(
                f"{self._path}: {what} ({kind}); is it corrupt or misnamed?") from None
        buffer[:len(data)] = data
        return len(data)

    def close(self):
        self._stream.close()
        super().close()


def _text(path: str, stream) -> io.TextIOWrapper:
    """A UTF-8 text stream over a binary file object, with newlines left intact for csv."""
    return io.TextIOWrapper(io.BufferedReader(_RawReader(path, stream), 1 << 20),
                            encoding="utf-8", newline="")


def _not_utf8(path: str, where: str) -> InputFormatError:
    return InputFormatError(f"{path}: {where} is not UTF-8 text (a binary file, or another "
                            "encoding?)")


def _lines(path: str, stream) -> Iterator[tuple[int, str]]:
    text = _text(path, stream)
    lineno = 0
    try:
        for lineno, line in enumerate(text, start=1):
            if "\x00" in line:
                raise InputFormatError(f"{path}: line {lineno} holds a NUL byte (a binary "
                                       "file?)")
            yield lineno, line.rstrip("\r\n")
    except UnicodeDecodeError:
        raise _not_utf8(path, f"line {lineno + 1}") from None


def _looks_like_header(fields: Sequence[str]) -> bool:
    return (len(fields) == 2 and fields[0].strip().lower() in _USER_HEADERS
            and fields[1].strip().lower() in _ITEM_HEADERS)


def parse_pairs(path: str, stream, skip_header_lines: int = 0) -> Iterator[tuple[str, str]]:
    """``user,item`` CSV lines → (user, item); both fields must be non-empty.

    A first line such as ``user,item`` (two usual column names) is refused
    unless ``skip_header_lines`` skips it: read as data it would be a user
    holding one item.
    """
    for lineno, line in _lines(path, stream):
        if lineno <= skip_header_lines or not line.strip():
            continue
        try:
            fields = next(csv.reader([line]))
        except csv.Error as exc:
            raise InputFormatError(f"{path}:{lineno}: malformed CSV ({exc})") from None
        if lineno == 1 and _looks_like_header(fields):
            raise InputFormatError(
                f"{path}:1 looks like a header row, not a user,item pair; give "
                "--skip-header-lines 1, or --format csv --user-field F --text-field T for a "
                "headed CSV of texts")
        if len(fields) != 2:
            raise InputFormatError(
                f"{path}:{lineno}: expected 2 fields user,item, got {len(fields)}")
        user, item = fields[0].strip(), fields[1].strip()
        if not user:
            raise InputFormatError(f"{path}:{lineno}: field 1 (user id) is empty")
        if not item:
            raise InputFormatError(f"{path}:{lineno}: field 2 (item) is empty")
        yield user, item


def parse_csv(path: str, stream, user_field: str, text_field: str) -> Iterator[tuple[str, str]]:
    """A headed CSV file → (user, text) per row.

    ``user_field="@row"`` makes every row its own user (``<file>:<row>``), for
    corpora such as IMDb where each document is one user.
    """
    reader = csv.DictReader(_text(path, stream))
    row_is_user = user_field == ROW_AS_USER
    row_number = 0
    try:
        header = reader.fieldnames or []
        if not header:
            return  # an empty file: no header, no records
        for name in ((text_field,) if row_is_user else (user_field, text_field)):
            if name not in header:
                # The header is not quoted: on a headerless file it is a record.
                raise InputFormatError(
                    f"{path}: the header (line 1, {len(header)} fields) has no field "
                    f"{name!r}; is the file headed, and is the field name right?")
        for row_number, row in enumerate(reader, start=1):
            where = f"{path}:{reader.line_num}: record {row_number}"
            user = f"{path}:{row_number}" if row_is_user else row.get(user_field)
            value = row.get(text_field)
            if user is None or not user.strip():
                raise InputFormatError(f"{where}: user id field {user_field!r} is missing "
                                       "or empty")
            if value is None:
                raise InputFormatError(f"{where}: text field {text_field!r} is missing "
                                       f"(the row has fewer fields than the header)")
            yield user.strip(), value
    except UnicodeDecodeError:
        raise _not_utf8(path, f"record {row_number + 1} (near line {reader.line_num + 1})") \
            from None
    except csv.Error as exc:
        raise InputFormatError(f"{path}:{reader.line_num}: record {row_number + 1}: "
                               f"malformed CSV ({exc})") from None


def parse_jsonl(path: str, stream, user_field: str, text_field: str) -> Iterator[tuple[str, str]]:
    """JSON lines → (user, text); the user id may be a string or an integer."""
    for lineno, line in _lines(path, stream):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputFormatError(f"{path}:{lineno}: not valid JSON ({exc.msg} at column "
                                   f"{exc.colno})") from None
        if not isinstance(record, dict):
            raise InputFormatError(
                f"{path}:{lineno}: expected a JSON object, got a JSON {type(record).__name__}")
        user, value = record.get(user_field), record.get(text_field)
        if user is None or user == "":
            raise InputFormatError(f"{path}:{lineno}: user id field {user_field!r} is missing "
                                   "or empty")
        if isinstance(user, bool) or not isinstance(user, (str, int)):
            raise InputFormatError(f"{path}:{lineno}: user id field {user_field!r} must be a "
                                   f"string or an integer, got {a_type(user)}")
        if value is None:
            raise InputFormatError(f"{path}:{lineno}: text field {text_field!r} is missing")
        if not isinstance(value, str):
            raise InputFormatError(f"{path}:{lineno}: text field {text_field!r} must be a "
                                   f"string, got {a_type(value)}")
        yield str(user), value


def parse_text(path: str, stream, skip_header_lines: int = 0) -> Iterator[tuple[str, str]]:
    """One user per line → (``path:line``, line)."""
    for lineno, line in _lines(path, stream):
        if lineno <= skip_header_lines:
            continue
        yield f"{path}:{lineno}", line


def _msnbc_stream(path: str, stream):
    """The .seq member of a zipped MSNBC file, or the stream itself."""
    if not _uncompressed_name(path).endswith(".zip"):
        return stream
    try:
        archive = zipfile.ZipFile(io.BytesIO(stream.read()))
    except zipfile.BadZipFile:
        raise InputFormatError(f"{path}: not a valid zip file") from None
    members = [n for n in archive.namelist()
               if not n.endswith("/") and not n.startswith("__MACOSX/")]
    if len(members) != 1:
        raise InputFormatError(f"{path}: expected one sequence file in the zip, got "
                               f"{len(members)}")
    return archive.open(members[0])


def parse_msnbc(path: str, stream, ids: bool = True) -> Iterator[tuple[str, tuple] | list]:
    """The UCI MSNBC sequence file (zipped or not) → (``path:line``, page categories).

    The header (lines starting with '%' up to '% Sequences:' and the blank
    lines around it) is skipped; every other line is one user's visit
    sequence, space-separated category numbers. Without ``ids`` each line is
    just its list of categories (one person's only element).
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
        yield (f"{path}:{lineno}", tuple(line.split())) if ids else line.split()


def record_parser(fmt: str, user_field: str | None = None, text_field: str | None = None,
                  skip_header_lines: int = 0) -> Callable[[str, object], Iterator[tuple]]:
    """(path, binary stream) → records, for ``fmt``."""
    if fmt in ("csv", "jsonl"):
        if not user_field or not text_field:
            raise ValueError(f"--format {fmt} needs --user-field and --text-field")
        parse = parse_csv if fmt == "csv" else parse_jsonl
        return lambda path, stream: parse(path, stream, user_field, text_field)
    if fmt == "text":
        return lambda path, stream: parse_text(path, stream, skip_header_lines)
    if fmt == "pairs":
        return lambda path, stream: parse_pairs(path, stream, skip_header_lines)
    if fmt == "msnbc":
        return parse_msnbc
    raise ValueError(f"unknown format {fmt!r}; choose one of "
                     f"{sorted(set(FORMATS) | set(DOCUMENT_FORMATS))}")


def inspect_input(files: Sequence[str], fmt: str, user_field: str | None = None,
                  text_field: str | None = None, skip_header_lines: int = 0,
                  max_files: int = 32) -> None:
    """Parses the first record of each of the first ``max_files`` files; raises with the
    file and what is wrong when one is corrupt, binary, lacks a field, or when none of
    them holds a record (then the input is empty or headers only)."""
    parse = record_parser(fmt, user_field, text_field, skip_header_lines)
    checked = list(files)[:max_files]
    any_record = False
    for path in checked:
        stream = FileSystems.open(path)
        try:
            for _ in parse(path, stream):
                any_record = True
                break
        finally:
            stream.close()
    if not any_record and len(checked) == len(files):
        what = (f"{files[0]} is" if len(files) == 1
                else f"all {len(files)} files ({os.path.dirname(files[0])}/…) are")
        raise InputFormatError(f"no records in the input: {what} empty or only a header")


class _ParseFileFn(beam.DoFn):
    """Parses one matched file into records, logging which file it reads.

    With ``log_records`` it also logs how many records the file held: a raw
    count, so only when the job was asked for non-private statistics.
    """

    def __init__(self, parse, files: Sequence[str] | None, log_records: bool):
        self._parse = parse
        self._index = {p: i for i, p in enumerate(files or (), start=1)}
        self._total = len(files or ())
        self._log_records = log_records

    def process(self, readable_file):
        path = readable_file.metadata.path
        i = self._index.get(path)
        _LOG.info(f"reading {path}" + (f" (file {i} of {self._total})" if i else ""))
        stream = readable_file.open()
        n = 0
        try:
            for n, record in enumerate(self._parse(path, stream), start=1):
                yield record
        finally:
            stream.close()
        if self._log_records:
            _LOG.info(f"read {plural(n, 'record')} from {path} (non-private count)")


class _ReadFiles(beam.PTransform):
    """Matches ``pattern`` and parses each file with ``parse(path, binary stream)``."""

    def __init__(self, pattern: str, parse, files=None, log_records: bool = False):
        super().__init__()
        self._pattern = pattern
        self._parse = parse
        self._files = files
        self._log_records = log_records

    def expand(self, pbegin):
        return (pbegin
                | "MatchFiles" >> fileio.MatchFiles(self._pattern)
                | "ReadMatches" >> fileio.ReadMatches()
                | "ParseRecords" >> beam.ParDo(
                    _ParseFileFn(self._parse, self._files, self._log_records)))


class ReadUserTexts(beam.PTransform):
    """Files in a text format (csv, jsonl, text) → (user, text) records.

    ``files`` (the matched paths, optional) numbers the files in progress
    lines; ``log_records`` logs each file's record count (a raw count).
    """

    def __init__(self, pattern: str, fmt: str, user_field: str | None = None,
                 text_field: str | None = None, skip_header_lines: int = 0,
                 files=None, log_records: bool = False):
        super().__init__()
        if fmt not in ("csv", "jsonl", "text"):
            raise ValueError(f"format {fmt!r} has no text field; use one of csv, jsonl, text")
        self._parse = record_parser(fmt, user_field, text_field, skip_header_lines)
        self._pattern = pattern
        self._files, self._log_records = files, log_records

    def expand(self, pbegin):
        return pbegin | "ReadFiles" >> _ReadFiles(self._pattern, self._parse, self._files,
                                                  self._log_records)


def items_of(value) -> list:
    """The items in field 1 of what ``ReadUserItems`` gives: one item (a pairs file's
    line) or a row's tokens."""
    return [value] if isinstance(value, (str, bytes)) else list(value)


class ReadUserItems(beam.PTransform):
    """Files of any format → what ``SelectItems`` takes, in its most compact form.

    Text formats (csv, jsonl, text): one ``(user, tokens)`` record per row or
    line, tokenised with ``tokenizer``. ``pairs``: one ``(user, item)`` pair
    per line, as written. A user may span several rows or lines:
    ``SelectItems`` merges them per user before bounding.
    """

    def __init__(self, pattern: str, fmt: str, user_field: str | None = None,
                 text_field: str | None = None, tokenizer: Tokenizer = Tokenizer(),
                 skip_header_lines: int = 0, files=None, log_records: bool = False):
        super().__init__()
        if fmt not in FORMATS:
            raise ValueError(f"unknown format {fmt!r}; choose one of {list(FORMATS)}")
        self._pattern = pattern
        self._fmt = fmt
        self._user_field = user_field
        self._text_field = text_field
        self._tokenizer = tokenizer
        self._skip = skip_header_lines
        self._files, self._log_records = files, log_records

    def expand(self, pbegin):
        if self._fmt == "pairs":
            return pbegin | "ReadPairFiles" >> _ReadFiles(
                self._pattern, record_parser("pairs", skip_header_lines=self._skip),
                self._files, self._log_records)
        tokenizer = self._tokenizer
        return (pbegin
                | "ReadUserTexts" >> ReadUserTexts(self._pattern, self._fmt, self._user_field,
                                                   self._text_field, self._skip, self._files,
                                                   self._log_records)
                | "Tokenize" >> beam.MapTuple(lambda user, text: (user, tokenizer(text))))


class ReadPairs(ReadUserItems):
    """Files of any format → (user, item) pairs, one per occurrence.

    Text formats are tokenised with ``tokenizer`` and each token becomes a
    pair; ``pairs`` is read as is. Prefer ``ReadUserItems`` for
    ``SelectItems``: one record per row instead of one element per token.
    """

    def expand(self, pbegin):
        elements = super().expand(pbegin)
        if self._fmt == "pairs":
            return elements
        return elements | "AsPairs" >> beam.FlatMapTuple(
            lambda user, tokens: ((user, token) for token in tokens))


class ReadDocuments(beam.PTransform):
    """Files → (user, tokens) documents, for n-gram extraction.

    csv/jsonl/text are tokenised with ``tokenizer``; ``msnbc`` is the UCI
    sequence file, one user per line (its header skipped). With
    ``as_elements`` each record is only its list of tokens, no user id (what
    ``ExtractNgrams(privacy_unit="element")`` takes, where every record is
    its own user): no id is made, and no step is added to drop it.
    """

    def __init__(self, pattern: str, fmt: str, user_field: str | None = None,
                 text_field: str | None = None, tokenizer: Tokenizer = Tokenizer(),
                 skip_header_lines: int = 0, files=None, log_records: bool = False,
                 as_elements: bool = False):
        super().__init__()
        self._as_elements = as_elements
        if fmt not in DOCUMENT_FORMATS:
            raise ValueError(f"unknown document format {fmt!r}; choose one of "
                             f"{list(DOCUMENT_FORMATS)}")
        self._pattern, self._fmt = pattern, fmt
        self._user_field, self._text_field = user_field, text_field
        self._tokenizer, self._skip = tokenizer, skip_header_lines
        self._files, self._log_records = files, log_records

    def expand(self, pbegin):
        if self._fmt == "msnbc":
            parse = functools.partial(parse_msnbc, ids=not self._as_elements)
            return pbegin | "ReadMsnbc" >> _ReadFiles(self._pattern, parse, self._files,
                                                      self._log_records)
        tokenizer = self._tokenizer
        tokenize = ((lambda record: tokenizer(record[1])) if self._as_elements
                    else (lambda record: (record[0], tuple(tokenizer(record[1])))))
        return (pbegin
                | "ReadUserTexts" >> ReadUserTexts(self._pattern, self._fmt, self._user_field,
                                                   self._text_field, self._skip, self._files,
                                                   self._log_records)
                | "Tokenize" >> beam.Map(tokenize))
