"""The internal DoFns that declare their outputs ``Any`` (``beam_dpsu.beam.output_types``)
declare what Beam would infer without it, so the pipelines they build are typed,
and coded, as before.

Every such DoFn is built, in the jobs' pipelines and the public transforms at a
fixed Δ0 and with ``auto``, and Beam's own inference is run on it for the input
type its step gets: it must say ``Any``, and the step's output must be ``Any``.
Only the graphs are built; nothing runs.
"""

import importlib
import os
import pkgutil

import apache_beam as beam
import pytest
from apache_beam.pipeline import PipelineVisitor
from apache_beam.transforms.core import CallableWrapperDoFn
from apache_beam.typehints import Any
from apache_beam.typehints.typehints import is_consistent_with
from apache_beam.typehints.decorators import get_type_hints

import beam_dpsu
import pipelines
from tests.support.paths import ROOT
from beam_dpsu import Budget, CountReleased, ExtractNgrams, SelectItems, ZCDPBudget
from beam_dpsu.core import mechanisms
from beam_dpsu.beam.noisy_threshold import KeepWithProbability, NoisyThreshold
from beam_dpsu.core.counts_budget import split_selection_and_counts
from beam_dpsu.ngram_baselines import NgramsByDPSU

pytestmark = pytest.mark.pipeline

BUDGET = ZCDPBudget(0.5, 1e-5)
PAIRS = [("u1", "a"), ("u1", "b"), ("u2", "a"), ("u3", "c")]
ELEMENTS = [["a", "b"], ["a"], ["c", "a"]]
DOCUMENTS = [("u1", ("a", "b", "c")), ("u2", ("a", "b")), ("u3", ("b", "c", "a"))]


def declared_any_classes() -> set:
    """Every DoFn class of the package and the jobs that declares its output ``Any``."""
    found = set()
    for package in (beam_dpsu, pipelines):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            if ".evaluation" in info.name:
                continue
            module = importlib.import_module(info.name)
            for value in vars(module).values():
                if (isinstance(value, type) and issubclass(value, beam.DoFn)
                        and value.__module__ == module.__name__
                        and get_type_hints(value).output_types == ((Any,), {})):
                    found.add(value)
    return found


class _Steps(PipelineVisitor):
    """(DoFn, input type, output type) of every ParDo of a pipeline; and of its ``Map``,
    ``FlatMap`` and ``MapTuple`` steps that declare their output type, (the function
    they wrap, the wrapper DoFn, input type, output type)."""

    def __init__(self):
        self.steps = []
        self.declared_maps = []

    def visit_transform(self, applied):
        fn = getattr(applied.transform, "fn", None)
        if isinstance(applied.transform, beam.ParDo) and isinstance(fn, beam.DoFn):
            output = applied.outputs.get(None)
            step = (fn, applied.inputs[0].element_type,
                    None if output is None else output.element_type)
            self.steps.append(step)
            if (isinstance(fn, CallableWrapperDoFn)
                    and applied.transform.get_type_hints().output_types):
                self.declared_maps.append((_wrapped(fn), *step))


def _wrapped(fn: CallableWrapperDoFn):
    """The function a ``Map``-like step was given (Beam wraps it in a lambda of its own)."""
    wrapper = fn._fn
    names = wrapper.__code__.co_freevars
    return wrapper.__closure__[names.index("fn")].cell_contents if "fn" in names else wrapper


def _ours(function) -> bool:
    code = getattr(function, "__code__", None)
    return code is not None and any(
        os.path.join(ROOT, package) + os.sep in code.co_filename
        for package in ("beam_dpsu", "pipelines"))


