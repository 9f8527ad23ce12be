"""The suite's TestPipelines run as the jobs' pipelines run: without Beam's runner-API round trip.

``TestPipeline.run()`` asks Beam by default to translate the pipeline to its
runner-API proto and rebuild a Python pipeline from it before running it (a
check that the graph survives translation); a plain ``beam.Pipeline`` on the
DirectRunner, as every job builds, skips that rebuild. It was about a third
of the CPU of the suite's pipeline tests. The suite runs TestPipelines with
Beam's own default for plain pipelines ("AUTO"); the pipelines still go
through the proto on their way to the FnApiRunner, whose workers unpickle
every DoFn from it. tests/beam/test_runner_api_round_trip.py keeps the
rebuild check for every public transform, and
``BEAM_DPSU_TESTS_ROUND_TRIP=1`` restores it for every test.
"""

import os

from apache_beam.testing.test_pipeline import TestPipeline

__all__ = ["install"]


def install() -> bool:
    """Makes ``TestPipeline.run()`` default to Beam's "AUTO"; False if switched off."""
    if os.environ.get("BEAM_DPSU_TESTS_ROUND_TRIP") == "1":
        return False
    original = getattr(TestPipeline.run, "__wrapped__", TestPipeline.run)

    def run(self, test_runner_api="AUTO"):
        return original(self, test_runner_api)

    run.__wrapped__ = original  # type: ignore[attr-defined]
    TestPipeline.run = run  # type: ignore[method-assign]
    return True
