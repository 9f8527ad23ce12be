"""A memo of Beam's option parsing for the test suite (speed only).

Every ``PipelineOptions.view_as(cls)`` builds a new ``cls(flags)``, and every
construction builds a fresh argparse parser holding all of ``cls``'s flags and
parses ``flags`` with it. Beam asks for a view several times per transform
while it builds and runs a pipeline (``TypeOptions`` in every ``apply``), so
that parsing was about a fifth of the suite's pipeline time.

What a parse yields is a function of the options class and the flags alone:
the memo keeps, per (class, flags), the namespace Beam's own constructor
parsed, and gives each new object a deep copy of it — so no two objects
share a mutable default, as with Beam's fresh parsers. The rest of the
constructor (the kwargs overrides and the shared option store) runs as
Beam's does. Flags other than a list or tuple of hashable values (None: Beam
then reads ``sys.argv``) are parsed by Beam every time. ``BEAM_DPSU_TESTS_NO_OPTIONS_MEMO=1``
turns the memo off; tests/project/test_suite_speedups.py checks that it gives
what Beam gives for every options class.
"""

import copy
import logging
import os

from apache_beam.options import pipeline_options

__all__ = ["install"]


def install() -> bool:
    """Replaces ``PipelineOptions.__init__`` by its memoised twin; False if switched off."""
    if os.environ.get("BEAM_DPSU_TESTS_NO_OPTIONS_MEMO") == "1":
        return False
    options_class = pipeline_options.PipelineOptions
    original = getattr(options_class.__init__, "__wrapped__", options_class.__init__)
    parsed: dict = {}

    def __init__(self, flags=None, **kwargs):
        if not isinstance(flags, (list, tuple)):  # None (sys.argv), a str, an iterator
            return original(self, flags, **kwargs)
        try:
            key = (type(self), tuple(flags))
            namespace = parsed.get(key)
        except TypeError:  # flags that are not hashable
            return original(self, flags, **kwargs)
        if namespace is None:
            original(self, flags, **kwargs)
            parsed[key] = copy.deepcopy(self._visible_options)
            return None
        # What Beam's constructor does once it has parsed (apache_beam 2.77).
        logging.basicConfig()
        self._flags = flags
        self._visible_options = copy.deepcopy(namespace)
        self._all_options = kwargs
        for option_name in self._visible_option_list():
            if option_name not in self._all_options:
                self._all_options[option_name] = getattr(self._visible_options, option_name)
        return None

    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    options_class.__init__ = __init__  # type: ignore[method-assign]
    return True
