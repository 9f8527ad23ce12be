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
* ``parquet``: Parquet files, read with Beam's Parquet source, only the
  columns needed: ``--user-field`` (a string, integer or binary column, or
  ``@row``) and either ``--text-field`` (a string column, tokenised) or
  ``--items-field`` (a list of strings: items already tokenised, used as
  is). Every file's footer is checked before a pipeline is built (see
  :func:`inspect_parquet`).

Files are matched with Beam's filesystems (local, gs://, …) and decompressed
by extension (.gz, .bz2, .zst/.zstd, .deflate, .xz/.lzma) with Python's
decompressors, to the end-of-stream marker of the last member: a truncated or
corrupt file is an error, never a shorter read (Beam's own reader stops
silently where a cut file ends). Each file is parsed whole by one worker,
which keeps true line numbers for error messages (every line is decoded on
its own) and lets CSV fields span lines, up to ``FIELD_SIZE_LIMIT``
characters; a quote never closed is an error naming the line it opens on.

A record that cannot be read fails the pipeline with an ``InputFormatError``
naming the file, the line (and record) number and the field, and saying what
is wrong; it never quotes the record, a user id or text (runner logs keep
error messages). Nothing is skipped silently. :func:`inspect_input` parses the
first records of each file on the launching machine, before a pipeline is
built, so that most mistakes (a wrong ``--format`` among them: each parser
checks its format's shape and hints at the right one) fail at once.
"""

from __future__ import annotations

import bz2
import csv
import dataclasses
import difflib
import functools
import io
import json
import logging
import lzma
import os
import typing
import uuid
import zipfile
import zlib
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator, Sequence

import apache_beam as beam
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io import fileio
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.parquetio import ReadAllFromParquetBatched

from beam_dpsu.core.tokenizer import Tokenizer
from beam_dpsu.core.wording import a_type, plural

try:  # what Beam reads .zst with; without it .zst files are refused, not misread
    import zstandard
except ImportError:  # pragma: no cover - an apache-beam dependency
    zstandard = None  # type: ignore[assignment]  # a module or None: checked before use

__all__ = ["FORMATS", "DOCUMENT_FORMATS", "FORMAT_HELP", "FIELD_SIZE_LIMIT", "InputFormatError",
           "check_input_exists", "open_input", "infer_format", "inspect_input", "record_parser",
           "parse_pairs", "parse_csv", "parse_jsonl", "parse_text", "parse_msnbc",
           "ReadUserTexts", "ReadPairs", "ReadUserItems", "ReadDocuments", "items_of",
           "ParquetFields", "inspect_parquet", "ReadParquetRecords", "parquet_read_error"]

FORMATS = ("pairs", "csv", "jsonl", "text", "parquet")
DOCUMENT_FORMATS = ("csv", "jsonl", "text", "msnbc", "parquet")

FORMAT_HELP = {
    "pairs": "CSV lines user,item, items used as is",
    "csv": "a CSV file with a header, read with --user-field and --text-field",
    "jsonl": "one JSON object per line, read with --user-field and --text-field",
    "text": "one user per line, the line is their text",
    "msnbc": "the UCI MSNBC sequence file, zipped or not",
    "parquet": "Parquet files, read with --user-field and --text-field or --items-field",
}

# File name endings (after any compression suffix) → the format they imply.
EXTENSION_FORMATS = {".csv": "csv", ".jsonl": "jsonl", ".ndjson": "jsonl", ".txt": "text",
                     ".zip": "msnbc", ".seq": "msnbc", ".parquet": "parquet"}
COMPRESSION_SUFFIXES = (".gz", ".bz2", ".zst", ".zstd", ".deflate", ".xz", ".lzma")

ROW_AS_USER = "@row"

# A pairs file whose first line is two of these (case-insensitively) has a header.
_USER_HEADERS = {"user", "users", "user_id", "userid", "user id", "uid", "id", "author",
                 "person", "client", "customer", "member", "account", "privacy_id"}
_ITEM_HEADERS = {"item", "items", "word", "words", "token", "tokens", "term", "key", "text",
                 "review", "body", "content", "value", "name", "partition", "category",
                 "query", "url", "page", "document", "sequence"}

# The longest CSV field read, in characters (the csv module's limit, which is
# process-wide; the parsers set it). 16 Mi characters is over a thousand times
# a long review or article, and keeps a worker's memory per field bounded
# (≤ 64 MiB as a str), so a runaway quote stops there instead of reading a
# whole large file into one field. The csv module's own default, 128 Ki
# characters, would refuse long legitimate texts.
FIELD_SIZE_LIMIT = 16 * 1024 * 1024

# Records of each file that inspect_input parses on the launching machine.
INSPECT_RECORDS = 100

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
    text, ``.zip``/``.seq`` → msnbc, compressed or not; ``.parquet`` → parquet);
    raises when they imply none of ``formats`` or disagree."""
    found: dict[str, str] = {}
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


# Compressed bytes read from a file at a time; also the most one read asks a
# decompressor for, so memory stays bounded whatever the compression ratio.
_READ_SIZE = 1 << 20

_COMPRESSION_NAMES = {CompressionTypes.GZIP: "gzip", CompressionTypes.BZIP2: "bzip2",
                      CompressionTypes.DEFLATE: "deflate (zlib)", CompressionTypes.ZSTD: "zstd",
                      CompressionTypes.LZMA: "xz/lzma"}


class _Member:
    """A wrapped decompressor's end-of-stream flag (``eof``), as ``bz2``/``lzma`` give it."""

    _decompressor: typing.Any

    @property
    def eof(self) -> bool:
        return self._decompressor.eof


class _ZlibMember(_Member):
    """A zlib decompressor with the ``needs_input`` protocol of ``bz2``/``lzma``'s."""

    def __init__(self, wbits: int):
        self._decompressor = zlib.decompressobj(wbits)
        self.needs_input = True

    def decompress(self, data: bytes, max_length: int) -> bytes:
        out = self._decompressor.decompress(self._decompressor.unconsumed_tail + data,
                                            max_length)
        # Input left over, or a full buffer (zlib may hold more): call again with b"".
        self.needs_input = not self._decompressor.unconsumed_tail and len(out) < max_length
        return out

    @property
    def unused_data(self) -> bytes:
        return self._decompressor.unused_data


class _ZstdMember(_Member):
    """A zstd frame decompressor with the same protocol; zstandard's has no
    ``max_length``, so it is fed 64 KiB at a time."""

    _FEED = 1 << 16

    def __init__(self):
        # Beam's own window limit (2 GiB) for files it writes and reads.
        self._decompressor = zstandard.ZstdDecompressor(
            max_window_size=1 << 31).decompressobj()
        self._input, self._fed = b"", 0  # input given, and how much of it was fed
        self.needs_input = True

    def decompress(self, data: bytes, max_length: int) -> bytes:
        if data:
            self._input, self._fed = self._input[self._fed:] + data, 0
        feed = self._input[self._fed:self._fed + self._FEED]
        self._fed += len(feed)
        out = self._decompressor.decompress(feed) if feed else b""
        self.needs_input = self._fed >= len(self._input)
        return out

    @property
    def unused_data(self) -> bytes:
        return self._decompressor.unused_data + self._input[self._fed:]


_DECOMPRESSORS = {
    CompressionTypes.GZIP: lambda: _ZlibMember(zlib.MAX_WBITS | 16),
    CompressionTypes.DEFLATE: lambda: _ZlibMember(zlib.MAX_WBITS),
    CompressionTypes.BZIP2: bz2.BZ2Decompressor,
    CompressionTypes.LZMA: lzma.LZMADecompressor,  # FORMAT_AUTO: .xz and .lzma alike
}
if zstandard is not None:
    _DECOMPRESSORS[CompressionTypes.ZSTD] = _ZstdMember


def _error_kind(exc: BaseException) -> str:
    return f"{type(exc).__module__}.{type(exc).__name__}".replace("builtins.", "")


class _WholeDecompression(io.RawIOBase):
    """The decompressed bytes of a file, read to the end-of-stream marker of its
    last member; anything else is an ``InputFormatError`` naming the file.

    Beam's ``CompressedFile`` stops silently where a cut-short file ends, so a
    truncated file would read as a shorter good one. Here a file that ends
    inside a member is *truncated*; bytes after a member must be another
    member (concatenated gzip/bzip2/xz/zstd files are read whole), else the
    file is *corrupt*; an empty file is no compressed stream at all.
    """

    def __init__(self, path: str, raw, compression: str):
        super().__init__()
        self._path, self._raw = path, raw
        self._name = _COMPRESSION_NAMES[compression]
        self._new_member = _DECOMPRESSORS[compression]
        self._member: Any = None  # the decompressor of the member being read, None between
        self._input = b""  # compressed bytes read, not yet given to a decompressor
        self._members = 0
        self._output = memoryview(b"")  # decompressed bytes not yet returned

    def readable(self):
        return True

    def _read_raw(self) -> bytes:
        try:
            return self._raw.read(_READ_SIZE)
        except Exception as exc:  # noqa: BLE001 - OSError and the filesystems' own errors
            raise InputFormatError(f"{self._path}: cannot be read ({_error_kind(exc)})") \
                from None

    def _decompress(self) -> bytes:
        """The next decompressed bytes; b"" only at the end of the last member."""
        while True:
            if self._member is None:
                data = self._input or self._read_raw()
                if not data:
                    if not self._members:
                        raise InputFormatError(
                            f"{self._path}: the file is empty, not {self._name} data "
                            "(a compressed file holds at least a header)")
                    return b""
                self._member, self._input = self._new_member(), data
                self._members += 1
            member = self._member
            if member.needs_input:
                data, self._input = self._input or self._read_raw(), b""
                if not data:
                    raise InputFormatError(
                        f"{self._path}: the {self._name} data is truncated: the file ends "
                        "before its end-of-stream marker (cut short in a copy or download?)")
            else:
                data = b""
            try:
                out = member.decompress(data, _READ_SIZE)
            except Exception as exc:  # noqa: BLE001 - zlib.error, OSError, LZMAError, ZstdError
                where = " after its first stream" if self._members > 1 else ""
                raise InputFormatError(
                    f"{self._path}: cannot be decompressed as {self._name}{where} "
                    f"({_error_kind(exc)}); is it corrupt or misnamed?") from None
            if member.eof:
                self._input, self._member = member.unused_data, None
            if out:
                return out

    def readinto(self, buffer):
        if not self._output:
            self._output = memoryview(self._decompress())
        n = min(len(buffer), len(self._output))
        buffer[:n] = self._output[:n]
        self._output = self._output[n:]
        return n

    def close(self):
        self._raw.close()
        super().close()


def open_input(path: str, raw=None):
    """A binary stream of ``path``'s contents, decompressed by its extension and read
    to the end-of-stream marker (a truncated or corrupt file raises an
    ``InputFormatError`` naming it). ``raw`` is the file opened without
    decompression; by default it is opened with Beam's filesystems."""
    if raw is None:
        raw = FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)
    compression = CompressionTypes.detect_compression_type(path)
    if compression == CompressionTypes.UNCOMPRESSED:
        return raw
    if compression not in _DECOMPRESSORS:
        raw.close()
        raise InputFormatError(f"{path}: reading {compression} files needs the zstandard "
                               "module (pip install zstandard)")
    return _WholeDecompression(path, raw, compression)


