"""The suite's speed-ups of Beam change no answer (tests/conftest.py).

* The option-parsing memo (tests/support/options_memo.py) gives every options
  class, for every flag list, the options Beam's own constructor gives, and
  ``get_all_options`` what Beam's gives (overrides, warnings and every keyword
  included); no two objects or calls share a mutable value.
* With Prism off (tests/support/prism_off.py), a TestPipeline runs on the
  FnApiRunner without ever reaching Prism's job submission.
* Pickles stored uncompressed (tests/support/pickle_store.py) load as the same
  objects, and a pickle Beam compressed itself still loads.
* The state cache's weights without the modules' globals
  (tests/support/state_cache_sizes.py) are sizes all the same, and a pipeline
  reading a side input in many bundles gives what Beam gives.
* The inspection memo (tests/support/function_inspection.py) gives Beam's own
  signatures and source bodies, for functions, bound methods and the callables
  it does not keep, and keeps no function alive.
* A ``Create``'s element type (tests/support/create_types.py) is the one Beam
  infers, for values of every shape.
"""

import argparse
import bz2
import collections
import contextlib
import functools
import gc
import os
import weakref

import apache_beam as beam
import pytest
from apache_beam.internal import cloudpickle_pickler, pickler
from apache_beam.options import pipeline_options
from apache_beam.options.pipeline_options import DebugOptions, PipelineOptions
from apache_beam.runners.portability import prism_runner
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.runners.worker import statecache
from apache_beam.transforms import core as beam_core
from apache_beam.typehints import decorators, trivial_inference
from apache_beam.testing.util import assert_that, equal_to

from tests.support import function_inspection, pickle_store

MEMO_OFF = os.environ.get("BEAM_DPSU_TESTS_NO_OPTIONS_MEMO") == "1"
PRISM_ALLOWED = os.environ.get("BEAM_DPSU_TESTS_ALLOW_PRISM") == "1"
BZ2_PICKLES = os.environ.get("BEAM_DPSU_TESTS_BZ2_PICKLES") == "1"
FULL_STATE_SIZES = os.environ.get("BEAM_DPSU_TESTS_FULL_STATE_SIZES") == "1"
INSPECTION_MEMO_OFF = os.environ.get("BEAM_DPSU_TESTS_NO_INSPECTION_MEMO") == "1"
CREATE_TYPES_OFF = os.environ.get("BEAM_DPSU_TESTS_NO_CREATE_TYPES_MEMO") == "1"

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


def _beams_own(cls, flags, **overrides):
    options = cls.__new__(cls)
    PipelineOptions.__init__.__wrapped__(options, list(flags), **overrides)
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
                _beams_all_options(_beams_own(cls, flags))), cls.__name__
            # The option names, as Beam reads them off dir().
            beams_list = PipelineOptions._visible_option_list.__wrapped__
            assert options._visible_option_list() == beams_list(options), cls.__name__


def _beams_all_options(options, **kwargs):
    return PipelineOptions.get_all_options.__wrapped__(options, **kwargs)


ALL_OPTIONS_CALLS = [{}, {"drop_default": True}, {"current_only": True},
                     {"retain_unknown_options": True, "display_warnings": True},
                     {"retain_unknown_options": True, "drop_default": True}]


@pytest.mark.skipif(MEMO_OFF, reason="BEAM_DPSU_TESTS_NO_OPTIONS_MEMO=1")
@pytest.mark.parametrize("flags", FLAG_LISTS, ids=range(len(FLAG_LISTS)))
def test_all_options_are_what_beam_gives_for_every_call_and_override(flags, caplog):
    # Overrides by keyword: a known option, and one no class defines (Beam keeps it
    # with retain_unknown_options, else warns that it discards it).
    overrides = {"runner": "SomeRunner", "no_such_option": 7}
    for cls in (PipelineOptions, DebugOptions, pipeline_options.StandardOptions):
        for kwargs in ALL_OPTIONS_CALLS:
            for _ in range(2):  # the first call fills the memo, the second reads it
                caplog.clear()
                mine = cls(list(flags), **overrides).get_all_options(**kwargs)
                my_warnings = [r.getMessage() for r in caplog.records]
                caplog.clear()
                beams = _beams_all_options(_beams_own(cls, flags, **overrides), **kwargs)
                assert _plain(mine) == _plain(beams), (cls.__name__, kwargs)
                if not any(flag.startswith("--not_a_beam_flag") for flag in flags):
                    # (An unknown flag goes to Beam's own call, and Beam warns of it
                    # once per process.)
                    assert my_warnings == [r.getMessage() for r in caplog.records]
    # Each call's lists are its own, as with Beam's fresh parse.
    first = PipelineOptions(["--experiments=a"]).get_all_options()
    first["experiments"].append("b")
    assert PipelineOptions(["--experiments=a"]).get_all_options()["experiments"] == ["a"]


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
    # Every list a parse gives is each object's own.
    third, fourth = DebugOptions(flags), DebugOptions(flags)
    assert third.experiments == fourth.experiments == ["a"]
    assert third._visible_options.experiments is not fourth._visible_options.experiments


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


