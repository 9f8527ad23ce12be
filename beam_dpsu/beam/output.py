r"""Writing a released set so that nothing but the set leaves (docs/privacy.md, invariant 6).

``WriteReleased`` shards elements by a stable hash of their sort key and writes each
shard sorted, as one file (empty ones too): the same set gives byte-identical files
whatever the runner. One item per line, line breaks escaped reversibly (``unescape``);
``format="parquet"``: the same shards and order under ``parquet_schema``.

Details: docs/explanation/proofs.md#writing-a-release.
"""

from __future__ import annotations

import functools
import numbers
import operator
import re
import uuid
from typing import Any, Callable, Iterable, Tuple

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from beam_dpsu.core import checks
from beam_dpsu.core.checks import ParameterError, a_type
from beam_dpsu.core.hashing import stable_hash64
from beam_dpsu.beam.input_types import RELEASED, ReadsContainers
from beam_dpsu.beam.windowing import require_global_window
from beam_dpsu.beam.output_types import opaque_output

__all__ = ["release_order", "format_released", "format_count_line", "unescape",
           "parse_count_line", "read_released", "read_counts", "shard_path", "WriteReleased",
           "FORMATS", "parquet_schema", "WriteReleasedCounts"]

FORMATS = ("text", "parquet")  # WriteReleased(format=…)
_SUFFIXES = {"text": ".txt", "parquet": ".parquet"}
# Parquet: fixed, so that the bytes depend on the released set alone.
_PARQUET_COMPRESSION = "snappy"

# Every character str.splitlines() breaks a line at (tests/test_output.py checks
# the list against splitlines itself), then lone surrogates, which UTF-8 cannot
# hold: each as \uXXXX, except the two a reader knows best.
_LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
_CHARACTER_ESCAPES = {
    **{chr(c): f"\\u{c:04x}" for c in (*map(ord, _LINE_BREAKS), *range(0xD800, 0xE000))},
    "\n": "\\n", "\r": "\\r"}
# Bytes have the backslash doubled before decoding (which writes invalid bytes
# as \xNN), and decoded UTF-8 holds no surrogates.
_DECODED_BYTES_ESCAPES = str.maketrans(_CHARACTER_ESCAPES)
_ESCAPES = str.maketrans({"\\": "\\\\", **_CHARACTER_ESCAPES})
_SINGLE_ESCAPES = {"\\": "\\", "n": "\n", "r": "\r", "t": "\t"}
_ESCAPE = re.compile(r"\\(u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|.|$)", re.S)


def release_order(value: Any):
    """A total order on str, bytes and tuples of them: str, then bytes, then tuples.

    Anything else is refused: its order (or repr) may differ between processes.
    """
    if isinstance(value, str):
        return (0, value)
    if isinstance(value, bytes):
        return (1, value)
    if isinstance(value, tuple):
        return (2, tuple(release_order(v) for v in value))
    raise TypeError(f"released items must be str, bytes or tuples of them, got "
                    f"{a_type(value)}; pass sort_key to WriteReleased")


def format_released(value: Any) -> str:
    """The line of a released item (see the module docstring for the escaping)."""
    if isinstance(value, bytes):
        # Escape first, then decode: invalid bytes become \xNN, which no
        # escaped backslash can imitate.
        return value.replace(b"\\", b"\\\\").decode("utf-8", "backslashreplace").translate(
            _DECODED_BYTES_ESCAPES)
    if isinstance(value, tuple):
        return " ".join(format_released(v) for v in value)
    return (value if isinstance(value, str) else str(value)).translate(_ESCAPES)


def format_count_line(item_count) -> str:
    """``item<TAB>count``: the item's line with a tab written ``\\t``."""
    item, count = item_count
    return format_released(item).replace("\t", "\\t") + "\t" + str(count)


def unescape(line: str, as_bytes: bool = False) -> str | bytes:
    """The item a line of ``format_released`` stands for (without its newline).

    An n-gram line is its tokens joined by a space: unescape each of
    ``line.split(" ")``.

    Args:
      line: one line of a release, without its newline.
      as_bytes: decode to ``bytes`` (``\\xNN`` a raw byte, the rest UTF-8).

    Returns:
      The item.

    Raises:
      ValueError: the line holds an escape ``format_released`` never writes.
    """
    if "\\" not in line:
        return line.encode("utf-8") if as_bytes else line
    parts: list = _ESCAPE.split(line)  # text, escape code, text, …
    parts[1::2] = [_unescaped(code, as_bytes) for code in parts[1::2]]
    if as_bytes:
        return b"".join(p if isinstance(p, bytes) else p.encode("utf-8") for p in parts)
    return "".join(parts)