def _byte_line_blocks(path: str, stream) -> Iterator[list[bytes]]:
    """The lines of a binary stream, line ends kept, in blocks of about ``_READ_SIZE``
    bytes, split where ``io``'s universal newlines split (``\n``, ``\r\n``,
    ``\r``; UTF-8 holds these bytes only as themselves), so that every line can be
    decoded, and its number known, alone."""
    pending: list[bytes] = []  # the start of a line not yet ended
    while True:
        try:
            chunk = stream.read(_READ_SIZE)
        except InputFormatError:
            raise
        except Exception as exc:  # noqa: BLE001 - zipfile.BadZipFile (bad CRC), OSError, …
            raise InputFormatError(f"{path}: cannot be read ({_error_kind(exc)}); is it "
                                   "corrupt?") from None
        if not chunk:
            break
        if (b"\n" not in chunk and b"\r" not in chunk
                and not (pending and pending[-1].endswith(b"\r"))):
            pending.append(chunk)  # a long line: joined once, when it ends
            continue
        lines = (b"".join(pending) + chunk if pending else chunk).splitlines(keepends=True)
        # An unended last line, or one ending in \r whose \n may be in the next chunk.
        pending = [] if lines[-1].endswith(b"\n") else [lines.pop()]
        if lines:
            yield lines
    if pending:
        yield [b"".join(pending)]


