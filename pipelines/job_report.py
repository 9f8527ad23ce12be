"""A job's report.json: assembled in the pipeline from the release's DP outputs, written
once, and read back for the summary line (docs/report.md)."""

from __future__ import annotations

import apache_beam as beam

from pipelines.job_files import WriteJson, read_json
from pipelines.job_runner import job_pipeline
from pipelines.output_folder import staging_of
from pipelines.progress import progress

__all__ = ["CHOSEN", "chosen_side_inputs", "write_report", "run_and_read_report"]

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
