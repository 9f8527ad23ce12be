"""Hypothesis example counts: the ``ci`` profile (the default) runs every
property test with its full count; ``quick`` (``HYPOTHESIS_PROFILE=quick``,
for development) runs a twentieth of it, at least ``QUICK_MINIMUM``.

tests/conftest.py registers and loads the profile; a test that sets its own
count writes ``@settings(max_examples=examples(2000))``, so the count follows
the profile too. A test that must find a counterexample (one showing that a
property test can fail) keeps its count under both profiles: with fewer
examples it could miss it.
"""

import os

from hypothesis import settings

PROFILE_VARIABLE = "HYPOTHESIS_PROFILE"
PROFILES = ("ci", "quick")
QUICK_SHARE = 20  # quick runs n // QUICK_SHARE examples ...
QUICK_MINIMUM = 10  # ... but at least this many (or n, if smaller)
DEFAULT_EXAMPLES = 100  # Hypothesis's own default, for tests with no count of their own


def profile() -> str:
    """The profile named by $HYPOTHESIS_PROFILE ("ci" when unset)."""
    name = os.environ.get(PROFILE_VARIABLE, "ci")
    if name not in PROFILES:
        raise ValueError(f"{PROFILE_VARIABLE}={name!r}: expected one of {', '.join(PROFILES)}")
    return name


def quick_examples(n: int) -> int:
    """What the quick profile runs of a test's ``n`` examples."""
    return min(n, max(QUICK_MINIMUM, n // QUICK_SHARE))


def examples(n: int) -> int:
    """A test's example count ``n`` under the current profile: n under ci."""
    return n if profile() == "ci" else quick_examples(n)


def register_and_load() -> None:
    settings.register_profile("ci", max_examples=DEFAULT_EXAMPLES)
    settings.register_profile("quick", max_examples=quick_examples(DEFAULT_EXAMPLES))
    settings.load_profile(profile())
