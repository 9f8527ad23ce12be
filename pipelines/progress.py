"""Progress: ``[job  12.3s] …`` lines on stderr naming files and released counts only,
never a user id, a record's text or a raw count (docs/privacy.md, invariants).
Details: docs/explanation/jobs.md#progress-lines
"""

from __future__ import annotations

import logging
import os
import sys
import time

import apache_beam as beam

from pipelines import quiet_beam

__all__ = ["LOG", "configure_progress", "progress", "LogCount", "log_written", "NOTHING_RELEASED"]

LOG = logging.getLogger("pipelines")

NOTHING_RELEASED = (" (nothing cleared the release threshold: expected when few users hold "
                    "each item, e.g. on a small input, by design)")  # the summary's ending


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a line is logged (tests swap it)."""

    stream = property(lambda self: sys.stderr, lambda self, _: None)  # set: ignored


class _ProgressFormatter(logging.Formatter):
    """``[job  12.3s] message``, by the wall clock (a worker's lines too)."""

    def __init__(self):
        super().__init__()
        self.job = "job"
        self.start = time.time()

    def format(self, record):
        return f"[{self.job} {time.time() - self.start:6.1f}s] {record.getMessage()}"


_HANDLER = _StderrHandler()
_FORMATTER = _ProgressFormatter()
_HANDLER.setFormatter(_FORMATTER)


def configure_progress(job: str) -> None:
    """Progress lines of the ``pipelines`` logger on stderr, timed from now."""
    _FORMATTER.job, _FORMATTER.start = job, time.time()
    _add_handler()
    quiet_beam()


def _add_handler() -> None:
    if _HANDLER not in LOG.handlers:
        LOG.addHandler(_HANDLER)
    LOG.setLevel(logging.INFO)
    LOG.propagate = False


def progress(message: str) -> None:
    """One progress line (driver side)."""
    LOG.info(message)


def _job_clock() -> tuple:
    """What a step needs to log a progress line wherever it runs."""
    return os.getpid(), _FORMATTER.job, _FORMATTER.start


def _log_line(clock: tuple, message: str) -> None:
    """A progress line from a step, named and timed as the job's in a worker process too."""
    pid, job, start = clock
    if os.getpid() != pid and _HANDLER not in LOG.handlers:
        _FORMATTER.job, _FORMATTER.start = job, start
        _add_handler()
    LOG.info(message)


class LogCount(beam.PTransform):
    """Counts a PCollection and logs ``message.format(n=count, s=…)``; returns the count.

    ``{s}`` is "s" unless the count is 1 ("released {n:,} item{s}"). For released
    sets only, whose size is a DP output.
    """

    def __init__(self, message: str):
        super().__init__()
        self._message = message

    def expand(self, pcoll):
        message, clock = self._message, _job_clock()

        def log(n):
            _log_line(clock, message.format(n=n, s="" if n == 1 else "s"))
            return n

        return (pcoll
                | "Count" >> beam.combiners.Count.Globally()
                | "Log" >> beam.Map(log).with_output_types(int))


def log_written(paths, what: str, staging: str | None = None, output: str | None = None):
    """Logs the files a writer returns in one line once all are written (many: how many,
    the first and the last), named under ``output`` rather than ``staging``."""
    clock = _job_clock()

    def where(path):
        if staging and output and path.startswith(staging.rstrip("/") + "/"):
            return output.rstrip("/") + path[len(staging.rstrip("/")):]
        return path

    def log(written):
        names = sorted(where(path) for path in written)
        if len(names) == 1:
            _log_line(clock, f"wrote {names[0]}")
        elif names:
            _log_line(clock, f"wrote {len(names):,} files {names[0]} … {names[-1]}")

    return (paths | f"Collect{what.title()}Written" >> beam.combiners.ToList()
            | f"Log{what.title()}Written" >> beam.Map(log).with_output_types(type(None)))
