"""Beam's pickled functions stored uncompressed in the test suite (speed only).

Beam pickles every DoFn, CombineFn and coder of a pipeline when it builds and
translates it, and unpickles them again to run each bundle; each pickle is
compressed with bz2 at level 9 (``apache_beam.internal.cloudpickle_pickler``,
and its dill twin), to keep the pipeline protos of large jobs small. In the
suite's many small in-process pipelines that compression was ~3 % of all CPU.
Here the picklers' ``bz2`` is a stand-in that stores the pickle as it is, behind
a marker no bz2 stream begins with, and reads both (a pickle compressed
elsewhere still loads): the same objects come back. Jobs the suite runs as
subprocesses are untouched. A pipeline whose workers are other processes (the
DirectRunner's ``multi_processing`` mode, run in the test's own process) sends
them its pickles, which they read with Beam's own bz2: such a test takes the
``beams_own_pickles`` fixture (tests/conftest.py), under which the picklers
compress as Beam does. ``BEAM_DPSU_TESTS_BZ2_PICKLES=1`` turns the store off;
tests/project/test_suite_speedups.py checks the round trip.
"""

import bz2
import contextlib
import os
import types

from apache_beam.internal import cloudpickle_pickler

__all__ = ["install", "beams_own", "MARKER"]

MARKER = b"beam_dpsu:raw:"  # a bz2 stream begins with b"BZh"


def _compress(data, compresslevel=9):
    return MARKER + bytes(data)


def _decompress(data):
    data = bytes(data)
    return data[len(MARKER):] if data.startswith(MARKER) else bz2.decompress(data)


STORE = types.SimpleNamespace(compress=_compress, decompress=_decompress)


def _picklers() -> list:
    modules = [cloudpickle_pickler]
    try:
        from apache_beam.internal import dill_pickler
        modules.append(dill_pickler)
    except ImportError:  # dill is optional
        pass
    return modules


def install() -> bool:
    """Gives Beam's picklers the uncompressed store; False if switched off."""
    if os.environ.get("BEAM_DPSU_TESTS_BZ2_PICKLES") == "1":
        return False
    for module in _picklers():
        module.bz2 = STORE  # type: ignore[attr-defined]
    return True


@contextlib.contextmanager
def beams_own():
    """Within: the picklers compress with bz2 as Beam does (and still read the store)."""
    modules = _picklers()
    before = [module.bz2 for module in modules]
    for module in modules:
        module.bz2 = types.SimpleNamespace(compress=bz2.compress, decompress=_decompress)
    try:
        yield
    finally:
        for module, previous in zip(modules, before):
            module.bz2 = previous
