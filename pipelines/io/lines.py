"""The UTF-8 lines of a binary stream, each with its true number (:func:`decoded_lines`);
a line not UTF-8 or holding a NUL byte is an ``InputFormatError`` naming it."""

from __future__ import annotations

import codecs
from typing import Iterator

from pipelines.io.decompression import READ_SIZE
from pipelines.io.errors import InputFormatError, error_kind

__all__ = ["decoded_lines"]

# Leading bytes of files that are not text, for a hint when one is read as text.
_MAGIC_HINTS = ((b"PK\x03\x04", "it is a zip archive: only --format msnbc reads zip files"),
                (b"\x1f\x8b", "it holds gzip data: name it .gz to have it decompressed"),
                (b"BZh", "it may hold bzip2 data: name it .bz2 to have it decompressed"),
                (b"\xfd7zXZ\x00", "it holds xz data: name it .xz to have it decompressed"),
                (b"\x28\xb5\x2f\xfd", "it holds zstd data: name it .zst to have it "
                                      "decompressed"),
                (b"PAR1", "it is a Parquet file: give --format parquet"))

# Byte order marks of the encodings a text file is most often saved in besides
# UTF-8, for a clear refusal (UTF-32's first: UTF-16 LE's is a prefix of its).
_OTHER_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"),
               (codecs.BOM_UTF16_LE, "UTF-16"), (codecs.BOM_UTF16_BE, "UTF-16"))


def _byte_line_blocks(path: str, stream) -> Iterator[list[bytes]]:
    """The lines of a binary stream, ends kept, in blocks of about ``READ_SIZE`` bytes
    (split as universal newlines: UTF-8 holds ``\n`` and ``\r`` only as themselves)."""
    pending: list[bytes] = []  # the start of a line not yet ended
    while True:
        try:
            chunk = stream.read(READ_SIZE)
        except InputFormatError:
            raise
        except Exception as exc:  # noqa: BLE001 - zipfile.BadZipFile (bad CRC), OSError, …
            raise InputFormatError(f"{path}: cannot be read ({error_kind(exc)}); is it "
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


def decoded_lines(path: str, stream, keep_ends: bool = True) -> Iterator[tuple[int, str]]:
    """(line number, line) for each line of a UTF-8 text stream, its end kept or stripped;
    a line not UTF-8 or holding a NUL byte raises (a failing block is searched)."""
    lineno = 0
    for block in _byte_line_blocks(path, stream):
        if lineno == 0 and block[0].startswith(codecs.BOM_UTF8):
            # UTF-8 with a byte order mark (Excel's "CSV UTF-8"): read as utf-8-sig.
            block[0] = block[0][len(codecs.BOM_UTF8):]
        try:
            if b"\x00" in b"".join(block):
                raise ValueError("NUL")
            lines = [raw.decode("utf-8") for raw in block]
        except ValueError:  # UnicodeDecodeError too: find the line
            _check_each_line(path, lineno, block)
            raise
        if not keep_ends:
            lines = [line.rstrip("\r\n") for line in lines]
        yield from enumerate(lines, lineno + 1)
        lineno += len(lines)


def _check_each_line(path: str, lines_before: int, block: list[bytes]) -> None:
    if lines_before == 0:
        for bom, encoding in _OTHER_BOMS:
            if block[0].startswith(bom):
                raise InputFormatError(f"{path}: the file is {encoding} text (it starts with "
                                       f"{encoding}'s byte order mark), not UTF-8: save it "
                                       "as UTF-8")
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
    return next((f"; {hint}" for magic, hint in _MAGIC_HINTS
                 if lineno == 1 and raw.startswith(magic)), "")