# Leading bytes of files that are not text, for a hint when one is read as text.
_MAGIC_HINTS = ((b"PK\x03\x04", "it is a zip archive: only --format msnbc reads zip files"),
                (b"\x1f\x8b", "it holds gzip data: name it .gz to have it decompressed"),
                (b"BZh", "it may hold bzip2 data: name it .bz2 to have it decompressed"),
                (b"\xfd7zXZ\x00", "it holds xz data: name it .xz to have it decompressed"),
                (b"\x28\xb5\x2f\xfd", "it holds zstd data: name it .zst to have it "
                                      "decompressed"),
                (b"PAR1", "it is a Parquet file: give --format parquet"))


def _decoded_lines(path: str, stream, keep_ends: bool = True) -> Iterator[tuple[int, str]]:
    """(line number, line) for each line of a UTF-8 text stream, its end kept or
    stripped; a line that is not UTF-8 or holds a NUL byte raises, naming its
    true number. (Decoded a block at a time; a failing block is searched.)"""
    lineno = 0
    for block in _byte_line_blocks(path, stream):
        try:
            if b"\x00" in b"".join(block):
                raise ValueError("NUL")
            lines = [raw.decode("utf-8") for raw in block]
        except ValueError:  # UnicodeDecodeError too: find the line
            _check_each_line(path, lineno, block)
            raise
        if not keep_ends:
            lines = [line.rstrip("\r\n") for line in lines]
        yield from zip(range(lineno + 1, lineno + 1 + len(lines)), lines)
        lineno += len(lines)


def _check_each_line(path: str, lines_before: int, block: list[bytes]) -> None:
    for lineno, raw in enumerate(block, start=lines_before + 1):
        if b"\x00" in raw:
            raise InputFormatError(f"{path}:{lineno}: the line holds a NUL byte (a binary "
                                   "file?)" + _magic_hint(lineno, raw))
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InputFormatError(
                f"{path}:{lineno}: the line is not UTF-8 text (at byte {exc.start + 1} of the "
                "line; a binary file, or another encoding?)" + _magic_hint(lineno, raw)) \
                from None


def _magic_hint(lineno: int, raw: bytes) -> str:
    if lineno == 1:
        for magic, hint in _MAGIC_HINTS:
            if raw.startswith(magic):
                return f"; {hint}"
    return ""


def _lines(path: str, stream) -> Iterator[tuple[int, str]]:
    return _decoded_lines(path, stream, keep_ends=False)


def _looks_like_header(fields: Sequence[str]) -> bool:
    return (len(fields) == 2 and fields[0].strip().lower() in _USER_HEADERS
            and fields[1].strip().lower() in _ITEM_HEADERS)


def _is_json_object(line: str) -> bool:
    line = line.strip()
    if not (line.startswith("{") and line.endswith("}")):
        return False
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


_JSONL_HINT = "; the file looks like JSON lines: give --format jsonl"


def _field_too_long(path: str, lineno: int) -> InputFormatError:
    return InputFormatError(
        f"{path}:{lineno}: a field that begins on this line is longer than the limit of "
        f"{FIELD_SIZE_LIMIT:,} characters (an unterminated quote?)")


