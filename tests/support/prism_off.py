"""The suite's pipelines run on the FnApiRunner (speed, and the same runner on every machine).

Beam's DirectRunner (2.77) first offers a batch pipeline to the Prism runner,
which it downloads from the internet on first use and caches; where it cannot
(this sandbox, an offline CI machine) it falls back to the FnApiRunner, after
translating the pipeline and trying the download for every pipeline (about
0.2 s each). The suite makes Prism's ``run_pipeline`` fail at once, so the
DirectRunner falls back straight away by its own path: every machine then runs
the suite's pipelines on the FnApiRunner, as this one always did.
``BEAM_DPSU_TESTS_ALLOW_PRISM=1`` leaves the DirectRunner's choice alone.
"""

import os

from apache_beam.runners.portability import prism_runner

__all__ = ["install", "PrismIsOff"]


class PrismIsOff(RuntimeError):
    """Raised by Prism's ``run_pipeline`` in the suite; the DirectRunner falls back on it."""


def install() -> bool:
    """Makes ``PrismRunner.run_pipeline`` refuse at once; False if switched off."""
    if os.environ.get("BEAM_DPSU_TESTS_ALLOW_PRISM") == "1":
        return False

    def run_pipeline(self, pipeline, options):
        raise PrismIsOff("the test suite runs its pipelines on the FnApiRunner")

    prism_runner.PrismRunner.run_pipeline = run_pipeline  # type: ignore[method-assign]
    return True
