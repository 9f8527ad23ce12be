"""Parquet inputs: the columns read (:class:`ParquetFields`), footers checked first
(:func:`inspect_parquet`), rows read with Beam's source (:class:`ReadParquetRecords`)."""

from __future__ import annotations

import dataclasses
import difflib
import functools
import logging
import os
import typing
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Iterator, Sequence

import apache_beam as beam
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems
from apache_beam.io.parquetio import ReadAllFromParquetBatched

from beam_dpsu.core.tokenizer import Tokenizer
from beam_dpsu.core.checks import plural
from pipelines.io.checks import as_listed
from pipelines.io.errors import InputFormatError, error_kind
from pipelines.io.formats import ROW_AS_USER

__all__ = ["PARQUET_READ_STEP", "ParquetFields", "inspect_parquet", "parquet_read_error",
           "ReadParquetRecords"]

_LOG = logging.getLogger("pipelines")

# What each role's column must hold, as errors name it.
_PARQUET_EXPECTED = {"user": "a string, integer or binary column",
                     "text": "a string column", "items": "a list of strings"}
_PARQUET_FLAGS = {"user": "--user-field", "text": "--text-field", "items": "--items-field"}

_FOOTER_READERS = 16  # footers read at once (remote stores answer slowly)

# The label of the step that reads Parquet row groups: a failure inside it
# (Beam's reader raises pyarrow's own errors) is recognised by it.
PARQUET_READ_STEP = "ReadParquetRowGroups"


def _is_text_type(arrow_type: pa.DataType) -> bool:
    return pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type)


# The Arrow types each role's column may have (a dictionary's: its values' type).
_FITS = {"user": lambda t: (_is_text_type(t) or pa.types.is_integer(t) or pa.types.is_binary(t)
                            or pa.types.is_large_binary(t)),
         "text": _is_text_type,
         "items": lambda t: ((pa.types.is_list(t) or pa.types.is_large_list(t))
                             and _is_text_type(t.value_type))}


