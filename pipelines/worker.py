"""The DirectRunner's worker processes under ``--direct_running_mode=multi_processing``.

``python -m pipelines.worker`` instead of Beam's worker: quiet, it ends with the
job and gets its signals. Details: docs/explanation/jobs.md#worker-processes
"""

from __future__ import annotations

import contextlib
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


_WORKERS_FOLDER_VARIABLE = "BEAM_DPSU_WORKERS_FOLDER"  # where workers write their ids


class WorkerProcesses:
    """The job's worker processes, found by files named by their ids in a private folder
    (Beam keeps no handle). One per job process: :data:`WORKERS`."""

    def __init__(self):
        self._folder: str | None = None

    def expect(self) -> None:
        """Before the pipeline starts workers: a fresh folder, named in their environment."""
        if self._folder is None:
            self._folder = tempfile.mkdtemp(prefix="beam_dpsu-workers-")
            os.environ[_WORKERS_FOLDER_VARIABLE] = self._folder

    def interrupt(self, signum: int = signal.SIGINT) -> None:
        """Sends ``signum`` to every worker still running (a worker ends quietly on it)."""
        if self._folder is None:
            return
        for name in os.listdir(self._folder):
            # ValueError: not a process id; the others: a worker that has ended.
            with contextlib.suppress(ValueError, ProcessLookupError, PermissionError):
                os.kill(int(name), signum)

    def close(self) -> None:
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)
            os.environ.pop(_WORKERS_FOLDER_VARIABLE, None)
            self._folder = None


WORKERS = WorkerProcesses()


def _register_worker() -> None:
    if folder := os.environ.get(_WORKERS_FOLDER_VARIABLE):
        # OSError: the job has ended and removed its folder; the orphan check ends this one.
        with contextlib.suppress(OSError), open(os.path.join(folder, str(os.getpid())), "x"):
            pass


def runner_for(options):
    """None (Beam's runner) unless ``options`` ask for the DirectRunner's multi-process
    mode; then its ``FnApiRunner``, with :func:`main` as the workers."""
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
    """Ends the worker once the job that started it is gone (re-parented)."""
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
