"""Progress: lines on stderr naming the stage and its released counts, and the summary.

Each job logs ``[job  12.3s] …`` lines through the ``pipelines`` logger
(:func:`configure_progress`, :func:`progress`): the files it reads, each
stage's or DPNE level's released count (:class:`LogCount`; SIPS rounds' only
with ``--non-private-stats``), the files it wrote (:func:`log_written`, one line per writer); and
one summary line on stdout when it succeeds. Only the released set leaves
(docs/privacy.md, invariants): these lines name files and released counts,
never a user id, a record's text or a raw count (raw counts only with
``--non-private-stats``).
"""

from __future__ import annotations

import logging
import os
import sys
import time

import apache_beam as beam

from pipelines import quiet_beam

__all__ = ["LOG", "configure_progress", "progress", "LogCount", "log_written",
           "NOTHING_RELEASED"]

LOG = logging.getLogger("pipelines")

# The summary line's ending when a job released nothing.
NOTHING_RELEASED = (" (nothing cleared the release threshold: expected when few users hold "
                    "each item, e.g. on a small input, by design)")


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is when a line is logged (tests swap it)."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, _):
        pass


class _ProgressFormatter(logging.Formatter):
    """``[job  12.3s] message``, timed by the wall clock: a worker process's lines are
    timed from the job's start too (:func:`_log_line`)."""

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
    """What a step needs to log a progress line wherever it runs (:func:`_log_line`)."""
    return os.getpid(), _FORMATTER.job, _FORMATTER.start


def _log_line(clock: tuple, message: str) -> None:
    """A progress line from a step: in the job's process through its handler; in a
    worker process of the DirectRunner's multi_processing mode (``pipelines.worker``),
    where progress is not configured, through the same handler set up there, named and
    timed as the job's own lines."""
    pid, job, start = clock
    if os.getpid() != pid and _HANDLER not in LOG.handlers:
        _FORMATTER.job, _FORMATTER.start = job, start
        _add_handler()
    LOG.info(message)


class LogCount(beam.PTransform):
    """Counts a PCollection and logs ``message.format(n=count, s=…)``; returns the count.

    ``{s}`` is "s" unless the count is 1 ("released {n:,} item{s}").

    For released sets only (a round's or a level's release), whose size is a
    DP output: logging it says nothing the release does not.
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
    """Logs the files a writer returns as written, in one line once all are written,
    named where they will be: under ``output`` once the ``staging`` folder they were
    written into is put in place. Many shards make one line (how many, the first and
    the last; ``--num-shards 300`` once made 300 lines)."""

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

    return (paths
            | f"Collect{what.title()}Written" >> beam.combiners.ToList()
            | f"Log{what.title()}Written" >> beam.Map(log).with_output_types(type(None)))