@dataclasses.dataclass(frozen=True)
class ParquetFields:
    """The columns a Parquet input is read from: ``user`` (or ``"@row"``: each row its own
    user) and either ``text`` (tokenised) or ``items`` (a list of strings, used as is).

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
        """(role, column) of each column read: ``user`` (unless ``@row``), then the value's."""
        value = ("text", self.value) if self.text else ("items", self.value)
        return ([] if self.user == ROW_AS_USER else [("user", self.user)]) + [value]

    @property
    def columns(self) -> list[str]:
        """The columns read (no other column leaves the file)."""
        return [column for _, column in self.roles]

    def check_schema(self, path: str, schema: pa.Schema) -> None:
        """Raises ``InputFormatError`` when a column is missing or of the wrong type."""
        for role, column in self.roles:
            flag = _PARQUET_FLAGS[role]
            if column not in schema.names:
                close = difflib.get_close_matches(column, schema.names, n=1)
                hint = f"; did you mean {close[0]!r}?" if close else "; is the column name right?"
                raise InputFormatError(f"{path}: no column {column!r} ({flag}), expected "
                                       f"{_PARQUET_EXPECTED[role]}{hint}")
            if len(schema.get_all_field_indices(column)) > 1:
                raise InputFormatError(f"{path}: more than one column is named {column!r} "
                                       f"({flag}); which one to read is ambiguous")
            arrow_type = schema.field(column).type
            # pandas categoricals are dictionaries: their values' type is what is read.
            if not _FITS[role](arrow_type.value_type if pa.types.is_dictionary(arrow_type)
                               else arrow_type):
                raise InputFormatError(f"{path}: column {column!r} ({flag}) is of type "
                                       f"{arrow_type}, expected {_PARQUET_EXPECTED[role]}")

    def check_footer_nulls(self, path: str, metadata: pq.FileMetaData) -> None:
        """Raises when the footer counts a null in a user or text column (lists: as read)."""
        first_row = 1
        for group in range(metadata.num_row_groups):
            row_group = metadata.row_group(group)
            for chunk in (row_group.column(c) for c in range(row_group.num_columns)):
                stats = chunk.statistics
                for role, column in self.roles:
                    if (role != "items" and chunk.path_in_schema == column and stats is not None
                            and stats.has_null_count and stats.null_count):
                        rows = f"rows {first_row}–{first_row + row_group.num_rows - 1}"
                        raise _parquet_null(path, role, column, f"{rows} (row group {group + 1})")
            first_row += row_group.num_rows

    def check_values(self, path: str, table: pa.Table) -> None:
        """Raises on a null, an empty or blank user id, a binary id not UTF-8, an empty item
        or a NUL character in ``table`` (one row group of ``path``: the error names the
        file and the column, Beam's reader does not say which group)."""
        for role, column in self.roles:
            values = _plain(table.column(column))
            if values.null_count:
                raise _parquet_null(path, role, column)
            holds = f"{path}: column {column!r} ({_PARQUET_FLAGS[role]}) holds "
            try:  # Arrow trusts the file: a string column may hold invalid UTF-8
                values.validate(full=True)
            except pa.ArrowInvalid:
                raise InputFormatError(holds + "text that is not valid UTF-8 (another "
                                       "encoding, or a corrupt file?)") from None
            if role == "items":
                values = pc.list_flatten(values)
                if values.null_count:
                    raise InputFormatError(holds + "a list with a null item")
                if _any(lambda v: pc.equal(pc.binary_length(v), 0), values):
                    raise InputFormatError(holds + "an empty item")
            elif role == "user" and not pa.types.is_integer(values.type):
                binary = not _is_text_type(values.type)
                # A binary id is read as its text, so it is checked as text is: bytes that
                # are not UTF-8 spell no text (docs/explanation/reading.md#parquet).
                try:
                    ids = _decoded(values) if binary else values
                except pa.ArrowInvalid:
                    raise InputFormatError(holds + "a binary user id that is not UTF-8 (ids "
                                           "are read as their UTF-8 text; another encoding, "
                                           "or not text?)") from None
                if _any(lambda v: pc.equal(pc.binary_length(v), 0), ids):
                    raise InputFormatError(holds + "an empty user id")
                # Refused as in every format, once stripped (Arrow's utf8_is_space agrees
                # with str.isspace on every code point).
                if _any(pc.utf8_is_space, ids):
                    raise InputFormatError(holds + "a user id that is only whitespace")
                if binary and _any(lambda v: pc.match_substring(v, "\x00"), ids):
                    raise InputFormatError(holds + "a binary user id with a NUL character, "
                                           "which no text read may hold (binary data, not "
                                           "an id's text?)")
            if _is_text_type(values.type) and _any(lambda v: pc.match_substring(v, "\x00"), values):
                # As a text file's line holding a NUL byte is refused.
                raise InputFormatError(holds + "text with a NUL character (binary data in a "
                                       "string column?)")


