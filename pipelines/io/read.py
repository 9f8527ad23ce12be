"""The Beam transforms the jobs read their input with: ``ReadUserItems`` (what
``SelectItems`` takes), ``ReadPairs`` (one (user, item) pair per occurrence),
``ReadDocuments`` (token sequences, for n-grams) and ``ReadUserTexts`` (untokenised
texts). Each matched file is parsed whole by one worker (see :mod:`pipelines.io`)."""

from __future__ import annotations

import functools
import logging
from typing import Sequence

import apache_beam as beam
from apache_beam.io import fileio
from apache_beam.io.filesystem import CompressionTypes

from beam_dpsu.core.tokenizer import Tokenizer
from beam_dpsu.core.checks import plural
from pipelines.io.checks import as_listed
from pipelines.io.decompression import corruption_checked, open_input
from pipelines.io.formats import DOCUMENT_FORMATS, FORMATS
from pipelines.io.parquet import ParquetFields, ReadParquetRecords
from pipelines.io.parsers import parse_msnbc, record_parser
from beam_dpsu.beam.output_types import opaque_output

__all__ = ["ReadUserTexts", "ReadPairs", "ReadUserItems", "ReadDocuments", "items_of"]

_LOG = logging.getLogger("pipelines")


@opaque_output
class _ParseFileFn(beam.DoFn):
    """Parses one matched file into records, logging it (and its record count: raw)."""

    def __init__(self, parse, files: Sequence[str] | None, log_records: bool):
        self._parse, self._log_records = parse, log_records
        self._index = {p: i for i, p in enumerate(files or (), start=1)}
        self._total = len(files or ())

    def process(self, readable_file):
        path = readable_file.metadata.path
        i = self._index.get(path)
        _LOG.info(f"reading {path}" + (f" (file {i} of {self._total})" if i else ""))
        stream = open_input(path, readable_file.open(
            compression_type=CompressionTypes.UNCOMPRESSED))
        n = 0
        try:
            records = corruption_checked(stream, self._parse(path, stream))
            # B007: n is read after the loop (the number of records).
            for n, record in enumerate(records, start=1):  # noqa: B007
                yield record
        finally:
            stream.close()
        if self._log_records:
            _LOG.info(f"read {plural(n, 'record')} from {path} (non-private count)")


@beam.ptransform_fn
def _ReadFiles(pbegin, pattern: str, parse, files=None, log_records: bool = False):
    """Matches ``pattern`` and parses each file with ``parse(path, binary stream)``."""
    return (pbegin
            | "MatchFiles" >> fileio.MatchFiles(as_listed(pattern))
            | "ReadMatches" >> fileio.ReadMatches()
            | "ParseRecords" >> beam.ParDo(_ParseFileFn(parse, files, log_records)))


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
        self._read = _ReadFiles(pattern, record_parser(fmt, user_field, text_field,
                                                       skip_header_lines), files, log_records)

    def expand(self, pbegin):
        return pbegin | "ReadFiles" >> self._read


def items_of(value) -> list:
    """The items in field 1 of what ``ReadUserItems`` gives: a pairs line's or a row's."""
    return [value] if isinstance(value, (str, bytes)) else list(value)


class _ReadInput(beam.PTransform):
    """What ``ReadUserItems`` and ``ReadDocuments`` share: the flags, checked."""

    _FORMATS: Sequence[str] = FORMATS
    _KIND = ""  # in the unknown-format error

    def __init__(self, pattern: str, fmt: str, user_field: str | None = None,
                 text_field: str | None = None, tokenizer: Tokenizer = Tokenizer(),
                 skip_header_lines: int = 0, files=None, log_records: bool = False,
                 items_field: str | None = None):
        super().__init__()
        if fmt not in self._FORMATS:
            raise ValueError(f"unknown {self._KIND}format {fmt!r}; choose one of "
                             f"{list(self._FORMATS)}")
        if items_field is not None and fmt != "parquet":
            raise ValueError(f"an items field applies to the parquet format only, not {fmt!r}")
        self._parquet = (ParquetFields(user_field or "", text_field, items_field)
                         if fmt == "parquet" else None)
        self._pattern, self._fmt = pattern, fmt
        self._user_field, self._text_field = user_field, text_field
        self._tokenizer, self._skip = tokenizer, skip_header_lines
        self._files, self._log_records = files, log_records

    def _read_parquet(self):
        return ReadParquetRecords(self._pattern, self._parquet, self._tokenizer,
                                  self._log_records, files=self._files)

    def _read_texts(self):
        return ReadUserTexts(self._pattern, self._fmt, self._user_field, self._text_field,
                             self._skip, self._files, self._log_records)


class ReadUserItems(_ReadInput):
    """Files of any format → what ``SelectItems`` takes, in its most compact form.

    Text formats and ``parquet``: one ``(user, tokens)`` record per row or line
    (a Parquet ``items_field`` as is); ``pairs``: one ``(user, item)`` pair per
    line, as written. ``SelectItems`` merges a user's records before bounding.
    """

    def expand(self, pbegin):
        if self._parquet is not None:
            return pbegin | "ReadParquet" >> self._read_parquet()
        if self._fmt == "pairs":
            return pbegin | "ReadPairFiles" >> _ReadFiles(
                self._pattern, record_parser("pairs", skip_header_lines=self._skip),
                self._files, self._log_records)
        tokenizer = self._tokenizer
        return (pbegin | "ReadUserTexts" >> self._read_texts()
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


class ReadDocuments(_ReadInput):
    """Files → (user, tokens) documents, for n-gram extraction.

    Texts are tokenised with ``tokenizer``; ``msnbc`` is the UCI sequence file, one
    user per line. With ``as_elements`` each record is only its tokens, no user id
    made (what ``ExtractNgrams(privacy_unit="element")`` takes).
    """

    _FORMATS = DOCUMENT_FORMATS
    _KIND = "document "

    def __init__(self, pattern: str, fmt: str, user_field: str | None = None,
                 text_field: str | None = None, tokenizer: Tokenizer = Tokenizer(),
                 skip_header_lines: int = 0, files=None, log_records: bool = False,
                 as_elements: bool = False, items_field: str | None = None):
        super().__init__(pattern, fmt, user_field, text_field, tokenizer, skip_header_lines,
                         files, log_records, items_field)
        self._as_elements = as_elements

    def expand(self, pbegin):
        if self._fmt == "msnbc":
            parse = functools.partial(parse_msnbc, ids=not self._as_elements)
            return pbegin | "ReadMsnbc" >> _ReadFiles(self._pattern, parse, self._files,
                                                      self._log_records)
        if self._parquet is not None:
            as_document = ((lambda record: record[1]) if self._as_elements
                           else (lambda record: (record[0], tuple(record[1]))))
            return (pbegin | "ReadParquet" >> self._read_parquet()
                    | "AsDocuments" >> beam.Map(as_document))
        tokenizer = self._tokenizer
        tokenize = ((lambda record: tokenizer(record[1])) if self._as_elements
                    else (lambda record: (record[0], tuple(tokenizer(record[1])))))
        return pbegin | "ReadUserTexts" >> self._read_texts() | "Tokenize" >> beam.Map(tokenize)
