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
  ``interrupted`` line (``pipelines.interrupts``), removing the output.

Progress lines logged by a step running in a worker reach the same console
(``pipelines.progress.LogCount``).
"""

from __future__ import annotations

import logging
import os
import shlex
import signal
import sys

from pipelines import BEAM_NOISE_FILTER

__all__ = ["WORKER_COMMAND", "runner_for", "main"]

WORKER_COMMAND = f"exec {shlex.quote(sys.executable)} -m pipelines.worker"


def _is_direct_multi_processing(options) -> bool:
    from apache_beam.options.pipeline_options import DirectOptions, StandardOptions
    runner = options.view_as(StandardOptions).runner
    name = runner if isinstance(runner, str) else type(runner).__name__ if runner else ""
    direct = name.lower().removesuffix("runner") in ("", "direct", "switchingdirect")
    return direct and options.view_as(DirectOptions).direct_running_mode == "multi_processing"


def runner_for(options):
    """The runner of a job's pipeline under ``options``: None (Beam's, from the options)
    unless they ask for the DirectRunner's multi-process mode; then the runner the
    DirectRunner would use (an ``FnApiRunner`` given the options as the DirectRunner
    gives them) whose worker processes run :func:`main`."""
    if not _is_direct_multi_processing(options):
        return None
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


def _quiet_exit(_signum, _frame):
    os._exit(0)  # the job reports the interrupt; nothing of a worker's needs flushing


def main() -> None:
    """A DirectRunner worker process (Beam's ``sdk_worker_main``), quiet as above."""
    signal.signal(signal.SIGINT, _quiet_exit)
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
    handler.addFilter(BEAM_NOISE_FILTER)
    logging.getLogger().addHandler(handler)
    from apache_beam.runners.worker import sdk_worker_main
    sdk_worker_main.main(sys.argv)


if __name__ == "__main__":
    main()