def parse_pairs(path: str, stream, skip_header_lines: int = 0) -> Iterator[tuple[str, str]]:
    """``user,item`` CSV lines → (user, item); both fields must be non-empty.

    A first line such as ``user,item`` (two usual column names) is refused
    unless ``skip_header_lines`` skips it: read as data it would be a user
    holding one item. So is a first line that is a JSON object (a JSON lines
    file).
    """
    csv.field_size_limit(FIELD_SIZE_LIMIT)
    first = True
    for lineno, line in _lines(path, stream):
        if lineno <= skip_header_lines or not line.strip():
            continue
        try:
            fields = next(csv.reader([line]))
        except csv.Error as exc:
            if len(line) >= FIELD_SIZE_LIMIT:
                raise _field_too_long(path, lineno) from None
            raise InputFormatError(f"{path}:{lineno}: malformed CSV ({exc})") from None
        if lineno == 1 and _looks_like_header(fields):
            raise InputFormatError(
                f"{path}:1 looks like a header row, not a user,item pair; give "
                "--skip-header-lines 1, or --format csv --user-field F --text-field T for a "
                "headed CSV of texts")
        if first and _is_json_object(line):
            raise InputFormatError(f"{path}:{lineno}: a JSON object, not a user,item pair"
                                   + _JSONL_HINT)
        if len(fields) != 2:
            hint = ("; a headed CSV of texts? give --format csv --user-field F --text-field T"
                    if first and len(fields) > 2 else "")
            raise InputFormatError(
                f"{path}:{lineno}: expected 2 fields user,item, got {len(fields)}{hint}")
        first = False
        user, item = fields[0].strip(), fields[1].strip()
        if not user:
            raise InputFormatError(f"{path}:{lineno}: field 1 (user id) is empty")
        if not item:
            raise InputFormatError(f"{path}:{lineno}: field 2 (item) is empty")
        yield user, item


class _RecordLines:
    """Feeds a csv reader a file's lines, keeping the lines of the record being read,
    so that an error can name the line where a field began (csv only knows the
    line it stopped on, which may be the file's last)."""

    def __init__(self, path: str, stream):
        self._lines = _decoded_lines(path, stream)
        self.lineno = 0
        self.record: list[str] = []
        self.record_start = 1
        self.ended = False  # the file ended inside a record

    def __iter__(self):
        return self

    def __next__(self) -> str:
        try:
            self.lineno, line = next(self._lines)
        except StopIteration:
            self.ended = True
            raise
        if self.record or line.strip("\r\n"):
            self.record.append(line)
        else:  # a blank line between records: csv reads it as an empty row, skipped
            self.record_start = self.lineno + 1
        return line

    def next_record(self):
        self.record, self.record_start = [], self.lineno + 1

    def check_closed(self, path: str) -> None:
        """After a record: raises if the file ended inside it with a quote still open
        (csv ends the record there, quote or not)."""
        if self.ended:
            fields = _csv_fields(self.record, self.record_start)
            if fields and fields[-1][2]:
                raise InputFormatError(
                    f"{path}:{fields[-1][0]}: a quoted field that begins on this line is "
                    "never closed (an unterminated quote would read the rest of the file "
                    "into it)")


def _csv_fields(lines: Sequence[str], first_lineno: int) -> list[tuple[int, int, bool]]:
    """(line it begins on, length, whether a quote is still open at the end) of each
    field of one CSV record, read as the csv module reads the default dialect
    (non-strict: after a closing quote, characters up to the next comma join the
    field; a quote inside an unquoted field is a character). For error messages."""
    fields = []
    quoted, start, size = False, first_lineno, 0
    for lineno, line in enumerate(lines, start=first_lineno):
        i = 0
        end_of_line = len(line.rstrip("\r\n"))
        while True:
            if not quoted:
                start = lineno
                if not line.startswith('"', i):  # an unquoted field, to the next comma
                    comma = line.find(",", i)
                    fields.append((lineno, (end_of_line if comma < 0 else comma) - i, False))
                    if comma < 0:
                        break
                    i = comma + 1
                    continue
                quoted, i, size = True, i + 1, 0
            quote = line.find('"', i)
            if quote < 0:  # the quoted field goes on on the next line
                size += len(line) - i
                break
            if line.startswith('"', quote + 1):  # an escaped quote
                size, i = size + quote + 1 - i, quote + 2
                continue
            quoted = False
            comma = line.find(",", quote + 1)
            size += quote - i + max(0, (end_of_line if comma < 0 else comma) - quote - 1)
            fields.append((start, size, False))
            if comma < 0:
                break
            i = comma + 1
    if quoted:
        fields.append((start, size, True))
    return fields


def parse_csv(path: str, stream, user_field: str, text_field: str) -> Iterator[tuple[str, str]]:
    """A headed CSV file → (user, text) per row.

    ``user_field="@row"`` makes every row its own user (``<file>:<row>``), for
    corpora such as IMDb where each document is one user. A quoted field may
    span lines; one never closed, or longer than ``FIELD_SIZE_LIMIT``
    characters, is an error naming the line it begins on.
    """
    csv.field_size_limit(FIELD_SIZE_LIMIT)
    lines = _RecordLines(path, stream)
    reader = csv.DictReader(lines)
    row_is_user = user_field == ROW_AS_USER
    row_number = 0
    try:
        header = reader.fieldnames or []
        lines.check_closed(path)
        lines.next_record()
        if not header:
            return  # an empty file: no header, no records
        for name in ((text_field,) if row_is_user else (user_field, text_field)):
            if name not in header:
                # The header is not quoted: on a headerless file it is a record.
                hint = (_JSONL_HINT if header[0].lstrip().startswith("{")
                        else "; is the file headed, and is the field name right?")
                raise InputFormatError(
                    f"{path}: the header (line 1, {len(header)} fields) has no field "
                    f"{name!r}{hint}")
        for row_number, row in enumerate(reader, start=1):
            lines.check_closed(path)
            where = f"{path}:{lines.record_start}: record {row_number}"
            lines.next_record()
            user = f"{path}:{row_number}" if row_is_user else row.get(user_field)
            value = row.get(text_field)
            if user is None or not user.strip():
                raise InputFormatError(f"{where}: user id field {user_field!r} is missing "
                                       "or empty")
            if value is None:
                raise InputFormatError(f"{where}: text field {text_field!r} is missing "
                                       f"(the row has fewer fields than the header)")
            yield user.strip(), value
    except csv.Error as exc:
        fields = _csv_fields(lines.record, lines.record_start)
        if "field limit" in str(exc) and fields:
            raise _field_too_long(path, max(fields, key=lambda f: f[1])[0]) from None
        raise InputFormatError(f"{path}:{lines.lineno}: record {row_number + 1}: "
                               f"malformed CSV ({exc})") from None


