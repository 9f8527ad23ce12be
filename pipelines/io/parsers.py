"""One parser per text format: (path, binary stream) → records (:func:`record_parser`).

An error names the file and the true line, hints at the right ``--format``, and
never quotes the record (docs/explanation/reading.md#parsing).
"""

from __future__ import annotations

import csv
import functools
import io
import itertools
import json
import re
import sys
import typing
import zipfile
from collections import Counter
from typing import Callable, Iterator, Sequence

from beam_dpsu.core.documents import encodes_as_utf8
from beam_dpsu.core.checks import a_type
from pipelines.io.errors import InputFormatError
from pipelines.io.formats import DOCUMENT_FORMATS, FORMATS, ROW_AS_USER, uncompressed_name
from pipelines.io.lines import decoded_lines

__all__ = ["FIELD_SIZE_LIMIT", "parse_pairs", "parse_csv", "parse_jsonl", "parse_text",
           "parse_msnbc", "record_parser"]

# A pairs file whose first line is two of these (case-insensitively) has a header.
_USER_HEADERS = {"user", "users", "user_id", "userid", "user id", "uid", "id", "author",
                 "person", "client", "customer", "member", "account", "privacy_id"}
_ITEM_HEADERS = {"item", "items", "word", "words", "token", "tokens", "term", "key", "text",
                 "review", "body", "content", "value", "name", "partition", "category",
                 "query", "url", "page", "document", "sequence", "tag", "tags", "label",
                 "labels", "keyword", "keywords", "product"}

# The longest CSV field read, in characters (csv's process-wide limit; the parsers set
# it): bounds a worker's memory per field, so a runaway quote stops there
# (docs/explanation/reading.md#parsing).
FIELD_SIZE_LIMIT = 16 * 1024 * 1024


def _looks_like_header(fields: Sequence[str]) -> bool:
    return (len(fields) == 2 and fields[0].strip().lower() in _USER_HEADERS
            and fields[1].strip().lower() in _ITEM_HEADERS)


def _looks_like_csv_header(line: str) -> bool:
    """Whether a text line is a CSV header row: a usual user and a usual item column name."""
    if "," not in line:
        return False
    try:
        names = [f.strip().lower() for f in next(csv.reader([line]))]
    except csv.Error:
        return False
    users = [i for i, name in enumerate(names) if name in _USER_HEADERS]
    return bool(users) and any(name in _ITEM_HEADERS for i, name in enumerate(names)
                               if i != users[0])


def _is_json_object(line: str) -> bool:
    line = line.strip()
    if not (line.startswith("{") and line.endswith("}")):
        return False
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


_JSONL_HINT = "; the file looks like JSON lines: give --format jsonl"


def _blank(user: str | None) -> str:
    """The note on a user id refused as empty that is not empty but whitespace."""
    return " (it is only whitespace)" if user else ""


def parse_pairs(path: str, stream, skip_header_lines: int = 0) -> Iterator[tuple[str, str]]:
    """``user,item`` CSV records (csv's default dialect) → (user, item), the item as it is,
    the user id stripped. What is refused: docs/explanation/reading.md#parsing."""
    lines = (line for line in decoded_lines(path, stream) if line[0] > skip_header_lines)
    first = next(lines, None)
    if first is None:
        return
    if _is_json_object(first[1]):
        raise InputFormatError(f"{path}:{first[0]}: a JSON object, not a user,item pair"
                               + _JSONL_HINT)
    records = _CsvRecords(path, itertools.chain([first], lines), first[0])
    try:
        for start, fields in records:
            if start == 1 and _looks_like_header(fields):
                raise InputFormatError(
                    f"{path}:1 looks like a header row, not a user,item pair; give "
                    "--skip-header-lines 1, or --format csv --user-field F --text-field T for "
                    "a headed CSV of texts")
            if not fields:
                raise InputFormatError(f"{path}:{start}: a blank line; every line of a pairs "
                                       "file is a user,item pair (remove blank lines)")
            if len(fields) != 2:
                hint = ("; a headed CSV of texts? give --format csv --user-field F --text-field "
                        "T" if start == first[0] and len(fields) > 2 else "")
                raise InputFormatError(
                    f"{path}:{start}: expected 2 fields user,item, got {len(fields)}{hint}")
            user, item = fields[0].strip(), fields[1]
            if not user:
                raise InputFormatError(f"{path}:{start}: field 1 (user id) is empty"
                                       + _blank(fields[0]))
            if not item:
                raise InputFormatError(f"{path}:{start}: field 2 (item) is empty")
            yield user, item
    except csv.Error as exc:
        raise InputFormatError(f"{path}:{records.line_num}: malformed CSV ({exc})") from None