def _unescaped(code: str, as_bytes: bool) -> str | bytes:
    if code in _SINGLE_ESCAPES:
        return _SINGLE_ESCAPES[code]
    if len(code) == 5:  # uXXXX
        return chr(int(code[1:], 16))
    if len(code) == 3:  # xNN
        if not as_bytes:
            raise ValueError("\\xNN is a raw byte of a bytes item: unescape with as_bytes=True")
        return bytes([int(code[1:], 16)])
    raise ValueError(f"not a line written by format_released: unknown escape "
                     f"{'a trailing backslash' if not code else repr(chr(92) + code)}")


def parse_count_line(line: str, as_bytes: bool = False, ngrams: bool = False) -> tuple:
    """``(item, count)`` of a ``format_count_line`` line (see ``read_released``)."""
    item, tab, count = line.rstrip("\r\n").rpartition("\t")
    if not tab:
        raise ValueError("not a line written by format_count_line: no tab")
    return _item(item, as_bytes, ngrams), int(count)


def _item(line: str, as_bytes: bool, ngrams: bool):
    if ngrams:
        return tuple(unescape(token, as_bytes) for token in line.split(" "))
    return unescape(line, as_bytes)


def _lines(source: str | Iterable[str]):
    """The lines of every file ``source`` matches (any Beam filesystem), or of ``source``."""
    if not isinstance(source, str):
        yield from (line.rstrip("\r\n") for line in source)
        return
    paths = sorted(m.path for r in FileSystems.match([source]) for m in r.metadata_list)
    if not paths:
        raise ValueError(f"no file matches {source}")
    for path in paths:
        with FileSystems.open(path) as handle:
            # Lines end in \n only: every other line break is escaped.
            yield from handle.read().decode("utf-8").split("\n")[:-1]


def read_released(source: str | Iterable[str], *, as_bytes: bool = False,
                  ngrams: bool = False) -> list:
    """The items of a release written by ``WriteReleased``, unescaped.

    Args:
      source: a path or glob (``"out/items-*.txt"``, any Beam filesystem), or the lines.
      as_bytes: items are ``bytes``.
      ngrams: each line is an n-gram: give it as a tuple of tokens.

    Returns:
      The items, file by file (sorted by path), line by line.

    Raises:
      ValueError: no file matches ``source``, or a line holds an unknown escape.
    """
    return [_item(line, as_bytes, ngrams) for line in _lines(source)]


def read_counts(source: str | Iterable[str], *, as_bytes: bool = False,
                ngrams: bool = False) -> list:
    """``(item, count)`` pairs of a counts TSV (``counts-*.tsv``), unescaped.

    Args:
      source: a path or glob, or the lines themselves.
      as_bytes: items are ``bytes``.
      ngrams: each item is an n-gram: give it as a tuple of tokens.

    Returns:
      The ``(item, count)`` pairs, count an ``int``.

    Raises:
      ValueError: no file matches ``source``, or a line is not ``item<TAB>count``.
    """
    return [parse_count_line(line, as_bytes, ngrams) for line in _lines(source)]


def _item_types(value: Any) -> set:
    """The types (``str``, ``bytes``) of an item's text: its own, or its tokens'."""
    if isinstance(value, tuple):
        return set().union(*map(_item_types, value))
    return {kind for kind in (str, bytes) if isinstance(value, kind)}


def shard_path(file_path_prefix: str, shard: int, num_shards: int, suffix: str) -> str:
    """``prefix-SSSSS-of-NNNNN suffix``, Beam's default shard name template."""
    return f"{file_path_prefix}-{shard:05d}-of-{num_shards:05d}{suffix}"