def parse_jsonl(path: str, stream, user_field: str, text_field: str) -> Iterator[tuple[str, str]]:
    """JSON lines → (user, text); the user id may be a string or an integer."""
    for lineno, line in _lines(path, stream):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            hint = ("; the file looks like CSV: give --format csv (or pairs)"
                    if "," in line and not line.lstrip().startswith(("{", "[")) else "")
            raise InputFormatError(f"{path}:{lineno}: not valid JSON ({exc.msg} at column "
                                   f"{exc.colno}){hint}") from None
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


# A text file whose first lines (up to this many, at least one) are all JSON
# objects is a JSON lines file read with the wrong --format.
_TEXT_SHAPE_LINES = 20


def parse_text(path: str, stream, skip_header_lines: int = 0) -> Iterator[tuple[str, str]]:
    """One user per line → (``path:line``, line).

    Refused: a file whose first lines are all JSON objects (give ``jsonl``).
    """
    first: list[tuple[int, str]] | None = []  # None once checked
    for lineno, line in _lines(path, stream):
        if lineno <= skip_header_lines:
            continue
        if first is None:
            yield f"{path}:{lineno}", line
            continue
        first.append((lineno, line))
        if len(first) == _TEXT_SHAPE_LINES:
            yield from _checked_text_lines(path, first)
            first = None
    if first:
        yield from _checked_text_lines(path, first)


def _checked_text_lines(path, first):
    if first and all(_is_json_object(line) for _, line in first):
        raise InputFormatError(f"{path}:{first[0][0]}: the first lines are JSON objects, not "
                               "text" + _JSONL_HINT)
    for lineno, line in first:
        yield f"{path}:{lineno}", line


def _msnbc_stream(path: str, stream):
    """The .seq member of a zipped MSNBC file, or the stream itself."""
    if not _uncompressed_name(path).endswith(".zip"):
        return stream
    try:
        archive = zipfile.ZipFile(io.BytesIO(stream.read()))
    except zipfile.BadZipFile:
        raise InputFormatError(f"{path}: not a valid zip file (corrupt or cut short?)") \
            from None
    members = [n for n in archive.namelist()
               if not n.endswith("/") and not n.startswith("__MACOSX/")]
    if len(members) != 1:
        raise InputFormatError(f"{path}: expected one sequence file in the zip, got "
                               f"{len(members)}")
    return archive.open(members[0])


def _not_msnbc(path: str, lineno: int, line: str) -> InputFormatError:
    stripped = line.lstrip()
    if stripped.startswith("{"):
        hint = _JSONL_HINT
    elif "," in line:
        hint = "; the file looks like CSV: give --format csv"
    else:
        hint = "; is --format right?"
    return InputFormatError(f"{path}:{lineno}: not an MSNBC visit sequence (page category "
                            f"numbers separated by spaces){hint}")


def parse_msnbc(path: str, stream, ids: bool = True) -> Iterator[tuple[str, tuple] | list]:
    """The UCI MSNBC sequence file (zipped or not) → (``path:line``, page categories).

    The header (lines starting with '%' up to '% Sequences:' and the blank
    lines around it) is skipped; every other line is one user's visit
    sequence, space-separated category numbers (anything else is an error
    naming the line). Without ``ids`` each line is just its list of
    categories (one person's only element).
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
        categories = line.split()
        if not categories:
            if not seen_data:  # the blank line(s) between header and data
                continue
            raise InputFormatError(f"{path}:{lineno}: empty visit sequence")
        digits = "".join(categories)
        if not (digits.isascii() and digits.isdigit()):
            raise _not_msnbc(path, lineno, line)
        seen_data = True
        yield (f"{path}:{lineno}", tuple(categories)) if ids else categories


def record_parser(fmt: str, user_field: str | None = None, text_field: str | None = None,
                  skip_header_lines: int = 0) -> Callable[..., Iterator]:
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
        finally:
            stream.close()
    if not any_record and len(checked) == len(files):
        what = (f"{files[0]} is" if len(files) == 1
                else f"all {len(files)} files ({os.path.dirname(files[0])}/…) are")
        raise InputFormatError(f"no records in the input: {what} empty or only a header")


# -- Parquet ------------------------------------------------------------------------------

# What each role's column must hold, as errors name it.
_PARQUET_EXPECTED = {"user": "a string, integer or binary column",
                     "text": "a string column", "items": "a list of strings"}
_PARQUET_FLAGS = {"user": "--user-field", "text": "--text-field", "items": "--items-field"}

# Footers read at once when a Parquet input is checked (remote stores answer slowly).
_FOOTER_READERS = 16

# The label of the step that reads Parquet row groups: a failure inside it
# (Beam's reader raises pyarrow's own errors) is recognised by it.
PARQUET_READ_STEP = "ReadParquetRowGroups"


def _is_text_type(arrow_type: pa.DataType) -> bool:
    return pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)


def _value_type(arrow_type: pa.DataType) -> pa.DataType:
    """A dictionary-encoded column's value type (pandas categoricals), else the type."""
    return arrow_type.value_type if pa.types.is_dictionary(arrow_type) else arrow_type


