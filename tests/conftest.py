"""pytest configuration of the whole suite: the Hypothesis profile, and eight
speed-ups of Beam that change no answer.

``HYPOTHESIS_PROFILE=quick python -m pytest ...`` runs each property test with
a twentieth of its examples (development); unset, or ``ci``, runs the full
counts (CI and README's test command). See tests/support/hypothesis_profiles.py.

Beam's ``get_dofn_specs`` is memoised per DoFn class (the same answers, a
third less CPU in pipeline tests): tests/support/dofn_specs_cache.py. Its option
parsing is memoised per (options class, flags): tests/support/options_memo.py.
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
"""

import pytest

from tests.support import (create_types, dofn_specs_cache, function_inspection, no_round_trip,
                           options_memo, pickle_store, prism_off, state_cache_sizes)
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


@pytest.fixture
def beams_own_pickles():
    """Beam's own bz2 pickles, for a pipeline whose workers are other processes."""
    with pickle_store.beams_own():
        yield