@opaque_output
class _WriteShardFn(beam.DoFn):
    """Sorts one shard's elements and writes them, ``encode``d, as one file; yields its path."""

    def __init__(self, file_path_prefix, suffix, num_shards, sort_key, encode):
        self._prefix, self._suffix, self._num_shards = file_path_prefix, suffix, num_shards
        self._sort_key, self._encode = sort_key, encode

    def process(self, shard_elements, item_types=frozenset()):
        if len(item_types) > 1:  # every shard refuses, before writing anything
            raise ValueError("the released set holds both str and bytes items, which one "
                             "release cannot hold: a str item and a bytes item of the same text "
                             "would be the same line (or value); release one type per set: "
                             "decode the bytes items (or encode the str ones) before selecting")
        shard, grouped = shard_elements
        elements = sorted(grouped["elements"], key=lambda e: release_order(self._sort_key(e)))
        content = self._encode(elements)
        path = shard_path(self._prefix, shard, self._num_shards, self._suffix)
        # FileSystems infers compression from the suffix (.gz, .bz2, …); the
        # temporary name keeps it.
        temporary = f"{self._prefix}.tmp-{uuid.uuid4().hex}-{shard:05d}{self._suffix}"
        with FileSystems.create(temporary) as handle:
            handle.write(content)
        FileSystems.rename([temporary], [path])
        yield path


def _text_bytes(elements: list, format_line: Callable[[Any], str]) -> bytes:
    text = "".join(format_line(e) + "\n" for e in elements)
    return text.encode("utf-8", "backslashreplace")  # lone surrogates escaped, not fatal


def parquet_schema(ngrams: bool = False, as_bytes: bool = False, counts: bool = False):
    """The ``pyarrow.Schema`` of a Parquet release.

    Args:
      ngrams: items are n-grams: a list column ``ngram`` of their tokens.
      as_bytes: items (tokens) are ``bytes``: binary, not string.
      counts: add the int64 column ``count`` (``WriteReleasedCounts``).

    Returns:
      ``item: string`` (or ``binary``), or ``ngram: list<string>`` (or
      ``list<binary>``), then ``count: int64`` for counts; no column nullable.
    """
    import pyarrow as pa
    value = pa.binary() if as_bytes else pa.string()
    fields = [pa.field("ngram", pa.list_(pa.field("element", value, nullable=False)),
                       nullable=False) if ngrams else pa.field("item", value, nullable=False)]
    if counts:
        fields.append(pa.field("count", pa.int64(), nullable=False))
    return pa.schema(fields)


def _parquet_value(value: Any, as_bytes: bool) -> str | bytes:
    """An item (or token) as its column holds it; refuses the other type."""
    if as_bytes:
        if not isinstance(value, bytes):
            raise TypeError(f"a Parquet release with as_bytes=True holds bytes items, got "
                            f"{a_type(value)}")
        return value
    if not isinstance(value, str):
        raise TypeError(f"a Parquet release holds str items, got {a_type(value)}"
                        + (": pass as_bytes=True" if isinstance(value, bytes) else ""))
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("a str item holds a lone surrogate, which a Parquet string column "
                         "(UTF-8) cannot hold: write it as text, or release bytes") from None
    return value