def _fits(role: str, arrow_type: pa.DataType) -> bool:
    arrow_type = _value_type(arrow_type)
    if role == "user":
        return (_is_text_type(arrow_type) or pa.types.is_integer(arrow_type)
                or pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type))
    if role == "text":
        return _is_text_type(arrow_type)
    return ((pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type))
            and _is_text_type(arrow_type.value_type))


@dataclasses.dataclass(frozen=True)
class ParquetFields:
    """The columns a Parquet input is read from: the user id (``user``, or ``"@row"``:
    each row is its own user) and either ``text`` (a string column, tokenised) or
    ``items`` (a list-of-strings column, items already tokenised, used as is).

    Raises:
      ValueError: without a user field, or without exactly one of text and items.
    """

    user: str
    text: str | None = None
    items: str | None = None

    def __post_init__(self):
        if not self.user:
            raise ValueError("a Parquet input needs --user-field")
        if (self.text is None) == (self.items is None):
            raise ValueError("a Parquet input needs one of --text-field and --items-field")

    @property
    def value(self) -> str:
        """The column of each row's text or items."""
        return typing.cast(str, self.text or self.items)

    @property
    def roles(self) -> list[tuple[str, str]]:
        """(role, column) of each column read: ``user`` (unless ``@row``), then
        ``text`` or ``items``."""
        value = ("text", self.value) if self.text else ("items", self.value)
        return ([] if self.user == ROW_AS_USER else [("user", self.user)]) + [value]

    @property
    def columns(self) -> list[str]:
        """The columns read (no other column leaves the file)."""
        return [column for _, column in self.roles]

    def check_schema(self, path: str, schema: pa.Schema) -> None:
        """Raises ``InputFormatError`` naming the file, the column and the type expected
        when a column is missing or of the wrong type."""
        for role, column in self.roles:
            flag = _PARQUET_FLAGS[role]
            if column not in schema.names:
                close = difflib.get_close_matches(column, schema.names, n=1)
                hint = (f"; did you mean {close[0]!r}?" if close
                        else "; is the column name right?")
                raise InputFormatError(f"{path}: no column {column!r} ({flag}), expected "
                                       f"{_PARQUET_EXPECTED[role]}{hint}")
            if len(schema.get_all_field_indices(column)) > 1:
                raise InputFormatError(f"{path}: more than one column is named {column!r} "
                                       f"({flag}); which one to read is ambiguous")
            arrow_type = schema.field(column).type
            if not _fits(role, arrow_type):
                raise InputFormatError(f"{path}: column {column!r} ({flag}) is of type "
                                       f"{arrow_type}, expected {_PARQUET_EXPECTED[role]}")

    def check_footer_nulls(self, path: str, metadata: pq.FileMetaData) -> None:
        """Raises when the footer's statistics count a null in a user or text column,
        naming the rows of its row group. (A list column's statistics count an empty
        list as a null too; those, and files without statistics, are checked as they
        are read.)"""
        first_row = 1
        for group in range(metadata.num_row_groups):
            row_group = metadata.row_group(group)
            for chunk in (row_group.column(c) for c in range(row_group.num_columns)):
                stats = chunk.statistics
                if stats is None or not stats.has_null_count or not stats.null_count:
                    continue
                for role, column in self.roles:
                    if role != "items" and chunk.path_in_schema == column:
                        last_row = first_row + row_group.num_rows - 1
                        raise _parquet_null(path, role, column,
                                            f"rows {first_row}–{last_row} (row group "
                                            f"{group + 1})")
            first_row += row_group.num_rows

    def check_values(self, path: str, table: pa.Table) -> None:
        """Raises on a null, an empty user id or an empty item in ``table`` (one row group
        of ``path``; Beam's reader does not say which, so the error names the file)."""
        for role, column in self.roles:
            values = _plain(table.column(column))
            if values.null_count:
                raise _parquet_null(path, role, column)
            flag = _PARQUET_FLAGS[role]
            try:  # Arrow trusts the file: a string column may hold invalid UTF-8
                values.validate(full=True)
            except pa.ArrowInvalid:
                raise InputFormatError(f"{path}: column {column!r} ({flag}) holds text that "
                                       "is not valid UTF-8 (another encoding, or a corrupt "
                                       "file?)") from None
            if role == "items":
                items = pc.list_flatten(values)
                if items.null_count:
                    raise InputFormatError(f"{path}: column {column!r} ({flag}) holds a list "
                                           "with a null item")
                if _any_empty(items):
                    raise InputFormatError(f"{path}: column {column!r} ({flag}) holds an "
                                           "empty item")
            elif role == "user" and not pa.types.is_integer(values.type) and _any_empty(values):
                raise InputFormatError(f"{path}: column {column!r} ({flag}) holds an empty "
                                       "user id")