# A field as csv reads the default dialect (non-strict): quoted (``q``), to its closing
# quote and on to a comma or line end (``t``: characters after a closing quote join the
# field), or still open at the end; else unquoted (``u``; a quote in it is a character).
_CSV_FIELD = re.compile(r'"(?P<q>(?:[^"]+|"")*)(?:"(?P<t>[^,\r\n]*)|\Z)|(?P<u>[^,\r\n]*)')
_LINE_END = re.compile(r"\r\n|\r|\n")


def _field_starts(lines: Sequence[str], first_lineno: int) -> list[tuple[int, int]]:
    """(line it begins on, length) of each field of one CSV record: csv does not say."""
    text, pos, fields = "".join(lines), 0, []
    while True:
        field = typing.cast(re.Match, _CSV_FIELD.match(text, pos))
        quoted = field["q"] or ""
        length = len(quoted) - quoted.count('""') + len(field["t"] or field["u"] or "")
        fields.append((first_lineno + len(_LINE_END.findall(text, 0, pos)), length))
        if not text.startswith(",", field.end()):
            return fields
        pos = field.end() + 1


class _CsvRecords:
    """(line it begins on, fields) of each CSV record of (number, line) pairs; a quoted field
    never closed or over ``FIELD_SIZE_LIMIT`` raises naming its line, other bad CSV csv.Error."""

    def __init__(self, path: str, lines: Iterator[tuple[int, str]], first_lineno: int = 1):
        self._path = path
        self._before = first_lineno - 1  # lines before the first one read
        self._lines: list[str] = []  # the lines of the record being read
        self._ended = False  # the file ended, inside a record or after the last
        csv.field_size_limit(FIELD_SIZE_LIMIT)
        self._reader = csv.reader(self._read(lines))

    def _read(self, lines: Iterator[tuple[int, str]]) -> Iterator[str]:
        for _, line in lines:
            self._lines.append(line)
            yield line
        self._ended = True

    @property
    def line_num(self) -> int:
        """The last line read."""
        return self._before + self._reader.line_num

    def __iter__(self) -> Iterator[tuple[int, list[str]]]:
        start = self._before + 1
        try:
            for fields in self._reader:
                if self._ended:  # only an open quote leaves a record unended at the end
                    raise InputFormatError(
                        f"{self._path}:{_field_starts(self._lines, start)[-1][0]}: a quoted "
                        "field that begins on this line is never closed (an unterminated "
                        "quote would read the rest of the file into it)")
                yield start, fields
                start, self._lines = self.line_num + 1, []
        except csv.Error as exc:
            if "field limit" not in str(exc) or not self._lines:
                raise
            longest = max(_field_starts(self._lines, start), key=lambda f: f[1])
            raise InputFormatError(
                f"{self._path}:{longest[0]}: a field that begins on this line is longer than "
                f"the limit of {FIELD_SIZE_LIMIT:,} characters (an unterminated quote?)") \
                from None


def parse_csv(path: str, stream, user_field: str, text_field: str) -> Iterator[tuple[str, str]]:
    """A headed CSV file → (user, text) per row; ``user_field="@row"``: each row its own user
    (``<file>:<row>``), else the id is stripped and must not be empty."""
    records = _CsvRecords(path, decoded_lines(path, stream))
    rows = iter(records)
    read = (text_field,) if user_field == ROW_AS_USER else (user_field, text_field)
    row_number = 0
    try:
        # Blank lines before the header are skipped, as between records (and DictReader).
        header_line, header = next(((n, row) for n, row in rows if row), (0, []))
        if not header:
            return  # an empty or blank file: no header, no records
        for name in read:
            if name not in header:
                # The header is not quoted: on a headerless file it is a record.
                hint = (_JSONL_HINT if header[0].lstrip().startswith("{")
                        else "; is the file headed, and is the field name right?")
                raise InputFormatError(
                    f"{path}: the header (line {header_line}, {len(header)} fields) has no "
                    f"field {name!r}{hint}")
        for name in read:  # a column named twice: taking one would be a guess
            columns = [str(i) for i, column in enumerate(header, start=1) if column == name]
            if len(columns) > 1:
                listed = f"{', '.join(columns[:-1])} and {columns[-1]}"
                raise InputFormatError(
                    f"{path}:{header_line}: the header names the field {name!r} in columns "
                    f"{listed}: which one to read is ambiguous; rename or remove all but one")
        column = {name: i for i, name in enumerate(header)}
        user_column, text_column = column.get(user_field, -1), column[text_field]
        for start, row in rows:
            if not row:
                continue  # a blank line between records
            row_number += 1
            where = f"{path}:{start}: record {row_number}"
            user = (f"{path}:{row_number}" if len(read) == 1
                    else row[user_column] if user_column < len(row) else None)
            value = row[text_column] if text_column < len(row) else None
            if user is None or not user.strip():
                raise InputFormatError(f"{where}: user id field {user_field!r} is missing "
                                       "or empty" + _blank(user))
            if value is None:
                raise InputFormatError(f"{where}: text field {text_field!r} is missing "
                                       f"(the row has fewer fields than the header)")
            if len(row) > len(header):
                raise InputFormatError(f"{where}: the row has {len(row)} fields, the header "
                                       f"{len(header)} (a comma in a field that is not "
                                       "quoted?)")
            yield user.strip(), value
    except csv.Error as exc:
        raise InputFormatError(f"{path}:{records.line_num}: record {row_number + 1}: "
                               f"malformed CSV ({exc})") from None


