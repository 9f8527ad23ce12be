"""Running a job: one ``error: …`` line and exit 2 for every expected failure, one line
``interrupted`` and exit 130/143 for SIGINT/SIGTERM, the summary line on success.

A job is two functions: ``prepare(argv)`` checks everything that can be
checked without data (flags, budget, mechanism, the first records of the
input) and ``run(job)`` runs the pipeline(s) into ``job.staging``, which is
put in place as ``job.output`` when it returns (``output_folder.written_whole``).
"""

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
    """While a job runs, an interrupt also stops the worker processes of the
    multi-process mode (a signal sent to the job alone reaches none of them)."""
    interrupts.on_interrupt.append(WORKERS.interrupt)
    try:
        yield
    finally:
        interrupts.on_interrupt.remove(WORKERS.interrupt)
        WORKERS.close()


def job_pipeline(options) -> beam.Pipeline:
    """A job's pipeline under its Beam ``options`` (quiet worker processes under the
    DirectRunner's multi_processing mode: ``pipelines.worker``)."""
    return beam.Pipeline(runner=runner_for(options), options=options)


def run_job(name: str, argv, prepare: Callable, run: Callable[..., str]) -> int:
    """Runs a job: one ``error: …`` line and exit code 2 for every expected failure; one
    line ``interrupted`` and exit 130 (SIGINT) or 143 (SIGTERM) for an interrupt.

    Args:
      name: the job's name in progress lines.
      argv: the command line (None: ``sys.argv[1:]``).
      prepare: argv → job; parses and checks everything that can be checked
        without data, and exposes ``job.output`` (the output folder, or None),
        ``job.overwrite`` and ``job.inputs`` (see ``output_folder.prepare_output``).
        Bad parameters may raise ``ValueError``/``TypeError`` here.
      run: job → the closing summary line; runs the pipeline(s), writing the
        output into ``job.staging`` (``output_folder.staging_of``), which is put in
        place as ``job.output`` when it returns (``output_folder.written_whole``).
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
