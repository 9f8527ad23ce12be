"""The runner the suite's pipelines run on, chosen through Beam's public options.

Beam's DirectRunner first offers a batch pipeline to the Prism runner, which it
downloads on first use; where it cannot (an offline CI machine, this sandbox) it
falls back to the FnApiRunner after trying, for every pipeline. The suite names
the FnApiRunner instead, so every machine runs its pipelines on the same runner
with no download attempt: ``TestPipeline`` here is Beam's own, given
``runner=RUNNER`` unless a test chooses one, and :func:`job_args` adds
``--runner=FnApiRunner`` to a job's flags unless they choose one. A few tests run
the DirectRunner on purpose (the README's command, the examples, multi-process
mode); docs/how-to/runners.md says which runner the jobs use and how to choose.
"""

from __future__ import annotations

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.testing import test_pipeline

__all__ = ["RUNNER", "RUNNER_FLAG", "TestPipeline", "job_args"]

RUNNER = "FnApiRunner"
RUNNER_FLAG = f"--runner={RUNNER}"


def TestPipeline(*args, **kwargs) -> test_pipeline.TestPipeline:  # noqa: N802 - Beam's name
    """Beam's ``TestPipeline`` on :data:`RUNNER`, unless its options name a runner."""
    options = kwargs.get("options")
    chosen = args or kwargs.get("runner") is not None or (
        isinstance(options, PipelineOptions)
        and options.view_as(StandardOptions).runner is not None)
    if not chosen:
        kwargs["runner"] = RUNNER
    return test_pipeline.TestPipeline(*args, **kwargs)


def job_args(args) -> list[str]:
    """A job's flags with :data:`RUNNER_FLAG` added, unless they choose a runner (or the
    DirectRunner's multi-process mode)."""
    args = [str(a) for a in args]
    if any(a.startswith(("--runner", "--direct_running_mode", "--direct-running-mode"))
           for a in args):
        return args
    return [*args, RUNNER_FLAG]
