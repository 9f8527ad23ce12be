"""Running a job: one ``error: …`` line and exit 2 for every expected failure, one line
``interrupted`` and exit 130/143 for SIGINT/SIGTERM, the summary line on success
(docs/explanation/jobs.md#running-a-job); and the files a job writes beside its release:
report.json (docs/report.md), scratch folders."""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import uuid
from typing import Callable

import apache_beam as beam
from apache_beam.io.filesystems import FileSystems

from beam_dpsu.core.report import to_json
from pipelines.errors import UsageError, error_message
from pipelines.interrupts import INTERRUPTS, interrupted_line
from pipelines.output_folder import run_with_output, staging_of
from pipelines.progress import configure_progress, progress
from pipelines.worker import WORKERS, runner_for

__all__ = ["run_job", "job_pipeline", "CHOSEN", "chosen_side_inputs", "write_report",
           "run_and_read_report", "WriteJson", "read_json", "scratch_folder",
           "check_scratch_folder"]


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


CHOSEN = ("chosen_max_items_per_user", "counts_chosen_max_items_per_user")


def chosen_side_inputs(transform, counter) -> dict:
    """The Δ0s "auto" chose for the selection and the counts (DP outputs), as side inputs."""
    chosen = (getattr(transform, "chosen_max_items_per_user", None),
              getattr(counter, "chosen_max_items_per_user", None))
    return {name: beam.pvalue.AsSingleton(pc) for name, pc in zip(CHOSEN, chosen) if pc is not None}


def write_report(pipeline, assemble, side: dict, out: str) -> None:
    """Writes ``assemble(None, **side)`` to OUT/report.json."""
    _ = (pipeline
         | "ReportOnce" >> beam.Create([None])
         | "AssembleReport" >> beam.Map(assemble, **side)
         | "WriteReport" >> WriteJson(f"{out}/report.json"))


def run_and_read_report(job, build, releasing: str) -> dict:
    """Logs what the job reads and ``releasing``, runs ``build(pipeline, staging folder)``
    and returns the report.json it wrote."""
    args, staging = job.args, staging_of(job)
    progress(f"reading {len(args.files)} {args.format} file{'s' * (len(args.files) != 1)} "
             f"({args.input}); {releasing}")
    with job_pipeline(job.options) as pipeline:
        build(pipeline, staging)
        progress("built the pipeline; running it")  # seconds before the first record
    return read_json(f"{staging}/report.json")


def _write_file(text: str, path: str) -> str:
    """Writes ``text`` to ``path`` through a temporary name: never a partial file there."""
    temporary = f"{path}.tmp-{uuid.uuid4().hex}"
    handle = FileSystems.create(temporary)
    try:
        handle.write(text.encode("utf-8"))
    finally:
        handle.close()
    FileSystems.rename([temporary], [path])
    return path


class WriteJson(beam.PTransform):
    """Writes the one dict of a PCollection as a JSON file at ``path``.

    Strict JSON with keys in insertion order: the same report is the same bytes.
    """

    def __init__(self, path: str):
        super().__init__()
        self._path = path

    def expand(self, reports):
        path = self._path
        return (reports | "ToJson" >> beam.Map(to_json)
                | "WriteFile" >> beam.Map(
                    lambda text: _write_file(text + "\n", path)).with_output_types(str))


def read_json(path: str) -> dict:
    """A JSON file written by the run (local or remote), for the closing summary."""
    with FileSystems.open(path) as f:
        return json.loads(f.read().decode("utf-8"))


def check_scratch_folder(folder: str, flag: str) -> None:
    """A flag's scratch folder is a local folder, or one that can be created (it is, here).

    Args:
      folder: the flag's value.
      flag: the flag, e.g. ``"--workdir"``, for the message.

    Raises:
      UsageError: naming ``flag`` and the problem.
    """
    if "://" in folder:
        raise UsageError(f"{flag} must be a local folder, got {folder!r}")
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise UsageError(f"{flag} {folder} is a file, not a folder")
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"{flag} {folder} cannot be created: {exc.strerror or exc}") from None
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UsageError(f"{flag} {folder} is not writable")


def scratch_folder(folder: str | None, prefix: str) -> contextlib.AbstractContextManager[str]:
    """``folder`` (created if needed, and kept), or a temporary folder removed at the end."""
    if folder:
        os.makedirs(folder, exist_ok=True)
        return contextlib.nullcontext(folder)
    return tempfile.TemporaryDirectory(prefix=prefix, ignore_cleanup_errors=True)