class _YieldsAndReturns(beam.DoFn):
    def process(self, x, scale=2):
        if x:
            return [x]
        yield x * scale


def _with_defaults(element, *side, factor=3, **named):
    return element * factor


@pytest.mark.skipif(INSPECTION_MEMO_OFF, reason="BEAM_DPSU_TESTS_NO_INSPECTION_MEMO=1")
def test_the_inspection_memo_gives_beams_signatures_and_source_bodies():
    for module in function_inspection.SIGNATURE_READERS:
        assert hasattr(module.get_signature, "__wrapped__"), module.__name__
    beams_signature = decorators.get_signature.__wrapped__
    callables = [_with_defaults, lambda x, y=1: x + y, _Scaled(3).process, _Scaled(4).process,
                 _YieldsAndReturns().process, beam.Map(lambda x: x).fn.process,
                 functools.partial(_with_defaults, factor=2), len, str.upper, _Scaled,
                 _Scaled.process, beam.CombineFn().add_input]
    for fn in callables:
        for _ in range(2):  # the first call fills the memo, the second reads it
            assert decorators.get_signature(fn) == beams_signature(fn), fn
            with _beams_function(beam_core, "get_signature"):
                beams_args = beam_core.get_function_args_defaults(fn)
            assert beam_core.get_function_args_defaults(fn) == beams_args, fn
    for fn in [_with_defaults, _Scaled(1).process, _YieldsAndReturns().process,
               beam.Map(lambda x: x).fn.process, lambda x: [x]]:
        for _ in range(2):
            with _beams_function(beam_core, "_get_function_body_without_inners"):
                beams_body = beam_core._get_function_body_without_inners(fn)
            assert beam_core._get_function_body_without_inners(fn) == beams_body, fn
    # Beam still finds the process that both yields and returns, and only that one.
    assert beam_core._check_fn_use_yield_and_return(_YieldsAndReturns().process)
    assert not beam_core._check_fn_use_yield_and_return(_Scaled(2).process)


@contextlib.contextmanager
def _beams_function(module, name):
    """``module.name`` back to Beam's own function (its ``__wrapped__``) meanwhile: what
    Beam computes with none of the memo, inner calls included."""
    memoised = getattr(module, name)
    setattr(module, name, memoised.__wrapped__)
    try:
        yield
    finally:
        setattr(module, name, memoised)


@pytest.mark.skipif(INSPECTION_MEMO_OFF, reason="BEAM_DPSU_TESTS_NO_INSPECTION_MEMO=1")
def test_the_inspection_memo_holds_no_function_alive():
    def made_here(x):
        return x

    reference = weakref.ref(made_here)
    decorators.get_signature(made_here)
    beam.Map(made_here)  # its signature, through ParDo
    del made_here
    gc.collect()
    assert reference() is None


_Point = collections.namedtuple("_Point", "x y")

CREATE_VALUE_LISTS = [
    [1, 2, 3],
    ["a", "b"],
    [("u1", "a"), ("u2", "b"), (3, "c"), (1.0, "a"), (True, "a"), ("u", b"x")],
    [("u", ["a", "b"]), ("v", []), ("w", ["a", 1]), ("x", ("a", ("b", 2)))],
    [["a", "b"], ["c"], [1, "a"], [], [None]],
    [("u", {"a": 1}), ("v", {"b": 2.0}), {"k": "v"}, {1: 2}],
    [(), (None,), (None, None), _Point(1, 2), ("a", _Point(1, "b"))],
    [{"a", "b"}, frozenset({1}), set()],
    [beam.Row(a=1, b="x"), beam.Row(a=2, b=None)],
    [("u", len), ("u", str.upper)],
]


@pytest.mark.skipif(CREATE_TYPES_OFF, reason="BEAM_DPSU_TESTS_NO_CREATE_TYPES_MEMO=1")
@pytest.mark.parametrize("values", CREATE_VALUE_LISTS, ids=range(len(CREATE_VALUE_LISTS)))
def test_create_infers_the_element_type_beam_infers(values):
    # Beam's own answers, its nested members' hints included.
    with _beams_function(trivial_inference, "instance_to_type"), \
            _beams_function(beam.Create, "infer_output_type"):
        beams_hints = [trivial_inference.instance_to_type(value) for value in values]
        beams_type = beam.Create(values).infer_output_type(None)
    for _ in range(2):  # the first call fills the memo, the second reads it
        assert [trivial_inference.instance_to_type(value) for value in values] == beams_hints
        assert beam.Create(values).infer_output_type(None) == beams_type
    # The type a pipeline reads off the Create.
    assert beam.Create(values).get_output_type() == beams_type
