"""Checks on the launching machine before a pipeline is built: the pattern matches
regular files (:func:`check_input_exists`), the first records parse (:func:`inspect_input`)."""

from __future__ import annotations

import errno
import itertools
import os
import re
import stat
import warnings
from typing import Callable, Sequence

from apache_beam.io.filesystem import FileSystem
from apache_beam.io.filesystems import FileSystems

from pipelines.io.decompression import corruption_checked, open_input
from pipelines.io.errors import InputFormatError
from pipelines.io.parsers import record_parser

__all__ = ["INSPECT_RECORDS", "as_listed", "check_input_exists", "inspect_input"]

INSPECT_RECORDS = 100  # records of each file that inspect_input parses

_GLOB = re.compile(r"[*?[]")

# ``[[]``, the one way to match a literal "[" in Beam's patterns (the escape the error
# below gives), makes Python's re warn when Beam compiles the pattern: not shown.
warnings.filterwarnings("ignore", message="Possible nested set", category=FutureWarning,
                        module="apache_beam.io.filesystem")


def as_listed(pattern: str) -> str:
    """``pattern`` as Beam's listing finds it: a local glob with no folder part
    (``*.csv``) is taken in the working directory (``./*.csv``), where Beam's
    listing, which starts at the folder before the first wildcard, does not look."""
    glob = _GLOB.search(pattern)
    if glob is None or "://" in pattern or os.sep in pattern[:glob.start()]:
        return pattern
    return os.path.join(os.curdir, pattern)


def check_input_exists(pattern: str) -> list[str]:
    """The files matching ``pattern``, sorted; raises if there are none, one is not a regular
    file, or Beam's listing would read the input in part
    (docs/explanation/reading.md#checks-before-the-pipeline)."""
    listed = as_listed(pattern)
    try:
        result = FileSystems.match([listed])[0]
    except Exception as exc:  # BeamIOError and friends carry the cause
        raise InputFormatError(f"cannot read input {pattern!r}: {exc}") from None
    paths = sorted(m.path for m in result.metadata_list)
    if "://" not in pattern:
        _check_local_files(pattern, listed, paths)
    if not paths:
        raise InputFormatError(f"no input file matches {pattern!r}")
    if folder := next((p for p in paths if "://" not in p and os.path.isdir(p)), None):
        raise InputFormatError(f"the input {folder} is a directory, not a file: give a glob of "
                               f"its files (e.g. {os.path.join(folder, '*')})")
    return paths


def _check_local_files(pattern: str, listed: str, paths: list[str]) -> None:
    """Raises for a local pattern naming a file it does not match, or matching a non-file
    (``listed``: the pattern as Beam's listing reads it, :func:`as_listed`)."""
    if _GLOB.search(pattern) and os.path.lexists(pattern) and listed not in paths:
        escaped = re.sub(r"([*?[])", r"[\1]", pattern)
        found = f" (it matches {len(paths)} other files)" if paths else ""
        raise InputFormatError(
            f"no input file matches {pattern!r}, but a file of that name exists: […] in a "
            f"pattern is a glob character class, * and ? wildcards{found}; to read the "
            f"file itself give --input {escaped!r} (each [, * and ? in [brackets])")
    for path in _candidates(listed, paths):
        if problem := _not_a_regular_file(path):
            raise InputFormatError(f"the input {path} is {problem}")


def _candidates(pattern: str, paths: list[str]) -> list[str]:
    """Beam's matches and the file links its listing drops; raises for a matching folder link."""
    glob = _GLOB.search(pattern)
    if glob is None:
        return paths or ([pattern] if os.path.lexists(pattern) else [])
    prefix = pattern[:glob.start()]  # as Beam's match splits a pattern
    folder = prefix if prefix.endswith(os.sep) else os.path.dirname(prefix)
    matches = re.compile(FileSystem.translate_pattern(pattern)).match
    found = set(paths)
    for dirpath, folders, names in os.walk(folder):  # as Beam lists it: links not followed
        files = (os.path.join(dirpath, name) for name in names)
        found.update(path for path in files if matches(path) and os.path.islink(path))
        for name in folders:
            path = os.path.join(dirpath, name)
            if os.path.islink(path) and _matches_below(path, pattern, matches):
                raise InputFormatError(
                    f"the input {path} is a symbolic link to a folder, and the files under "
                    f"it that {pattern!r} matches would be left out (Beam's file listing "
                    "does not follow folder links): put the folder itself there instead of "
                    f"a link, or give a pattern that starts inside the link "
                    f"({os.path.join(path, '*')})")
    return sorted(found)


def _matches_below(link: str, pattern: str, matches: Callable[[str], object]) -> bool:
    """Whether a file under folder ``link`` (links followed, each once) matches ``pattern``."""
    # Without "**" a match has at most one separator per "/", "?" or "[…]" of the
    # pattern: deeper folders cannot hold one, and are not walked.
    depth = None if "**" in pattern else sum(pattern.count(c) for c in (os.sep, "?", "["))
    seen: set[str] = set()
    links = [link]
    while links:
        top = links.pop()
        real = os.path.realpath(top)
        if real in seen:
            continue
        seen.add(real)
        for dirpath, folders, names in os.walk(top):  # the top is followed, links below not
            if depth is not None and dirpath.count(os.sep) >= depth:
                folders[:] = []
                continue
            if any(matches(os.path.join(dirpath, name)) for name in names):
                return True
            links += [os.path.join(dirpath, name) for name in folders
                      if os.path.islink(os.path.join(dirpath, name))]
    return False


def _not_a_regular_file(path: str) -> str | None:
    """What a local path is when it is not a regular file or a folder, else None."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if os.path.islink(path):
            if exc.errno == errno.ELOOP:
                return "a symbolic link that loops (too many levels of symbolic links)"
            return "a symbolic link to a file that does not exist"
        return None  # gone since it was matched: reading it says so
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    what = ("a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device")
    return (f"{what}, not a regular file: the job reads its input twice (a check on this "
            "machine, then the pipeline), and a stream can be read once; save the data to a "
            "file and give that")


def inspect_input(files: Sequence[str], fmt: str, user_field: str | None = None,
                  text_field: str | None = None, skip_header_lines: int = 0,
                  max_files: int = 32, max_records: int = INSPECT_RECORDS) -> None:
    """Parses the first ``max_records`` records of each of the first ``max_files`` files;
    raises naming the file when one is corrupt, binary, of another format, lacks a field,
    or none holds a record. Truncation shows at run time."""
    parse = record_parser(fmt, user_field, text_field, skip_header_lines)
    checked = list(files)[:max_files]
    any_record = False
    for path in checked:
        stream = open_input(path)
        try:
            records = list(itertools.islice(corruption_checked(stream, parse(path, stream)),
                                            max_records))  # each parsed
            any_record = any_record or bool(records)
        finally:
            stream.close()
    if not any_record and len(checked) == len(files):
        what = (f"{files[0]} is" if len(files) == 1
                else f"all {len(files)} files ({os.path.dirname(files[0])}/…) are")
        # JSON lines have no header (and a blank line is refused): such a file is empty.
        holds = "" if fmt == "jsonl" else " or only a header"
        raise InputFormatError(f"no records in the input: {what} empty{holds}")
