"""The suite's speed-ups of Beam change no answer (tests/conftest.py).

* The option-parsing memo (tests/support/options_memo.py) gives every options
  class, for every flag list, the options Beam's own constructor gives, and no
  two objects share a mutable value.
* With Prism off (tests/support/prism_off.py), a TestPipeline runs on the
  FnApiRunner without ever reaching Prism's job submission.
* Pickles stored uncompressed (tests/support/pickle_store.py) load as the same
  objects, and a pickle Beam compressed itself still loads.
* The state cache's weights without the modules' globals
  (tests/support/state_cache_sizes.py) are sizes all the same, and a pipeline
  reading a side input in many bundles gives what Beam gives.
"""

import argparse
import bz2
import os

import apache_beam as beam
import pytest
from apache_beam.internal import cloudpickle_pickler, pickler
from apache_beam.options import pipeline_options
from apache_beam.options.pipeline_options import DebugOptions, PipelineOptions
from apache_beam.runners.portability import prism_runner
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.runners.worker import statecache
from apache_beam.testing.util import assert_that, equal_to

from tests.support import pickle_store

MEMO_OFF = os.environ.get("BEAM_DPSU_TESTS_NO_OPTIONS_MEMO") == "1"
PRISM_ALLOWED = os.environ.get("BEAM_DPSU_TESTS_ALLOW_PRISM") == "1"
BZ2_PICKLES = os.environ.get("BEAM_DPSU_TESTS_BZ2_PICKLES") == "1"
FULL_STATE_SIZES = os.environ.get("BEAM_DPSU_TESTS_FULL_STATE_SIZES") == "1"

FLAG_LISTS = [
    [],
    ["--runner=DirectRunner", "--direct_num_workers=2",
     "--direct_running_mode=multi_processing"],
    ["--experiments=a", "--experiments=b", "--type_check_strictness=ALL_REQUIRED"],
    ["--not_a_beam_flag=3", "--save_main_session", "--temp_location", "/tmp/x"],
]


def _options_classes():
    seen, todo = [], [PipelineOptions]
    while todo:
        cls = todo.pop()
        if cls not in seen:
            seen.append(cls)
            todo.extend(cls.__subclasses__())
    return seen


def _plain(value):
    """A comparable form of an option value (ValueProviders compare by their fields)."""
    if isinstance(value, (list, tuple)):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if hasattr(value, "__dict__") and not isinstance(value, type):
        return (type(value).__name__, _plain(vars(value)))
    return value


def _beams_own(cls, flags):
    options = cls.__new__(cls)
    PipelineOptions.__init__.__wrapped__(options, flags)
    return options


@pytest.mark.skipif(MEMO_OFF, reason="BEAM_DPSU_TESTS_NO_OPTIONS_MEMO=1")
def test_the_options_memo_is_installed():
    assert hasattr(pipeline_options.PipelineOptions.__init__, "__wrapped__")


@pytest.mark.skipif(MEMO_OFF, reason="BEAM_DPSU_TESTS_NO_OPTIONS_MEMO=1")
@pytest.mark.parametrize("flags", FLAG_LISTS, ids=range(len(FLAG_LISTS)))
def test_the_options_memo_gives_what_beam_gives_for_every_options_class(flags):
    classes = _options_classes()
    assert len(classes) > 20  # every options class Beam and its IOs define
    for cls in classes:
        expected = _plain(vars(_beams_own(cls, flags)._visible_options))
        for _ in range(2):  # the first parse fills the memo, the second reads it
            options = cls(list(flags))
            assert _plain(vars(options._visible_options)) == expected, cls.__name__
            assert _plain(options.get_all_options()) == _plain(
                _beams_own(cls, flags).get_all_options()), cls.__name__