class _RepeatedKeys(dict):
    """A JSON object that names a key more than once (its last values), with each one's count."""

    repeated: dict


def _json_object(pairs: list) -> dict:
    record = dict(pairs)
    if len(record) < len(pairs):
        record = _RepeatedKeys(record)
        record.repeated = {k: n for k, n in Counter(k for k, _ in pairs).items() if n > 1}
    return record


# One decoder for every line (``json.loads`` with a hook would build one per call); the
# hook sees each object's keys before a repeated one overwrites the first.
_JSON_DECODER = json.JSONDecoder(object_pairs_hook=_json_object)


def parse_jsonl(path: str, stream, user_field: str, text_field: str) -> Iterator[tuple[str, str]]:
    """JSON lines → (user, text); the user id a string (stripped) or an integer.
    What is refused: docs/explanation/reading.md#parsing."""
    for lineno, line in decoded_lines(path, stream, keep_ends=False):
        if not line.strip():
            raise InputFormatError(f"{path}:{lineno}: a blank line; every line of a JSON lines "
                                   "file is one JSON object (remove blank lines)")
        try:
            record = _JSON_DECODER.decode(line)
        except RecursionError:
            raise InputFormatError(f"{path}:{lineno}: the JSON is nested too deeply to "
                                   "read") from None
        except json.JSONDecodeError as exc:
            hint = ("; the file looks like CSV: give --format csv (or pairs)"
                    if "," in line and not line.lstrip().startswith(("{", "[")) else "")
            # (json's "Unterminated string starting at" ends in "at" already.)
            at = "" if exc.msg.endswith(" at") else " at"
            raise InputFormatError(f"{path}:{lineno}: not valid JSON ({exc.msg}{at} column "
                                   f"{exc.colno}){hint}") from None
        except ValueError:
            # The one other ValueError json raises: an integer over the digits limit
            # (from Python 3.10.7; setup.py admits 3.10). Its message names no line.
            limit = getattr(sys, "get_int_max_str_digits", lambda: 4300)()
            raise InputFormatError(
                f"{path}:{lineno}: the JSON holds an integer longer than Python reads (over "
                f"{limit} digits; is it meant as a string?)") from None
        if not isinstance(record, dict):
            raise InputFormatError(
                f"{path}:{lineno}: expected a JSON object, got a JSON {type(record).__name__}")
        if type(record) is _RepeatedKeys:
            for name in (user_field, text_field):
                if name in record.repeated:
                    raise InputFormatError(f"{path}:{lineno}: the object has the key {name!r} "
                                           f"{record.repeated[name]} times: which one to read "
                                           "is ambiguous; keep one")
        user, value = record.get(user_field), record.get(text_field)
        if user is None or (isinstance(user, str) and not user.strip()):
            # A blank id is refused as in csv and pairs, which strip the user id.
            raise InputFormatError(f"{path}:{lineno}: user id field {user_field!r} is missing "
                                   "or empty" + _blank(user))
        if isinstance(user, bool) or not isinstance(user, (str, int)):
            raise InputFormatError(f"{path}:{lineno}: user id field {user_field!r} must be a "
                                   f"string or an integer, got {a_type(user)}")
        if value is None:
            raise InputFormatError(f"{path}:{lineno}: text field {text_field!r} is missing")
        if not isinstance(value, str):
            raise InputFormatError(f"{path}:{lineno}: text field {text_field!r} must be a "
                                   f"string, got {a_type(value)}")
        fields = ((f"user id field {user_field!r}", user), (f"text field {text_field!r}", value))
        # json decodes an escape such as \udc80 to a str that no UTF-8 spells; Beam
        # would fail on it later, encoding the record, with a traceback.
        for field, text in fields:
            if isinstance(text, str) and not (text.isascii() or encodes_as_utf8(text)):
                raise InputFormatError(
                    f"{path}:{lineno}: {field} holds a lone surrogate \\u escape (half of a "
                    "UTF-16 pair, no Unicode character; was the text cut or encoded wrongly?)")
        # A NUL byte in a line is refused (``lines``); its escape spells the same character.
        for field, text in fields:
            if isinstance(text, str) and "\x00" in text:
                raise InputFormatError(f"{path}:{lineno}: {field} holds a NUL character (a "
                                       "\\u0000 escape), which no text read may hold "
                                       "(binary data?)")
        yield (user.strip() if isinstance(user, str) else str(user)), value