def _transforms(p):
    pairs = p | "Pairs" >> beam.Create(PAIRS)
    elements = p | "Elements" >> beam.Create(ELEMENTS)
    for name in sorted(mechanisms.MECHANISMS):
        for delta0 in (2, "auto"):
            params = {"max_items_per_user": delta0, **({"rounds": 3} if name == "sips" else {})}
            mechanism = mechanisms.mechanism_from_name(name, **params)
            for unit, data in (("user_id", pairs), ("element", elements)):
                budget = Budget(1.0, 1e-5) if name == "truncated-geometric" else BUDGET
                _ = data | f"{name} {delta0} {unit}" >> SelectItems(mechanism, budget,
                                                                    privacy_unit=unit)
    parts = split_selection_and_counts(BUDGET, 0.25)
    released = pairs | "Released" >> SelectItems(mechanisms.WeightedGaussian(2), parts.selection)
    for delta0 in (2, "auto"):
        _ = pairs | f"Count {delta0}" >> CountReleased(released, parts.counts,
                                                       max_items_per_user=delta0)
    documents = p | "Documents" >> beam.Create(DOCUMENTS)
    for kwargs in ({}, {"level1": "policy-gaussian"}, {"max_items_per_user": "auto"},
                   {"non_private_stats": True}):
        _ = documents | f"Ngrams {sorted(kwargs.items())}" >> ExtractNgrams(
            3, BUDGET, **{"max_items_per_user": 4, **kwargs})
    _ = documents | "Baseline" >> NgramsByDPSU("dpsu-even", 2, BUDGET, max_items_per_user=2)
    histogram = p | "Histogram" >> beam.Create([("a", 3.0), ("b", 1.0)])
    _ = histogram | "Noisy" >> NoisyThreshold(
        mechanisms.WeightedGaussian(2).calibrate(BUDGET))
    _ = histogram | "Keep" >> KeepWithProbability(
        mechanisms.TruncatedGeometric(2).calibrate(Budget(1.0, 1e-5)))


def _job(p, tmp_path, output_format):
    from pipelines import vocabulary
    job = vocabulary.prepare([
        "--input", "examples/imdb_2k.csv.gz", "--text-field", "review", "--user-field",
        "user", "--rho", "0.1", "--delta", "1e-5", "--with-counts", "--output-format",
        output_format, "--output", str(tmp_path / output_format)])
    vocabulary.build_pipeline(p, job.args, job.mechanism, job.budget)


@pytest.fixture(scope="module")
def visited(tmp_path_factory):
    visitor = _Steps()
    folder = tmp_path_factory.mktemp("jobs")
    for build in (_transforms, lambda p: _job(p, folder, "text"),
                  lambda p: _job(p, folder, "parquet")):
        p = beam.Pipeline()
        build(p)
        p.visit(visitor)
    return visitor


def test_every_declared_dofn_is_built_here(visited):
    steps = visited.steps
    classes = declared_any_classes()
    assert len(classes) >= 10
    built = {type(fn) for fn, _, _ in steps}
    # A base the package only builds through its subclasses is covered by them.
    missing = [c.__qualname__ for c in classes
               if c not in built and not any(b is not c and issubclass(b, c) for b in built)]
    assert missing == [], missing


def test_beam_would_infer_any_for_every_declared_dofn(visited):
    steps = visited.steps
    classes = declared_any_classes()
    checked, seen = set(), set()
    for fn, input_type, output_type in steps:
        if not any(isinstance(fn, c) for c in classes) or (type(fn), input_type) in seen:
            continue
        seen.add((type(fn), input_type))
        # DoFn.infer_output_type is Beam's inference itself: it ignores the declaration.
        inferred = beam.DoFn.infer_output_type(fn, input_type)
        assert inferred == Any, (type(fn).__qualname__, input_type, inferred)
        assert output_type == Any, (type(fn).__qualname__, output_type)
        checked.add(type(fn))
    assert len(checked) >= 10


# The Map steps that declare their output type as Beam would infer it, only to save the
# inference (10-25 ms a step, on every build: logging, writing and the shard step).
DECLARED_AS_INFERRED = {"output.py:WriteReleased.expand.<locals>.<lambda>",
                        "progress.py:LogCount.expand.<locals>.log",
                        "progress.py:log_written.<locals>.log",
                        "job_runner.py:WriteJson.expand.<locals>.<lambda>",
                        "documents.py:check_document"}


def test_beam_would_infer_what_each_declared_map_step_of_ours_declares(visited):
    # Those steps keep the type, and so the coder, of their output PCollection; every
    # other declared step of ours declares a type the inferred one is consistent with.
    checked = set()
    for function, fn, input_type, output_type in visited.declared_maps:
        if not _ours(function):
            continue
        # CallableWrapperDoFn.infer_output_type is Beam's inference: it reads the bytecode
        # and ignores the declaration.
        inferred = CallableWrapperDoFn.infer_output_type(fn, input_type)
        name = function.__code__.co_filename.rsplit(os.sep, 1)[-1] + ":" + function.__qualname__
        if name in DECLARED_AS_INFERRED:
            assert inferred == output_type, (name, input_type, inferred, output_type)
        else:
            assert is_consistent_with(inferred, output_type), (name, inferred, output_type)
        checked.add(name)
    assert DECLARED_AS_INFERRED <= checked, checked
    assert len(checked) >= 10
