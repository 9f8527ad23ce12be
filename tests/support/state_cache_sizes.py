"""Beam's state cache sizes its entries without the modules' globals (test suite, speed only).

The FnApiRunner caches side inputs and state in a cache bounded in bytes, and
weighs each entry with ``objsize.get_deep_size``, which by default first lists
the globals of every loaded module so as not to count them: ~8 ms per entry
with the suite's modules loaded, ~2 % of the suite's CPU. Here the weight skips
that listing (``exclude_modules_globals=False``): an entry that reached a module's
globals would weigh more and leave the cache sooner, which changes when a value
is read again, never what it is (the suite's caches stay far below Beam's
100 MB anyway). ``BEAM_DPSU_TESTS_FULL_STATE_SIZES=1`` turns it off.
"""

import os

import objsize
from apache_beam.runners.worker import statecache

__all__ = ["install"]


def install() -> bool:
    """Replaces ``statecache.get_deep_size``; False if switched off."""
    if os.environ.get("BEAM_DPSU_TESTS_FULL_STATE_SIZES") == "1":
        return False
    original = getattr(statecache.get_deep_size, "__wrapped__", statecache.get_deep_size)

    def get_deep_size(*objs):
        return objsize.get_deep_size(
            *objs, get_size_func=statecache._size_func,
            get_referents_func=statecache._get_referents_func,
            filter_func=statecache._filter_func, exclude_modules_globals=False)

    get_deep_size.__wrapped__ = original  # type: ignore[attr-defined]
    statecache.get_deep_size = get_deep_size
    return True
