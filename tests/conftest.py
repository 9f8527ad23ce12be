"""pytest configuration of the whole suite: the Hypothesis profile, the tiers, and the
order the files go to the workers in.

``HYPOTHESIS_PROFILE=quick python -m pytest ...`` runs each property test with
a twentieth of its examples (development); unset, or ``ci``, runs the full
counts (CI and README's test command). See tests/support/hypothesis_profiles.py.

The suite runs Beam as installed: pipelines run on the FnApiRunner, named through
Beam's public options (tests/support/runner.py). The files go to the workers
longest first, by their recorded seconds (tests/support/file_order.py;
``--record-file-seconds`` records them).
"""

from __future__ import annotations


import pytest

from tests.support import file_order, tiers
from tests.support.hypothesis_profiles import register_and_load

register_and_load()


# Set in the process that sees every report (the controller, or a run without
# xdist) when the run records each file's seconds.
_recorder: file_order.SecondsRecorder | None = None


def pytest_addoption(parser):
    parser.addoption("--record-file-seconds", action="store_true",
                     help="write each test file's seconds into tests/support/file_seconds.json "
                          "(the order the files go to workers in)")


def pytest_configure(config):
    global _recorder
    if config.getoption("record_file_seconds") and not hasattr(config, "workerinput"):
        _recorder = file_order.SecondsRecorder()


def pytest_collection_modifyitems(config, items):
    for item in items:  # the pipeline, job and subprocess tiers are the slow ones
        if any(item.get_closest_marker(tier) for tier in tiers.TIERS):
            item.add_marker(getattr(pytest.mark, tiers.SLOW))
    items[:] = file_order.longest_first(items, file_order.read_seconds())


def pytest_runtest_logreport(report):
    if _recorder is not None:
        _recorder.add(report.nodeid, report.duration)


def pytest_sessionfinish(session):
    if _recorder is not None:
        _recorder.write()