def _plain(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """A dictionary-encoded column decoded."""
    if pa.types.is_dictionary(values.type):
        return values.cast(values.type.value_type)
    return values


def _any_empty(values: pa.ChunkedArray | pa.Array) -> bool:
    return len(values) > 0 and bool(pc.any(pc.equal(pc.binary_length(values), 0)).as_py())


def _parquet_null(path: str, role: str, column: str, rows: str = "") -> InputFormatError:
    where = f"{path}: {rows}: " if rows else f"{path}: "
    what = {"user": "a user id", "text": "a text (an empty string for none)",
            "items": "a list of items (an empty list for none)"}[role]
    return InputFormatError(f"{where}column {column!r} ({_PARQUET_FLAGS[role]}) holds a null "
                            f"(missing) value; every row needs {what}")


def _parquet_footer_rows(path: str, fields: ParquetFields) -> tuple[int, str | None]:
    """Checks one file's footer (see :func:`inspect_parquet`); its number of rows and the
    kind of its user ids (``_user_id_kind``)."""
    if CompressionTypes.detect_compression_type(path) != CompressionTypes.UNCOMPRESSED:
        raise InputFormatError(
            f"{path}: a Parquet file is read as it is (its columns are compressed inside): "
            "decompress it, or drop the compression suffix from its name")
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            metadata = pq.read_metadata(f)
    except Exception as exc:  # noqa: BLE001 - ArrowInvalid, OSError, the filesystems' own
        raise InputFormatError(f"{path}: not a readable Parquet file ({_error_kind(exc)}): "
                               "is it cut short, corrupt, or not Parquet?") from None
    schema = metadata.schema.to_arrow_schema()
    fields.check_schema(path, schema)
    fields.check_footer_nulls(path, metadata)
    return metadata.num_rows, _user_id_kind(schema, fields)


def _user_id_kind(schema: pa.Schema, fields: ParquetFields) -> str | None:
    """"binary" or "text" (string or integer, which is read as text), None for @row."""
    if fields.user == ROW_AS_USER:
        return None
    arrow_type = schema.field(fields.user).type
    if pa.types.is_dictionary(arrow_type):
        arrow_type = arrow_type.value_type
    binary = pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type)
    return "binary" if binary else "text"


def inspect_parquet(files: Sequence[str], fields: ParquetFields) -> None:
    """Reads the footer of every file (not its data) before a pipeline is built; raises
    ``InputFormatError`` naming the file when one is cut short or not Parquet, lacks a
    column or has one of the wrong type, when the footer's statistics count a null in
    a column read, or when no file holds a row."""
    with ThreadPoolExecutor(max_workers=_FOOTER_READERS) as pool:
        footers = list(pool.map(functools.partial(_parquet_footer_rows, fields=fields), files))
    rows = sum(n for n, _ in footers)
    # A user id read as bytes in one file and as text in another would be two users.
    kinds = {kind: path for path, (_, kind) in zip(files, footers) if kind is not None}
    if len(kinds) > 1:
        raise InputFormatError(
            f"column {fields.user!r} (--user-field) holds binary ids in {kinds['binary']} "
            f"but text ids in {kinds['text']}: one user would be two; give every file the "
            "same type of user id")
    if not rows:
        what = (f"{files[0]} has" if len(files) == 1
                else f"all {len(files)} files ({os.path.dirname(files[0])}/…) have")
        raise InputFormatError(f"no records in the input: {what} no rows")


def parquet_read_error(exc: BaseException) -> str | None:
    """The one-line message of a failure inside Beam's Parquet reader (a data page that
    cannot be decoded, a file changed since it was checked), or None.

    Beam's reader raises pyarrow's own error, which does not name the file;
    only its type is kept (the text might quote bytes of the file).
    """
    if f"{PARQUET_READ_STEP}/" not in str(exc):
        return None
    return (f"a Parquet input file cannot be read ({_error_kind(exc)} in Beam's Parquet "
            "reader, which does not name the file): is one corrupt, or was it changed "
            "since the job checked its footer?")


class _ParquetRowsFn(beam.DoFn):
    """(path, one row group as a table) → (user, text or items) per row.

    With ``@row`` each row's id is its file, a token of its row group and its
    index there: distinct, as the element-level privacy unit needs.
    """

    def __init__(self, fields: ParquetFields, log_records: bool):
        self._fields = fields
        self._log_records = log_records

    def process(self, path_and_table: tuple[str, pa.Table]) -> Iterator[tuple]:
        path, table = path_and_table
        fields = self._fields
        # A column missing from this file reads as nothing: checked again here.
        fields.check_schema(path, table.schema)
        fields.check_values(path, table)
        values = _plain(table.column(fields.value)).to_pylist()
        if fields.user == ROW_AS_USER:
            group = uuid.uuid4().hex
            users: typing.Iterable = (f"{path}:{group}:{i}" for i in range(len(values)))
        else:
            user_column = _plain(table.column(fields.user))
            if pa.types.is_integer(user_column.type):  # as in jsonl: an integer id is text
                user_column = user_column.cast(pa.string())
            users = user_column.to_pylist()
        if self._log_records:
            _LOG.info(f"read {plural(len(values), 'record')} from a row group of {path} "
                      "(non-private count)")
        yield from zip(users, values)


def _still_there(path: str, checked: bool) -> str:
    """A checked file's name, or an error if it is gone: Beam's reader would read a
    missing file as no rows (its users silently left out)."""
    if checked and not FileSystems.match([path])[0].metadata_list:
        raise InputFormatError(f"{path}: the file is gone since the job checked it")
    return path