@pytest.mark.skipif(MEMO_OFF, reason="BEAM_DPSU_TESTS_NO_OPTIONS_MEMO=1")
def test_memoised_options_share_no_mutable_value_and_views_share_their_store():
    flags = ["--experiments=a"]
    first, second = PipelineOptions(flags), PipelineOptions(flags)
    first.view_as(DebugOptions).add_experiment("b")
    assert first.view_as(DebugOptions).experiments == ["a", "b"]
    assert second.view_as(DebugOptions).experiments == ["a"]
    assert PipelineOptions(flags).view_as(DebugOptions).experiments == ["a"]
    # A view writes through to the object it was taken from, as in Beam.
    first.view_as(DebugOptions).experiments = ["c"]
    assert first.get_all_options()["experiments"] == ["c"]
    assert isinstance(first._visible_options, argparse.Namespace)


def test_options_that_are_not_a_list_are_parsed_by_beam_every_time():
    with pytest.raises(ValueError, match="iterable of of strings"):
        PipelineOptions("--runner=DirectRunner")
    # An iterator is read once, by Beam's own parser (a later view finds it spent, as in Beam).
    assert DebugOptions(iter(["--experiments=x"])).experiments == ["x"]


@pytest.mark.skipif(PRISM_ALLOWED, reason="BEAM_DPSU_TESTS_ALLOW_PRISM=1")
def test_pipelines_run_on_the_fn_api_runner_without_reaching_prism(monkeypatch):
    submitted = []
    monkeypatch.setattr(prism_runner.PrismRunner, "run_portable_pipeline",
                        lambda self, *args, **kwargs: submitted.append(args),
                        raising=False)
    with TestPipeline() as p:
        assert_that(p | beam.Create([1, 2, 3]) | beam.Map(lambda x: 2 * x),
                    equal_to([2, 4, 6]))
    assert submitted == []


class _Scaled(beam.DoFn):
    def __init__(self, factor):
        self.factor = factor

    def process(self, x):
        yield x * self.factor


@pytest.mark.skipif(BZ2_PICKLES, reason="BEAM_DPSU_TESTS_BZ2_PICKLES=1")
def test_pickles_are_stored_uncompressed_and_load_as_the_same_objects():
    assert cloudpickle_pickler.bz2 is pickle_store.STORE
    encoded = pickler.dumps(_Scaled(3))
    assert pickle_store.MARKER in cloudpickle_pickler.base64.b64decode(encoded)
    assert list(pickler.loads(encoded).process(2)) == [6]
    # A pickle compressed by Beam's own bz2 (another process, a saved proto) still loads.
    raw = pickle_store._decompress(cloudpickle_pickler.base64.b64decode(encoded))
    compressed = cloudpickle_pickler.base64.b64encode(bz2.compress(raw, 9))
    assert list(pickler.loads(compressed).process(5)) == [15]


@pytest.mark.skipif(FULL_STATE_SIZES, reason="BEAM_DPSU_TESTS_FULL_STATE_SIZES=1")
def test_state_cache_weights_skip_the_modules_globals_and_are_sizes():
    assert hasattr(statecache.get_deep_size, "__wrapped__")
    small, large = [1, 2, 3], list(range(10_000))
    assert 0 < statecache.get_deep_size(small) < statecache.get_deep_size(large)
    assert statecache.get_deep_size(large) == statecache.get_deep_size.__wrapped__(large)
    # Side inputs go through the cache: read in every bundle, they give Beam's answer.
    with TestPipeline() as p:
        side = p | "Side" >> beam.Create([10])
        main = (p | beam.Create(list(range(50))) | beam.Reshuffle()
                | beam.Map(lambda x, s: x + s, s=beam.pvalue.AsSingleton(side)))
        assert_that(main, equal_to([x + 10 for x in range(50)]))


def test_beams_own_pickles_are_bz2_for_worker_processes(beams_own_pickles):
    encoded = pickler.dumps(_Scaled(2))
    raw = cloudpickle_pickler.base64.b64decode(encoded)
    assert raw.startswith(b"BZh")  # what a worker process's Beam reads
    assert list(pickler.loads(encoded).process(4)) == [8]
