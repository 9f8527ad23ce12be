"""A file's bytes, decompressed by its extension and read whole or not at all
(:func:`open_input`): a truncated, corrupt or empty compressed file is an
``InputFormatError`` naming it, never a shorter read. Why neither Beam's nor the
standard library's readers do: docs/explanation/reading.md#decompression.
"""

from __future__ import annotations

import bz2
import contextlib
import io
import lzma
import zlib
from typing import Any, Iterable, Iterator

from apache_beam.io.filesystem import CompressionTypes
from apache_beam.io.filesystems import FileSystems

from pipelines.io.errors import InputFormatError, error_kind

try:  # what Beam reads .zst with; without it .zst files are refused, not misread
    import zstandard
except ImportError:  # pragma: no cover - an apache-beam dependency
    zstandard = None  # type: ignore[assignment]  # a module or None: checked before use

__all__ = ["READ_SIZE", "open_input", "corruption_first", "corruption_checked"]

# Compressed bytes read from a file at a time; also the most one read asks a
# decompressor for, so memory stays bounded whatever the compression ratio.
READ_SIZE = 1 << 20

_COMPRESSION_NAMES = {CompressionTypes.GZIP: "gzip", CompressionTypes.BZIP2: "bzip2",
                      CompressionTypes.DEFLATE: "deflate (zlib)", CompressionTypes.ZSTD: "zstd",
                      CompressionTypes.LZMA: "xz/lzma"}


class _ZlibMember:
    """A zlib decompressor with the ``needs_input`` protocol of ``bz2``/``lzma``'s."""

    def __init__(self, wbits: int):
        self._zlib = zlib.decompressobj(wbits)
        self.needs_input = True

    def __getattr__(self, name):  # eof, unused_data: zlib's own
        return getattr(self._zlib, name)

    def decompress(self, data: bytes, max_length: int) -> bytes:
        out = self._zlib.decompress(self._zlib.unconsumed_tail + data, max_length)
        # Input left over, or a full buffer (zlib may hold more): call again with b"".
        self.needs_input = not self._zlib.unconsumed_tail and len(out) < max_length
        return out


class _ZstdMember:
    """A zstd frame decompressor with that protocol, fed 64 KiB at a time (no ``max_length``)."""

    _FEED = 1 << 16

    def __init__(self):
        # Beam's own window limit (2 GiB) for files it writes and reads.
        self._zstd = zstandard.ZstdDecompressor(max_window_size=1 << 31).decompressobj()
        self._input, self._fed = b"", 0  # input given, and how much of it was fed
        self.needs_input = True

    def decompress(self, data: bytes, max_length: int) -> bytes:
        if data:
            self._input, self._fed = self._input[self._fed:] + data, 0
        feed = self._input[self._fed:self._fed + self._FEED]
        self._fed += len(feed)
        out = self._zstd.decompress(feed) if feed else b""
        self.needs_input = self._fed >= len(self._input)
        return out

    def __getattr__(self, name):  # eof: zstandard's own
        return getattr(self._zstd, name)

    @property
    def unused_data(self) -> bytes:
        return self._zstd.unused_data + self._input[self._fed:]


_DECOMPRESSORS = {
    CompressionTypes.GZIP: lambda: _ZlibMember(zlib.MAX_WBITS | 16),
    CompressionTypes.DEFLATE: lambda: _ZlibMember(zlib.MAX_WBITS),
    CompressionTypes.BZIP2: bz2.BZ2Decompressor,
    CompressionTypes.LZMA: lzma.LZMADecompressor,  # FORMAT_AUTO: .xz and .lzma alike
}
if zstandard is not None:
    _DECOMPRESSORS[CompressionTypes.ZSTD] = _ZstdMember


class _WholeDecompression(io.RawIOBase):
    """A file's decompressed bytes to its last member's end-of-stream marker, or an error."""

    def __init__(self, path: str, raw, compression: str):
        super().__init__()
        self._path, self._raw = path, raw
        self._name = _COMPRESSION_NAMES[compression]
        self._new_member = _DECOMPRESSORS[compression]
        self._member: Any = None  # the decompressor of the member being read, None between
        self._input = b""  # compressed bytes read, not yet given to a decompressor
        self._members = 0
        self._output = memoryview(b"")  # decompressed bytes not yet returned
        self.error: InputFormatError | None = None  # raised once, raised again by every read

    def readable(self):
        return True

    def _read_raw(self) -> bytes:
        try:
            return self._raw.read(READ_SIZE)
        except Exception as exc:  # noqa: BLE001 - OSError and the filesystems' own errors
            raise InputFormatError(f"{self._path}: cannot be read ({error_kind(exc)})") \
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
            member, data = self._member, b""
            if member.needs_input:
                data, self._input = self._input or self._read_raw(), b""
                if not data:
                    raise InputFormatError(
                        f"{self._path}: the {self._name} data is truncated: the file ends "
                        "before its end-of-stream marker (cut short in a copy or download?)")
            try:
                out = member.decompress(data, READ_SIZE)
            except Exception as exc:  # noqa: BLE001 - zlib.error, OSError, LZMAError, ZstdError
                where = " after its first stream" if self._members > 1 else ""
                raise InputFormatError(
                    f"{self._path}: cannot be decompressed as {self._name}{where} "
                    f"({error_kind(exc)}); is it corrupt or misnamed?") from None
            if member.eof:
                self._input, self._member = member.unused_data, None
            if out:
                return out

    def readinto(self, buffer):
        if self.error is not None:
            raise self.error
        if not self._output:
            try:
                self._output = memoryview(self._decompress())
            except InputFormatError as exc:
                self.error = exc
                raise
        n = min(len(buffer), len(self._output))
        buffer[:n] = self._output[:n]
        self._output = self._output[n:]
        return n

    def close(self):
        self._raw.close()
        super().close()


def open_input(path: str, raw=None):
    """A binary stream of ``path``'s contents, decompressed by its extension; ``raw``: the
    file opened without decompression (default: with Beam's filesystems)."""
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


def corruption_first(stream, error: InputFormatError) -> InputFormatError:
    """The error to report when parsing ``stream`` raised ``error``: the decompressor's own
    on reading the rest, if any (garbage may fail a parser before the checksum), else it."""
    if not isinstance(stream, _WholeDecompression):
        return error
    with contextlib.suppress(InputFormatError):
        while stream.read(READ_SIZE):
            pass
    return stream.error or error


def corruption_checked(stream, records: Iterable) -> Iterator:
    """``records``, parsed from ``stream``; a parse error raised as ``corruption_first``
    reports it (the stream's own error when the stream is corrupt)."""
    try:
        yield from records
    except InputFormatError as exc:
        raise corruption_first(stream, exc) from None
