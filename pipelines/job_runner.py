"""Running a job: one ``error: …`` line and exit 2 for every expected failure, one line
``interrupted`` and exit 130/143 for SIGINT/SIGTERM, the summary line on success
(docs/explanation/jobs.md#running-a-job)."""

from __future__ import annotations

import contextlib
import sys
from typing import Callable

import apache_beam as beam

from pipelines.errors import error_message
from pipelines.interrupts import INTERRUPTS, interrupted_line
from pipelines.output_folder import run_with_output
from pipelines.progress import configure_progress
from pipelines.worker import WORKERS, runner_for

__all__ = ["run_job", "job_pipeline"]


@contextlib.contextmanager
def _workers_stopped_on_interrupt(interrupts):
    """An interrupt also stops the worker processes (a signal to the job reaches none)."""
    interrupts.on_interrupt.append(WORKERS.interrupt)
    try:
        yield
    finally:
        interrupts.on_interrupt.remove(WORKERS.interrupt)
        WORKERS.close()


def job_pipeline(options) -> beam.Pipeline:
    """A job's pipeline under its Beam ``options`` (quiet workers: ``pipelines.worker``)."""
    return beam.Pipeline(runner=runner_for(options), options=options)


def run_job(name: str, argv, prepare: Callable, run: Callable[..., str]) -> int:
    """Runs a job; returns its exit code (2 for an expected failure, 128 + a signal).

    Args:
      name: the job's name in progress lines.
      argv: the command line (None: ``sys.argv[1:]``).
      prepare: argv → job, checking all that needs no data (raising ``ValueError`` or
        ``TypeError``); ``job.output`` (or None), ``job.overwrite``, ``job.inputs``.
      run: job → the summary line; writes into ``job.staging``, put in place after.
    """
    configure_progress(name)
    with INTERRUPTS as interrupts, _workers_stopped_on_interrupt(interrupts):
        try:
            try:
                job = prepare(argv)
            except (ValueError, TypeError) as exc:  # includes UsageError, InputFormatError
                print(f"error: {error_message(exc) or exc}", file=sys.stderr)
                return 2
            summary = run_with_output(job, run)
        except BaseException as exc:  # noqa: BLE001 - re-raised unless expected
            if interrupts.signal is not None or isinstance(exc, KeyboardInterrupt):
                print(interrupted_line(), file=sys.stderr, flush=True)
                return interrupts.exit_code()
            message = error_message(exc) if isinstance(exc, Exception) else None
            if message is None:
                raise
            print(f"error: {message}", file=sys.stderr)
            return 2
    if summary:
        print(summary, flush=True)
    return 0
