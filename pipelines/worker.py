"""The DirectRunner's worker processes under ``--direct_running_mode=multi_processing``.

Beam starts each worker as ``sh -c "python -m apache_beam.runners.worker.sdk_worker_main"``
on the job's console. Left as they are, the workers print Beam's start-up lines
("apitools not found", "Logging handler created", "Discarding unparseable args",
"No semi_persistent_directory found") once per worker, and a Ctrl-C, which the
terminal sends to every process of the job, prints each worker's
``KeyboardInterrupt`` traceback and, in the job, an "Exception in thread
run_worker" traceback per worker, before the job's own ``interrupted``.

A job asked for that mode runs its pipeline on :func:`runner_for`'s runner,
which starts ``python -m pipelines.worker`` instead (through ``exec``, so that
no shell stands between the runner and the worker). :func:`main`, before Beam
loads:

* sends the worker's log lines through the jobs' noise filter
  (``pipelines.BEAM_NOISE_FILTER``; a warning or an error still shows);
* makes a SIGINT end the worker quietly, with exit code 0 so that the runner
  does not report it: the job received the same signal and reports it as one
  ``interrupted`` line (``pipelines.interrupts``), removing the output;
* writes its process id into the job's workers folder (:class:`WorkerProcesses`),
  so that a signal sent to the job alone (a scheduler's SIGTERM, ``kill PID``),
  which the workers do not receive, reaches them through the job: Beam waits
  for every worker process before the job can report the interrupt;
* ends quietly if the job's process is gone (killed): nothing waits for it then.

Progress lines logged by a step running in a worker reach the same console
(``pipelines.progress.LogCount``).
"""

from __future__ import annotations

import logging
import os
import shlex
import shutil
import signal
import sys
import tempfile
import threading
import time

from pipelines import BEAM_NOISE_FILTER

__all__ = ["WORKER_COMMAND", "WorkerProcesses", "WORKERS", "runner_for", "main"]

WORKER_COMMAND = f"exec {shlex.quote(sys.executable)} -m pipelines.worker"


def _is_direct_multi_processing(options) -> bool:
    from apache_beam.options.pipeline_options import DirectOptions, StandardOptions
    runner = options.view_as(StandardOptions).runner
    name = runner if isinstance(runner, str) else type(runner).__name__ if runner else ""
    direct = name.lower().removesuffix("runner") in ("", "direct", "switchingdirect")
    return direct and options.view_as(DirectOptions).direct_running_mode == "multi_processing"


# The environment variable naming the folder where the job's workers write their ids.
_WORKERS_FOLDER_VARIABLE = "BEAM_DPSU_WORKERS_FOLDER"


class WorkerProcesses:
    """The worker processes of the job's pipeline in multi-process mode, found by the
    files named by their process ids in a private folder (Beam starts them and keeps
    no handle the job could use). One per job process: :data:`WORKERS`."""

    def __init__(self):
        self._folder: str | None = None

    def expect(self) -> None:
        """Before the pipeline starts workers: a fresh folder, named to them in the
        environment they inherit."""
        if self._folder is None:
            self._folder = tempfile.mkdtemp(prefix="beam_dpsu-workers-")
            os.environ[_WORKERS_FOLDER_VARIABLE] = self._folder

    def interrupt(self, signum: int = signal.SIGINT) -> None:
        """Sends ``signum`` to every worker still running (a worker ends quietly on it)."""
        if self._folder is None:
            return
        for name in os.listdir(self._folder):
            try:
                os.kill(int(name), signum)
            except (ValueError, ProcessLookupError, PermissionError):
                pass  # not a process id, or a worker that has ended

    def close(self) -> None:
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            os.environ.pop(_WORKERS_FOLDER_VARIABLE, None)
            self._folder = None


WORKERS = WorkerProcesses()


def _register_worker() -> None:
    folder = os.environ.get(_WORKERS_FOLDER_VARIABLE)
    if folder:
        try:
            with open(os.path.join(folder, str(os.getpid())), "x"):
                pass
        except OSError:
            pass  # the job has ended and removed its folder: the orphan check ends this one


def runner_for(options):
    """The runner of a job's pipeline under ``options``: None (Beam's, from the options)
    unless they ask for the DirectRunner's multi-process mode; then the runner the
    DirectRunner would use (an ``FnApiRunner`` given the options as the DirectRunner
    gives them) whose worker processes run :func:`main`."""
    if not _is_direct_multi_processing(options):
        return None
    WORKERS.expect()
    from apache_beam.portability import python_urns
    from apache_beam.portability.api import beam_provision_api_pb2
    from apache_beam.runners.portability.fn_api_runner import fn_runner
    from apache_beam.runners.portability.portable_runner import JobServiceHandle

    class QuietWorkersRunner(fn_runner.FnApiRunner):
        def run_via_runner_api(self, pipeline_proto, options):
            for environment in pipeline_proto.components.environments.values():
                if environment.urn == python_urns.SUBPROCESS_SDK:
                    environment.payload = WORKER_COMMAND.encode("utf-8")
            return super().run_via_runner_api(pipeline_proto, options)

    encoded = JobServiceHandle.encode_pipeline_options(options.get_all_options())
    return QuietWorkersRunner(provision_info=fn_runner.ExtendedProvisionInfo(
        beam_provision_api_pb2.ProvisionInfo(pipeline_options=encoded)))


def _quiet_exit(_signum=None, _frame=None):
    os._exit(0)  # the job reports the interrupt; nothing of a worker's needs flushing


def _end_when_orphaned(parent: int, interval: float = 0.5) -> None:
    """Ends the worker once the job that started it is gone (it is then re-parented)."""
    while os.getppid() == parent:
        time.sleep(interval)
    _quiet_exit()


def main() -> None:
    """A DirectRunner worker process (Beam's ``sdk_worker_main``), quiet as above."""
    signal.signal(signal.SIGINT, _quiet_exit)
    _register_worker()
    threading.Thread(target=_end_when_orphaned, args=(os.getppid(),), daemon=True,
                     name="end_with_job").start()
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
    handler.addFilter(BEAM_NOISE_FILTER)
    logging.getLogger().addHandler(handler)
    from apache_beam.runners.worker import sdk_worker_main
    sdk_worker_main.main(sys.argv)


if __name__ == "__main__":
    main()
