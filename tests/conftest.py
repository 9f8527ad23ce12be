"""pytest configuration of the whole suite: the Hypothesis profile.

``HYPOTHESIS_PROFILE=quick python -m pytest ...`` runs each property test with
a twentieth of its examples (development); unset, or ``ci``, runs the full
counts (CI and README's test command). See tests/support/hypothesis_profiles.py.
"""

from tests.support.hypothesis_profiles import register_and_load

register_and_load()
