"""A memo of Beam's option parsing for the test suite (speed only).

Every ``PipelineOptions.view_as(cls)`` builds a new ``cls(flags)``, and every
construction builds a fresh argparse parser holding all of ``cls``'s flags and
parses ``flags`` with it. Beam asks for a view several times per transform
while it builds and runs a pipeline (``TypeOptions`` in every ``apply``), so
that parsing was about a fifth of the suite's pipeline time.

What a parse yields is a function of the options class and the flags alone:
the memo keeps, per (class, flags), the namespace Beam's own constructor
parsed, and gives each new object a copy of it: a deep copy of every value
that can change in place (a list of experiments), the others shared — so no
two objects share a mutable default, as with Beam's fresh parsers. The rest
of the constructor (the kwargs overrides and the shared option store) runs as
Beam's does. The option names of a parsed namespace are its attributes'
names (what Beam reads off ``dir()``, sorted, on every ``view_as``). Flags
other than a list or tuple of hashable values (None: Beam then reads
``sys.argv``) are parsed by Beam every time.

``get_all_options`` (three times per run: once in ``Pipeline.run``, twice in
the DirectRunner) builds one parser of every options class, about 480 flags,
and parses the flags again; its parse is memoised the same way, per (flags,
the options classes it reads), and what Beam does after its parse (the
object's overrides, ``drop_default``, its warnings) runs as Beam's does. A
parse that leaves unknown flags, or a call with ``add_extra_args_fn``, goes
to Beam every time (those warn, or add flags).
``BEAM_DPSU_TESTS_NO_OPTIONS_MEMO=1`` turns both memos off;
tests/project/test_suite_speedups.py checks that it gives what Beam gives for
every options class.
"""

import argparse
import copy
import logging
import os

from apache_beam.options import pipeline_options
from apache_beam.options.value_provider import ValueProvider

__all__ = ["install"]

# Values a parse can give that no one can change in place: shared, not copied.
IMMUTABLE = (type(None), bool, int, float, str, bytes)


def _mutable_names(values: dict) -> tuple:
    """The names of a parse's values that can change in place (copied for each user)."""
    return tuple(name for name, value in values.items() if type(value) not in IMMUTABLE)


def _fresh(values: dict, mutable: tuple) -> dict:
    """A memoised parse's values for one user: the mutable ones copied, the rest shared."""
    fresh = dict(values)
    for name in mutable:
        fresh[name] = copy.deepcopy(values[name])
    return fresh


def install() -> bool:
    """Replaces ``PipelineOptions.__init__`` by its memoised twin; False if switched off."""
    if os.environ.get("BEAM_DPSU_TESTS_NO_OPTIONS_MEMO") == "1":
        return False
    options_class = pipeline_options.PipelineOptions
    original = getattr(options_class.__init__, "__wrapped__", options_class.__init__)
    # (class, flags) → (the parsed values, the names of those that are mutable, the
    # option names in Beam's order)
    parsed: dict = {}

    def __init__(self, flags=None, **kwargs):
        if not isinstance(flags, (list, tuple)):  # None (sys.argv), a str, an iterator
            return original(self, flags, **kwargs)
        try:
            key = (type(self), tuple(flags))
            entry = parsed.get(key)
        except TypeError:  # flags that are not hashable
            return original(self, flags, **kwargs)
        if entry is None:
            original(self, flags, **kwargs)
            values = copy.deepcopy(vars(self._visible_options))
            parsed[key] = (values, _mutable_names(values), tuple(self._visible_option_list()))
            return None
        # What Beam's constructor does once it has parsed (apache_beam 2.77), with a
        # fresh copy of each mutable value (immutable ones can be shared).
        values, mutable, option_names = entry
        logging.basicConfig()
        self._flags = flags
        fresh = _fresh(values, mutable)
        self._visible_options = argparse.Namespace(**fresh)
        self._all_options = kwargs
        for option_name in option_names:
            if option_name not in kwargs:
                kwargs[option_name] = fresh[option_name]
        return None

    def _visible_option_list(self):
        options = self._visible_options
        if type(options) is not argparse.Namespace:  # not a parse's: as Beam lists them
            return original_list(self)
        # dir() of a Namespace lists its attributes, and nothing public of its class.
        return sorted(name for name in vars(options) if name[0] != "_")

    original_list = getattr(options_class._visible_option_list, "__wrapped__",
                            options_class._visible_option_list)
    __init__.__wrapped__ = original  # type: ignore[attr-defined]
    _visible_option_list.__wrapped__ = original_list  # type: ignore[attr-defined]
    options_class.__init__ = __init__  # type: ignore[method-assign]
    options_class._visible_option_list = _visible_option_list  # type: ignore[method-assign]
    _install_all_options(options_class)
    return True


def _parse_all(flags, classes: tuple):
    """Beam's parse in ``get_all_options`` (apache_beam 2.77) of ``flags`` by the
    parsers of ``classes``: (the values, the names of the mutable ones, each
    option's default), or None if flags are left unknown (Beam then warns, or
    adds them)."""
    subset: dict = {}
    for cls in classes:  # the last of two same-named classes is dropped, as in Beam
        subset.setdefault(str(cls), cls)
    parser = pipeline_options._BeamArgumentParser(allow_abbrev=False)
    for cls in subset.values():
        cls._add_argparse_args(parser)
    known_args, unknown_args = parser.parse_known_args(flags)
    if unknown_args:
        return None
    values = vars(known_args)
    return values, _mutable_names(values), {name: parser.get_default(name) for name in values}


def _install_all_options(options_class) -> None:
    original = getattr(options_class.get_all_options, "__wrapped__",
                       options_class.get_all_options)
    parsed: dict = {}  # (flags, the classes read) → _parse_all's answer
    logger = pipeline_options._LOGGER

    def get_all_options(self, drop_default=False, add_extra_args_fn=None,
                        retain_unknown_options=False, display_warnings=False,
                        current_only=False):
        def beams():
            return original(self, drop_default, add_extra_args_fn, retain_unknown_options,
                            display_warnings, current_only)

        flags = self._flags
        if add_extra_args_fn is not None or not isinstance(flags, (list, tuple)):
            return beams()
        classes = ((type(self),) if current_only
                   else tuple(pipeline_options.PipelineOptions.__subclasses__()))
        key = (tuple(flags), classes)
        try:
            hash(key)
        except TypeError:  # flags that are not hashable
            return beams()
        if key not in parsed:
            parsed[key] = _parse_all(flags, classes)
        entry = parsed[key]
        if entry is None:  # unknown flags: Beam warns, or adds them, every time
            return beams()
        # What Beam does after its parse, with no unknown flag (its warnings and
        # retain_unknown_options' second parse then change nothing).
        values, mutable, defaults = entry
        result = _fresh(values, mutable)
        overrides = self._all_options.copy()
        for k in list(result):
            overrides.pop(k, None)
            if k in self._all_options:
                result[k] = self._all_options[k]
            if (drop_default and defaults[k] == result[k]
                    and not isinstance(defaults[k], ValueProvider)):
                del result[k]
        if overrides:
            if retain_unknown_options:
                result.update(overrides)
            elif not current_only:
                logger.warning("Discarding invalid overrides: %s", overrides)
        return result

    get_all_options.__wrapped__ = original  # type: ignore[attr-defined]
    options_class.get_all_options = get_all_options  # type: ignore[method-assign]