# A text file whose first lines (up to this many, at least one) are all JSON
# objects is a JSON lines file read with the wrong --format; a CSV header is
# looked for after fewer empty lines than this.
_TEXT_SHAPE_LINES = 20


def parse_text(path: str, stream, skip_header_lines: int = 0) -> Iterator[tuple[str, str]]:
    """One user per line → (``path:line``, line); refuses JSON lines and a CSV header."""
    lines = ((n, line) for n, line in decoded_lines(path, stream, keep_ends=False)
             if n > skip_header_lines)
    first = []
    for lineno, line in lines:  # empty lines (a few at most), then the first text
        first.append((lineno, line))
        if line or len(first) == _TEXT_SHAPE_LINES:
            break
    # A header after empty lines too: parse_csv skips them before its header (not lines of
    # spaces, which it reads as a header of one field).
    if first and skip_header_lines == 0 and _looks_like_csv_header(first[-1][1]):
        raise InputFormatError(
            f"{path}:{first[-1][0]} looks like a CSV header row (column names), not a user's "
            "text; give --format csv --user-field F --text-field T for a headed CSV, or "
            f"--skip-header-lines {first[-1][0]} to read the other lines as texts")
    first += itertools.islice(lines, max(0, _TEXT_SHAPE_LINES - len(first)))
    if first and all(_is_json_object(line) for _, line in first):
        raise InputFormatError(f"{path}:{first[0][0]}: the first lines are JSON objects, not "
                               "text" + _JSONL_HINT)
    for lineno, line in itertools.chain(first, lines):
        yield f"{path}:{lineno}", line


def _msnbc_stream(path: str, stream):
    """The .seq member of a zipped MSNBC file, or the stream itself."""
    if not uncompressed_name(path).endswith(".zip"):
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


def parse_msnbc(path: str, stream, ids: bool = True) -> Iterator[tuple[str, tuple] | list]:
    """The UCI MSNBC sequence file (zipped or not) → (``path:line``, page categories), or
    without ``ids`` each line's categories; the header (``%`` lines, blank lines) is skipped."""
    in_header, seen_data = True, False
    for lineno, line in decoded_lines(path, _msnbc_stream(path, stream), keep_ends=False):
        if in_header:
            if lineno > 1 or line.startswith("%"):
                in_header = not line.startswith("% Sequences")
                continue
            in_header = False
        categories = line.split()
        if not categories:
            if not seen_data:  # the blank line(s) between header and data
                continue
            raise InputFormatError(f"{path}:{lineno}: empty visit sequence")
        digits = "".join(categories)
        if not (digits.isascii() and digits.isdigit()):
            hint = (_JSONL_HINT if line.lstrip().startswith("{") else
                    "; the file looks like CSV: give --format csv" if "," in line else
                    "; is --format right?")
            raise InputFormatError(f"{path}:{lineno}: not an MSNBC visit sequence (page "
                                   f"category numbers separated by spaces){hint}")
        seen_data = True
        yield (f"{path}:{lineno}", tuple(categories)) if ids else categories


def record_parser(fmt: str, user_field: str | None = None, text_field: str | None = None,
                  skip_header_lines: int = 0) -> Callable[..., Iterator]:
    """(path, binary stream) → records, for ``fmt``."""
    if fmt in ("csv", "jsonl"):
        if not user_field or not text_field:
            raise ValueError(f"--format {fmt} needs --user-field and --text-field")
        return functools.partial(parse_csv if fmt == "csv" else parse_jsonl,
                                 user_field=user_field, text_field=text_field)
    if fmt in ("text", "pairs"):
        return functools.partial(parse_text if fmt == "text" else parse_pairs,
                                 skip_header_lines=skip_header_lines)
    if fmt == "msnbc":
        return parse_msnbc
    raise ValueError(f"unknown format {fmt!r}; choose one of "
                     f"{sorted(set(FORMATS) | set(DOCUMENT_FORMATS))}")
