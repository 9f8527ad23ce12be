"""A memo of Beam's ``userstate.get_dofn_specs`` for the test suite (speed only).

Beam asks for a DoFn's state and timer specs several times per ParDo while it
builds, translates and runs a pipeline, and each time inspects the signature
of every method of the DoFn (``dir(dofn)``, ``inspect.signature``): in the
suite's pipelines that was about a third of their CPU time. The answer is a
function of the DoFn's class: the specs are the defaults of its methods'
parameters, and the methods it inspects are those bound from the class —
unless the instance carries bound methods of its own (Beam's wrappers of
functions do), which are then inspected every time, as Beam does. So the memo
returns exactly what Beam computes; ``BEAM_DPSU_TESTS_NO_SPEC_MEMO=1`` turns it
off (the suite then runs Beam's own function).
"""

import os
import types

from apache_beam.transforms import userstate

__all__ = ["install"]


def install() -> bool:
    """Replaces ``userstate.get_dofn_specs`` by its per-class memo; False if switched off."""
    if os.environ.get("BEAM_DPSU_TESTS_NO_SPEC_MEMO") == "1":
        return False
    original = getattr(userstate.get_dofn_specs, "__wrapped__", userstate.get_dofn_specs)
    memo: dict = {}

    def get_dofn_specs(dofn):
        if any(isinstance(value, types.MethodType)
               for value in getattr(dofn, "__dict__", {}).values()):
            return original(dofn)
        specs = memo.get(type(dofn))
        if specs is None:
            specs = memo[type(dofn)] = original(dofn)
        return specs

    get_dofn_specs.__wrapped__ = original  # type: ignore[attr-defined]
    userstate.get_dofn_specs = get_dofn_specs
    return True