class ReadParquetRecords(beam.PTransform):
    """Parquet files → (user, tokens) records, one per row, with Beam's Parquet source.

    Only the columns ``fields`` names are read. A text column is tokenised
    with ``tokenizer``; an items column is used as is. A row with a null
    field, an empty user id or an empty item fails the pipeline with an
    ``InputFormatError`` naming the file and the column; so does a file that
    lacks a column (Beam's reader would read it as no rows).
    """

    def __init__(self, pattern: str, fields: ParquetFields, tokenizer: Tokenizer = Tokenizer(),
                 log_records: bool = False, files: Sequence[str] | None = None):
        super().__init__()
        self._pattern, self._fields = pattern, fields
        self._tokenizer, self._log_records = tokenizer, log_records
        self._files = list(files) if files else None

    def expand(self, pbegin):
        # The files the job checked, each read by its own name (one gone since fails
        # the run), rather than the pattern matched again.
        records = (pbegin
                   | "Pattern" >> beam.Create(self._files or [self._pattern])
                   | "StillThere" >> beam.Map(_still_there, bool(self._files))
                   | PARQUET_READ_STEP >> ReadAllFromParquetBatched(
                       columns=self._fields.columns, with_filename=True)
                   | "Rows" >> beam.ParDo(_ParquetRowsFn(self._fields, self._log_records)))
        if self._fields.items is not None:
            return records
        tokenizer = self._tokenizer
        return records | "Tokenize" >> beam.MapTuple(lambda user, text: (user, tokenizer(text)))


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
        stream = open_input(path, readable_file.open(
            compression_type=CompressionTypes.UNCOMPRESSED))
        n = 0
        try:
            # B007: n is read after the loop (the number of records).
            for n, record in enumerate(self._parse(path, stream), start=1):  # noqa: B007
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


def _parquet_fields(fmt: str, user_field: str | None, text_field: str | None,
                    items_field: str | None) -> ParquetFields | None:
    """The columns of a ``parquet`` input; None for other formats (which have no
    items field)."""
    if fmt == "parquet":
        return ParquetFields(user_field or "", text_field, items_field)
    if items_field is not None:
        raise ValueError(f"an items field applies to the parquet format only, not {fmt!r}")
    return None


def items_of(value) -> list:
    """The items in field 1 of what ``ReadUserItems`` gives: one item (a pairs file's
    line) or a row's tokens."""
    return [value] if isinstance(value, (str, bytes)) else list(value)


class ReadUserItems(beam.PTransform):
    """Files of any format → what ``SelectItems`` takes, in its most compact form.

    Text formats (csv, jsonl, text): one ``(user, tokens)`` record per row or
    line, tokenised with ``tokenizer``. ``pairs``: one ``(user, item)`` pair
    per line, as written. ``parquet``: one ``(user, tokens)`` record per row,
    its ``text_field`` tokenised or its ``items_field`` (a list of strings)
    as is. A user may span several rows or lines: ``SelectItems`` merges them
    per user before bounding.
    """

    def __init__(self, pattern: str, fmt: str, user_field: str | None = None,
                 text_field: str | None = None, tokenizer: Tokenizer = Tokenizer(),
                 skip_header_lines: int = 0, files=None, log_records: bool = False,
                 items_field: str | None = None):
        super().__init__()
        if fmt not in FORMATS:
            raise ValueError(f"unknown format {fmt!r}; choose one of {list(FORMATS)}")
        self._parquet = _parquet_fields(fmt, user_field, text_field, items_field)
        self._pattern = pattern
        self._fmt = fmt
        self._user_field = user_field
        self._text_field = text_field
        self._tokenizer = tokenizer
        self._skip = skip_header_lines
        self._files, self._log_records = files, log_records

    def expand(self, pbegin):
        if self._parquet is not None:
            return pbegin | "ReadParquet" >> ReadParquetRecords(
                self._pattern, self._parquet, self._tokenizer, self._log_records,
                files=self._files)
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
    sequence file, one user per line (its header skipped); ``parquet`` rows
    are tokenised from ``text_field`` or are ``items_field`` as is (the
    sequence of tokens, in order). With
    ``as_elements`` each record is only its list of tokens, no user id (what
    ``ExtractNgrams(privacy_unit="element")`` takes, where every record is
    its own user): no id is made, and no step is added to drop it.
    """

    def __init__(self, pattern: str, fmt: str, user_field: str | None = None,
                 text_field: str | None = None, tokenizer: Tokenizer = Tokenizer(),
                 skip_header_lines: int = 0, files=None, log_records: bool = False,
                 as_elements: bool = False, items_field: str | None = None):
        super().__init__()
        self._as_elements = as_elements
        if fmt not in DOCUMENT_FORMATS:
            raise ValueError(f"unknown document format {fmt!r}; choose one of "
                             f"{list(DOCUMENT_FORMATS)}")
        self._parquet = _parquet_fields(fmt, user_field, text_field, items_field)
        self._pattern, self._fmt = pattern, fmt
        self._user_field, self._text_field = user_field, text_field
        self._tokenizer, self._skip = tokenizer, skip_header_lines
        self._files, self._log_records = files, log_records

    def expand(self, pbegin):
        if self._fmt == "msnbc":
            parse = functools.partial(parse_msnbc, ids=not self._as_elements)
            return pbegin | "ReadMsnbc" >> _ReadFiles(self._pattern, parse, self._files,
                                                      self._log_records)
        if self._parquet is not None:
            as_document = ((lambda record: record[1]) if self._as_elements
                           else (lambda record: (record[0], tuple(record[1]))))
            return (pbegin
                    | "ReadParquet" >> ReadParquetRecords(self._pattern, self._parquet,
                                                          self._tokenizer, self._log_records,
                                                          files=self._files)
                    | "AsDocuments" >> beam.Map(as_document))
        tokenizer = self._tokenizer
        tokenize = ((lambda record: tokenizer(record[1])) if self._as_elements
                    else (lambda record: (record[0], tuple(tokenizer(record[1])))))
        return (pbegin
                | "ReadUserTexts" >> ReadUserTexts(self._pattern, self._fmt, self._user_field,
                                                   self._text_field, self._skip, self._files,
                                                   self._log_records)
                | "Tokenize" >> beam.Map(tokenize))
