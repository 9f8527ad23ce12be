"""pytest configuration of the whole suite: the Hypothesis profile, and eight
speed-ups of Beam that change no answer.

``HYPOTHESIS_PROFILE=quick python -m pytest ...`` runs each property test with
a twentieth of its examples (development); unset, or ``ci``, runs the full
counts (CI and README's test command). See tests/support/hypothesis_profiles.py.

Beam's ``get_dofn_specs`` is memoised per DoFn class (the same answers, a
third less CPU in pipeline tests): tests/support/dofn_specs_cache.py. Its option
parsing (each options object's, and ``get_all_options``'s) is memoised per
(options class, flags): tests/support/options_memo.py.
The DirectRunner falls back to the FnApiRunner without first trying to fetch
the Prism runner: tests/support/prism_off.py. TestPipelines skip Beam's
runner-API rebuild, as plain pipelines do (one test keeps it for every public
transform): tests/support/no_round_trip.py. Beam's picklers store pickles
uncompressed: tests/support/pickle_store.py (a test whose pipeline runs worker
processes takes the ``beams_own_pickles`` fixture). Its state cache weighs entries
without listing every module's globals: tests/support/state_cache_sizes.py. Its
signatures and source reads of functions are memoised per function:
tests/support/function_inspection.py. The element type of a ``Create`` is
inferred once per distinct shape of its values: tests/support/create_types.py.

The files go to the workers longest first, by their recorded seconds
(tests/support/file_order.py; ``--record-file-seconds`` records them).
"""

from __future__ import annotations

import pytest

from tests.support import (create_types, dofn_specs_cache, file_order, function_inspection,
                           no_round_trip, options_memo, pickle_store, prism_off,
                           state_cache_sizes)
from tests.support.hypothesis_profiles import register_and_load

register_and_load()
dofn_specs_cache.install()
options_memo.install()
prism_off.install()
no_round_trip.install()
pickle_store.install()
state_cache_sizes.install()
function_inspection.install()
create_types.install()


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
    items[:] = file_order.longest_first(items, file_order.read_seconds())


def pytest_runtest_logreport(report):
    if _recorder is not None:
        _recorder.add(report.nodeid, report.duration)


def pytest_sessionfinish(session):
    if _recorder is not None:
        _recorder.write()


@pytest.fixture
def beams_own_pickles():
    """Beam's own bz2 pickles, for a pipeline whose workers are other processes."""
    with pickle_store.beams_own():
        yield
