"""The order the suite's files are handed to workers: the longest first (speed only).

With ``-n auto --dist loadfile`` each worker takes the next whole file when it
is free. xdist's own order (the files with the most tests first) left the few
files of few slow tests (jobs run as processes: interrupts, output folders,
examples) to the end, where one worker ran them while the other had nothing
left: ten seconds and more of a five-minute run. Handing the files out longest
first (the classic LPT rule) leaves only short files for the end, so the two
workers finish within about a short file of each other.

The lengths are measured, in seconds per file, in ``FILE_SECONDS``
(tests/support/file_seconds.json), written by a run with
``--record-file-seconds``::

    python -m pytest -q -n auto --dist loadfile --record-file-seconds

A file the record does not list goes first (it may be long). The order only
decides which worker runs a file when; it changes no test. pytest.ini turns
xdist's own reordering off (``--no-loadscope-reorder``) so that this order is
the one the workers get.
"""

from __future__ import annotations

import json
import os
from collections import Counter

__all__ = ["FILE_SECONDS", "test_file", "longest_first", "read_seconds", "SecondsRecorder"]

FILE_SECONDS = os.path.join(os.path.dirname(__file__), "file_seconds.json")


def test_file(nodeid: str) -> str:
    """The file of a test id, as the record names it (``tests/core/test_x.py``)."""
    return nodeid.split("::", 1)[0]


def read_seconds(path: str = FILE_SECONDS) -> dict[str, float]:
    """The recorded seconds per test file ({} if there is no record)."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return {}


def longest_first(items: list, seconds: dict[str, float]) -> list:
    """``items`` (anything with a ``nodeid``) grouped by file, the longest file first and
    the files the record does not list before all; within a file, and between files
    of equal length, in the order given."""
    first_place: dict[str, int] = {}
    for place, item in enumerate(items):
        first_place.setdefault(test_file(item.nodeid), place)

    def key(item):
        name = test_file(item.nodeid)
        return (-seconds.get(name, float("inf")), first_place[name])

    return sorted(items, key=key)


class SecondsRecorder:
    """Adds up the duration of every test phase per file (from the reports every worker
    sends the controller) and writes them, rounded, into the record at ``path``: the
    files of this run replace their entries, the others stay."""

    def __init__(self, path: str = FILE_SECONDS):
        self.path = path
        self.seconds: Counter = Counter()

    def add(self, nodeid: str, duration: float) -> None:
        self.seconds[test_file(nodeid)] += duration

    def write(self) -> None:
        record = read_seconds(self.path)
        record.update((name, round(seconds, 2)) for name, seconds in self.seconds.items())
        record = dict(sorted(record.items()))
        with open(self.path, "w", encoding="utf-8") as f:
            json.dump(record, f, indent=1)
            f.write("\n")