def _plain(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """A dictionary-encoded column decoded."""
    return values.cast(values.type.value_type) if pa.types.is_dictionary(values.type) else values


def _any(test, values: pa.ChunkedArray | pa.Array) -> bool:
    return len(values) > 0 and bool(pc.any(test(values)).as_py())


def _decoded(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """A binary column cast to text (Arrow's cast checks that every value is UTF-8)."""
    return values.cast(pa.large_string() if pa.types.is_large_binary(values.type)
                       else pa.string())


def _user_ids(values: pa.ChunkedArray) -> list[str]:
    """A checked user id column as stripped str ids (integers as decimal text, bytes as UTF-8)."""
    if pa.types.is_integer(values.type):
        return values.cast(pa.string()).to_pylist()
    if not _is_text_type(values.type):
        values = _decoded(values)
    return pc.utf8_trim_whitespace(values).to_pylist()


def _parquet_null(path: str, role: str, column: str, rows: str = "") -> InputFormatError:
    where = f"{path}: {rows}: " if rows else f"{path}: "
    what = {"user": "a user id", "text": "a text (an empty string for none)",
            "items": "a list of items (an empty list for none)"}[role]
    return InputFormatError(f"{where}column {column!r} ({_PARQUET_FLAGS[role]}) holds a null "
                            f"(missing) value; every row needs {what}")


def _parquet_footer_rows(path: str, fields: ParquetFields) -> int:
    """Checks one file's footer (see :func:`inspect_parquet`); its number of rows."""
    if CompressionTypes.detect_compression_type(path) != CompressionTypes.UNCOMPRESSED:
        raise InputFormatError(
            f"{path}: a Parquet file is read as it is (its columns are compressed inside): "
            "decompress it, or drop the compression suffix from its name")
    try:
        with FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED) as f:
            metadata = pq.read_metadata(f)
    except Exception as exc:  # noqa: BLE001 - ArrowInvalid, OSError, the filesystems' own
        raise InputFormatError(f"{path}: not a readable Parquet file ({error_kind(exc)}): "
                               "is it cut short, corrupt, or not Parquet?") from None
    fields.check_schema(path, metadata.schema.to_arrow_schema())
    fields.check_footer_nulls(path, metadata)
    return metadata.num_rows


def inspect_parquet(files: Sequence[str], fields: ParquetFields) -> None:
    """Reads the footer of every file before a pipeline is built; raises
    ``InputFormatError`` naming the file when one is not Parquet, lacks a column or has
    one of the wrong type, counts a null in a column read, or when no file holds a row."""
    with ThreadPoolExecutor(max_workers=_FOOTER_READERS) as pool:
        rows = sum(pool.map(functools.partial(_parquet_footer_rows, fields=fields), files))
    if not rows:
        what = (f"{files[0]} has" if len(files) == 1
                else f"all {len(files)} files ({os.path.dirname(files[0])}/…) have")
        raise InputFormatError(f"no records in the input: {what} no rows")


def parquet_read_error(exc: BaseException) -> str | None:
    """The one-line message of a failure inside Beam's Parquet reader, or None; only the
    error's type is kept (its text might quote bytes of the file)."""
    if f"{PARQUET_READ_STEP}/" not in str(exc):
        return None
    return (f"a Parquet input file cannot be read ({error_kind(exc)} in Beam's Parquet "
            "reader, which does not name the file): is one corrupt, or was it changed "
            "since the job checked its footer?")


class _ParquetRowsFn(beam.DoFn):
    """(path, one row group as a table) → (user, text or items) per row."""

    def __init__(self, fields: ParquetFields, log_records: bool):
        self._fields, self._log_records = fields, log_records

    def process(self, path_and_table: tuple[str, pa.Table]) -> Iterator[tuple]:
        path, table = path_and_table
        fields = self._fields
        # A column missing from this file reads as nothing: checked again here.
        fields.check_schema(path, table.schema)
        fields.check_values(path, table)
        values = _plain(table.column(fields.value)).to_pylist()
        if fields.user == ROW_AS_USER:
            # file, row group token, index: distinct, as the element-level privacy unit needs
            group = uuid.uuid4().hex
            users: typing.Iterable = (f"{path}:{group}:{i}" for i in range(len(values)))
        else:
            # Text, as the library keys ids, so that a job's non-private user count
            # agrees with it.
            users = _user_ids(_plain(table.column(fields.user)))
        if self._log_records:
            _LOG.info(f"read {plural(len(values), 'record')} from a row group of {path} "
                      "(non-private count)")
        yield from zip(users, values)


def _still_there(path: str, checked: bool) -> str:
    """A checked file's name; raises if it is gone (Beam would read it as no rows)."""
    if checked and not FileSystems.match([path])[0].metadata_list:
        raise InputFormatError(f"{path}: the file is gone since the job checked it")
    return path


class ReadParquetRecords(beam.PTransform):
    """Parquet files → (user, tokens) records, one per row, with Beam's Parquet source.

    Only the columns ``fields`` names are read; a text column is tokenised with
    ``tokenizer``. A value ``ParquetFields.check_values`` refuses, or a file that
    lacks a column, fails the pipeline with an ``InputFormatError``.
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
                   | "Pattern" >> beam.Create(self._files or [as_listed(self._pattern)])
                   | "StillThere" >> beam.Map(_still_there, bool(self._files))
                   | PARQUET_READ_STEP >> ReadAllFromParquetBatched(
                       columns=self._fields.columns, with_filename=True)
                   | "Rows" >> beam.ParDo(_ParquetRowsFn(self._fields, self._log_records)))
        if self._fields.items is not None:
            return records
        tokenizer = self._tokenizer
        return records | "Tokenize" >> beam.MapTuple(lambda user, text: (user, tokenizer(text)))
