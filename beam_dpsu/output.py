r"""Writing a released set so that nothing but the set leaves (DESIGN §4, invariant 6).

The DP guarantee covers the released *set*. A PCollection has no order, but a
file does: written with ``WriteToText``, released items come out in the order
the runner happened to process them, which follows the input (a pairs file in
user order comes back in user order), the histogram's insertion order (a
sequential policy emits one user's items together) or the way a level was
built (DPNE's spurious k-grams would form one block after the held ones,
labelling every one of them). Any of these says more than the set.

``WriteReleased`` removes all of it: first each element is assigned a shard
by a stable, unkeyed hash of its sort key (so which file an item lands in
depends on the item alone), then every shard's elements are sorted and the
shard is written as one file. The same set gives byte-identical files
whatever the input order, bundling, runner or number of workers. Every shard
file is written, empty ones included, so the number of files says nothing
either.

Each shard is sorted in memory on one worker: raise ``num_shards`` when the
released set would not fit one worker (about 100 bytes per item in Python).
A shard is written to a temporary name and renamed, so a failed write never
leaves a partial file under the final name.

Lines: a str item is its text, bytes are decoded as UTF-8 (invalid bytes as
``\xNN``), an n-gram is its tokens joined by a space (``check_document``
refuses tokens with whitespace); a backslash is written ``\\`` and line
breaks ``\n`` / ``\r``, so one item is one line and distinct str items give
distinct lines. A set mixing str and bytes items that decode alike would
write the same line twice: release one type per set.
"""

from __future__ import annotations

import uuid
from typing import Any, Callable

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from beam_dpsu.noise import stable_hash64
from beam_dpsu.text import a_type
from beam_dpsu.windowing import require_global_window

__all__ = ["release_order", "format_released", "shard_path", "WriteReleased"]

_ESCAPES = str.maketrans({"\\": "\\\\", "\n": "\\n", "\r": "\\r"})


def release_order(value: Any):
    """A total order on released items: str, bytes and tuples of them (n-grams).

    str sorts before bytes before tuples, each in its natural order, so mixed
    collections sort without comparing unlike types. Anything else is refused:
    its order (or its repr) need not be the same in every process.
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
        escaped = value.replace(b"\\", b"\\\\").replace(b"\n", b"\\n").replace(b"\r", b"\\r")
        return escaped.decode("utf-8", "backslashreplace")
    if isinstance(value, tuple):
        return " ".join(format_released(v) for v in value)
    if not isinstance(value, str):
        value = str(value)
    return value.translate(_ESCAPES)


def shard_path(file_path_prefix: str, shard: int, num_shards: int, suffix: str) -> str:
    """``prefix-SSSSS-of-NNNNN suffix``, Beam's default shard name template."""
    return f"{file_path_prefix}-{shard:05d}-of-{num_shards:05d}{suffix}"


class _WriteShardFn(beam.DoFn):
    """Sorts one shard's elements and writes them as one file; yields its path."""

    def __init__(self, file_path_prefix, suffix, num_shards, format_line, sort_key):
        self._prefix = file_path_prefix
        self._suffix = suffix
        self._num_shards = num_shards
        self._format_line = format_line
        self._sort_key = sort_key

    def process(self, shard_elements):
        shard, grouped = shard_elements
        elements = sorted(grouped["elements"], key=lambda e: release_order(self._sort_key(e)))
        text = "".join(self._format_line(e) + "\n" for e in elements)
        path = shard_path(self._prefix, shard, self._num_shards, self._suffix)
        # FileSystems infers compression from the suffix (.gz, .bz2, …); the
        # temporary name keeps it. Lone surrogates are escaped, not fatal.
        temporary = f"{self._prefix}.tmp-{uuid.uuid4().hex}-{shard:05d}{self._suffix}"
        handle = FileSystems.create(temporary)
        try:
            handle.write(text.encode("utf-8", "backslashreplace"))
        finally:
            handle.close()
        FileSystems.rename([temporary], [path])
        yield path


class WriteReleased(beam.PTransform):
    """Writes a released set as sorted lines in a data-independent set of shards.

    Use it (not ``WriteToText``) for anything derived from a release, so that
    the files depend on the released set alone (see the module docstring).

    Args:
      file_path_prefix: e.g. ``"out/items"``; local, ``gs://`` or any Beam filesystem.
      file_name_suffix: e.g. ``".txt"`` (``".txt.gz"`` compresses).
      num_shards: the number of files, fixed in advance (default 1).
      format_line: element → line text (default ``format_released``).
      sort_key: element → what it is sorted and sharded by (default the element;
        for (item, count) pairs pass ``lambda kv: kv[0]`` so counts follow
        the items' order).

    Returns the PCollection of written paths.
    """

    def __init__(self, file_path_prefix: str, file_name_suffix: str = ".txt",
                 num_shards: int = 1, format_line: Callable[[Any], str] | None = None,
                 sort_key: Callable[[Any], Any] | None = None):
        super().__init__()
        if isinstance(num_shards, bool) or not isinstance(num_shards, int) or num_shards < 1:
            raise ValueError(f"num_shards must be an int >= 1, got {num_shards!r}")
        self._prefix = file_path_prefix
        self._suffix = file_name_suffix
        self._num_shards = num_shards
        self._format_line = format_line or format_released
        self._sort_key = sort_key or (lambda element: element)

    def expand(self, released):
        require_global_window(released, "WriteReleased")
        num_shards, sort_key = self._num_shards, self._sort_key
        # First every element goes to the shard its own sort key hashes to.
        by_shard = released | "AssignShard" >> beam.Map(
            lambda e: (stable_hash64(sort_key(e)) % num_shards, e))
        # Every shard exists, empty or not, so the file count is fixed.
        shards = (released.pipeline
                  | "AllShards" >> beam.Create([(i, None) for i in range(num_shards)]))
        # Then each shard is sorted and written as one file.
        return ({"shard": shards, "elements": by_shard}
                | "GroupShards" >> beam.CoGroupByKey()
                | "SortAndWriteShard" >> beam.ParDo(_WriteShardFn(
                    self._prefix, self._suffix, num_shards, self._format_line, sort_key)))