def _parquet_bytes(elements: list, ngrams: bool, as_bytes: bool, counts: bool) -> bytes:
    """One Parquet file of ``parquet_schema(ngrams, as_bytes, counts)``."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    schema = parquet_schema(ngrams, as_bytes, counts)
    items = [e[0] for e in elements] if counts else elements
    columns: list[list] = [
        [[_parquet_value(token, as_bytes) for token in _tokens(item)] for item in items] if ngrams
        else [_parquet_value(item, as_bytes) for item in items]]
    if counts:
        columns.append([_count(e[1]) for e in elements])
    table = pa.Table.from_arrays(
        [pa.array(c, type=f.type) for c, f in zip(columns, schema)], schema=schema)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression=_PARQUET_COMPRESSION)
    return sink.getvalue().to_pybytes()


def _tokens(item: Any) -> tuple:
    if not isinstance(item, tuple):
        raise TypeError(f"an n-gram release (ngrams=True) holds tuples of tokens, got "
                        f"{a_type(item)}")
    return item


def _count(count: Any) -> int:
    if isinstance(count, bool) or not isinstance(count, numbers.Integral):
        raise TypeError(f"a count must be an int, got {a_type(count)}")
    return int(count)


@beam.typehints.with_input_types(RELEASED)
class WriteReleased(ReadsContainers, beam.PTransform):
    """Writes a released set as sorted lines (or Parquet) in a data-independent set of shards.

    Use it, not ``WriteToText``, for anything derived from a release.

    Args:
      file_path_prefix: e.g. ``"out/items"``; local, ``gs://`` or any Beam filesystem.
      file_name_suffix: e.g. ``".txt.gz"`` (compressed); default ``".txt"`` or ``".parquet"``.
      num_shards: the number of files, fixed in advance (default 1).
      format_line: element → line text (default ``format_released``); text only.
      sort_key: element → what it is sorted and sharded by (default the element; for
        (item, count) pairs ``lambda kv: kv[0]``, or use ``WriteReleasedCounts``).
      format: ``"text"`` (escaped lines) or ``"parquet"`` (schema ``parquet_schema``).
      ngrams: Parquet: items are n-grams, written as a list column ``ngram``.
      as_bytes: Parquet: items are ``bytes``, written as a binary column.

    Returns the PCollection of written paths.

    Raises:
      ParameterError: a bad ``format``, or ``format_line`` with Parquet.
      ValueError: when it runs, a set mixing str and bytes items; no shard is written.
    """

    _counts = False  # WriteReleasedCounts: (item, count) pairs

    def __init__(self, file_path_prefix: str, *, file_name_suffix: str | None = None,
                 num_shards: int = 1, format_line: Callable[[Any], str] | None = None,
                 sort_key: Callable[[Any], Any] | None = None, format: str = "text",
                 ngrams: bool = False, as_bytes: bool = False):
        super().__init__()
        checks.integer("num_shards", num_shards, types=(int,))
        if format not in FORMATS:
            raise ParameterError("format", "must be 'text' or 'parquet', got "
                                           f"{checks.shown(format, names=True)}")
        if format_line is not None and format != "text":
            raise ParameterError("format_line", f"applies to format='text' only, not {format!r}")
        self._num_shards, self._sort_key = num_shards, sort_key or (lambda element: element)
        self._suffix = _SUFFIXES[format] if file_name_suffix is None else file_name_suffix
        encode = functools.partial(
            _parquet_bytes, ngrams=bool(ngrams), as_bytes=bool(as_bytes), counts=self._counts
        ) if format == "parquet" else functools.partial(
            _text_bytes, format_line=format_line or format_released)
        self._writer = _WriteShardFn(file_path_prefix, self._suffix, num_shards, self._sort_key,
                                     encode)

    def expand(self, released):
        require_global_window(released, "WriteReleased")
        num_shards, sort_key = self._num_shards, self._sort_key
        # The output type declared as Beam infers it, which saves the inference.
        by_shard = released | "AssignShard" >> beam.Map(
            lambda e: (stable_hash64(sort_key(e)) % num_shards, e)).with_output_types(
                Tuple[Any, released.element_type])
        # Every shard exists, empty or not, so the file count is fixed.
        shards = (released.pipeline
                  | "AllShards" >> beam.Create([(i, None) for i in range(num_shards)]))
        # The whole set's types, so that mixing str and bytes is refused before
        # any shard is written.
        item_types = released | "ItemTypes" >> (
            "TypesOf" >> beam.FlatMap(lambda e: _item_types(sort_key(e)))
            | "Union" >> beam.combiners.ToSet())
        return ({"shard": shards, "elements": by_shard}
                | "GroupShards" >> beam.CoGroupByKey()
                | "SortAndWriteShard" >> beam.ParDo(self._writer,
                                                    beam.pvalue.AsSingleton(item_types)))


class WriteReleasedCounts(WriteReleased):
    """Writes the noisy counts of released items in the items' order and shards.

    ``CountReleased``'s ``(item, count)`` pairs, sorted and sharded by the item alone
    (a pair lands where its item does): ``item<TAB>count`` lines, or Parquet columns.

    Args:
      file_path_prefix: e.g. ``"out/counts"``; local, ``gs://`` or any Beam filesystem.
      file_name_suffix: default ``".tsv"``, or ``".parquet"`` with ``format="parquet"``.
      num_shards: the number of files, fixed in advance (default 1).
      format: ``"text"`` or ``"parquet"``.
      ngrams: Parquet: items are n-grams, written as a list column ``ngram``.
      as_bytes: Parquet: items are ``bytes``, written as a binary column.

    Returns the PCollection of written paths.

    Raises:
      ParameterError: a bad ``format``.
    """

    _counts = True

    def __init__(self, file_path_prefix: str, *, file_name_suffix: str | None = None,
                 num_shards: int = 1, format: str = "text", ngrams: bool = False,
                 as_bytes: bool = False):
        text = format == "text"
        suffix = ".tsv" if text and file_name_suffix is None else file_name_suffix
        super().__init__(file_path_prefix, file_name_suffix=suffix, num_shards=num_shards,
                         format_line=format_count_line if text else None, format=format,
                         sort_key=operator.itemgetter(0), ngrams=ngrams, as_bytes=as_bytes)
