"""One budget, one release (docs/privacy.md, invariant 9), and a seed never passes unnoticed
(invariant 2).

Invariant 9: one ``SelectItems`` object applied twice gave two
independent releases under one budget, with no error. Each release transform
(``SelectItems``, ``ExtractNgrams``, ``CountReleased``) is now applied at most
once, anywhere; and transforms given one ``BudgetAccountant`` refuse, when they
are built, to spend past its total.

Invariant 2: a seeded transform logs one WARNING when it is built.
"""

import copy
import logging

import apache_beam as beam
import pytest
from apache_beam.internal import pickler
from tests.support.runner import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from beam_dpsu import (SIPS, AppliedTwiceError, Budget, BudgetAccountant, BudgetExceededError,
                       CountReleased, ExtractNgrams, NoisyThreshold, SelectItems,
                       TruncatedGeometric, WeightedGaussian, ZCDPBudget)
from beam_dpsu.beam.noisy_threshold import KeepWithProbability
from beam_dpsu.ngram_baselines import NgramsByDPSU
from beam_dpsu.beam.sips import SIPSRounds

pytestmark = pytest.mark.pipeline

BUDGET = Budget(1.0, 1e-5)
# Far above every threshold below: 300 users hold "common", no one else anything.
PAIRS = [(f"u{i}", "common") for i in range(300)]
DOCS = [(f"u{i}", ("the", "cat")) for i in range(300)]
SEEDED = "seeded: for tests only, not private"


def select():
    return SelectItems(WeightedGaussian(30), BUDGET, seed=3)


def extract():
    return ExtractNgrams(2, BUDGET, max_items_per_user=4, seed=3)


def count(released):
    return CountReleased(released, Budget(1.0), max_items_per_user=4, seed=3)


# -- invariant 9: a second application is refused when the pipeline is built ------------


def test_one_select_items_applied_twice_is_refused():
    p = beam.Pipeline()
    pairs = p | beam.Create(PAIRS)
    s = select()
    pairs | "a" >> s
    with pytest.raises(RuntimeError) as err:
        pairs | "b" >> s
    message = str(err.value)
    # Why, and what to do instead.
    assert "SelectItems" in message and "already applied as 'a'" in message
    assert "two releases" in message and "whole budget" in message
    assert "BudgetAccountant" in message and "second SelectItems" in message


def test_one_extract_ngrams_applied_twice_is_refused():
    p = beam.Pipeline()
    docs = p | beam.Create(DOCS)
    e = extract()
    docs | "a" >> e
    with pytest.raises(RuntimeError, match="ExtractNgrams .*already applied as 'a'"):
        docs | "b" >> e


def test_one_count_released_applied_twice_is_refused():
    p = beam.Pipeline()
    pairs = p | beam.Create(PAIRS)
    released = pairs | "Select" >> select()
    c = count(released)
    pairs | "a" >> c
    with pytest.raises(RuntimeError, match="CountReleased .*already applied as 'a'.*two "
                                           "releases"):
        pairs | "b" >> c


def test_pipeline_apply_is_refused_too():
    # pipeline.apply reaches expand without the | operator.
    p = beam.Pipeline()
    pairs = p | beam.Create(PAIRS)
    s = select()
    p.apply(s, pairs, "a")
    with pytest.raises(RuntimeError, match="already applied as 'a'"):
        p.apply(s, pairs, "b")


@pytest.mark.parametrize("use_apply", [False, True])
def test_the_same_object_in_a_second_pipeline_is_refused(use_apply):
    s = select()
    first = beam.Pipeline()
    first | "P1" >> beam.Create(PAIRS) | "a" >> s
    second = beam.Pipeline()
    pairs = second | "P2" >> beam.Create(PAIRS)
    with pytest.raises(RuntimeError, match="already applied as 'a' in another pipeline.*"
                                           "one budget"):
        if use_apply:
            second.apply(s, pairs, "a")
        else:
            pairs | "a" >> s


def test_a_release_embedded_in_a_composite_runs_once():
    class Outer(beam.PTransform):
        def __init__(self):
            super().__init__()
            self._select = select()

        def expand(self, pairs):
            return pairs | "Inner" >> self._select

    with TestPipeline() as p:
        released = p | beam.Create(PAIRS) | "Outer" >> Outer()
        assert_that(released, equal_to(["common"]))


def test_a_subclass_calling_super_expand_is_one_application():
    # A class defined here (or in a notebook) is pickled by value; the refused
    # application below leaves a node that Beam pickles when the pipeline runs.
    class Logged(SelectItems):
        def expand(self, pairs):
            return super().expand(pairs) | "Same" >> beam.Map(lambda item: item)

    s = Logged(WeightedGaussian(30), BUDGET, seed=3)
    with TestPipeline() as p:
        pairs = p | beam.Create(PAIRS)
        assert_that(pairs | "a" >> s, equal_to(["common"]))
        with pytest.raises(RuntimeError, match="Logged is already applied as 'a'"):
            pairs | "b" >> s


def test_composites_that_release_are_applied_once_too():
    p = beam.Pipeline()
    docs = p | beam.Create(DOCS)
    baseline = NgramsByDPSU("dpsu-even", 2, BUDGET, 4, seed=3)
    docs | "a" >> baseline
    with pytest.raises(RuntimeError, match="NgramsByDPSU is already applied as 'a'"):
        docs | "b" >> baseline
    rounds = SIPSRounds(SIPS(30).calibrate(ZCDPBudget(0.5, 1e-5)), 30, seed=3)
    pairs = p | "Pairs" >> beam.Create(PAIRS)
    pairs | "c" >> rounds
    with pytest.raises(RuntimeError, match="SIPSRounds is already applied as 'c'"):
        pairs | "d" >> rounds


def test_a_failed_expansion_does_not_use_up_the_object():
    # Refused input (a windowed PCollection): nothing was released, so the
    # same object may be applied to the right input.
    s = select()
    p = beam.Pipeline()
    windowed = (p | "W" >> beam.Create(PAIRS)
                | beam.WindowInto(beam.window.FixedWindows(10)))
    with pytest.raises(Exception, match="window"):
        windowed | "a" >> s
    with TestPipeline() as p:
        assert_that(p | beam.Create(PAIRS) | "a" >> s, equal_to(["common"]))


def test_legit_single_use_survives_pickling_copies_and_the_runner_api():
    # Beam pickles DoFns that hold a transform (ExtractNgrams' level stats do),
    # serialises the pipeline for portable runners, and may copy transforms:
    # none of this is a second application.
    s, e = select(), extract()
    with TestPipeline() as p:
        released = p | beam.Create(PAIRS) | "S" >> s
        grams = p | "Docs" >> beam.Create(DOCS) | "E" >> e
        assert_that(released, equal_to(["common"]), label="Items")
        assert_that(grams, equal_to([("the",), ("cat",), ("the", "cat")]), label="Grams")
        for t in (s, e):
            pickler.loads(pickler.dumps(t))
            copy.deepcopy(t)
        beam.Pipeline.from_runner_api(p.to_runner_api(), p.runner, p.options)
    # A copy of an applied transform is still that budget: refused as well.
    p = beam.Pipeline()
    with pytest.raises(RuntimeError, match="already applied"):
        p | beam.Create(PAIRS) | copy.deepcopy(s)


def test_composites_built_of_releases_still_work():
    # SIPS rounds inside SelectItems, SelectItems inside the DPSU n-gram baseline.
    with TestPipeline() as p:
        pairs = p | beam.Create(PAIRS)
        sips = pairs | "SIPS" >> SelectItems(SIPS(30, rounds=3), ZCDPBudget(0.5, 1e-5), seed=3)
        assert_that(sips, equal_to(["common"]), label="Sips")
        docs = p | "Docs" >> beam.Create(DOCS)
        grams = docs | "DPSU" >> NgramsByDPSU("dpsu-all", 2, BUDGET, 4, seed=3)
        assert_that(grams, equal_to([("the",), ("cat",), ("the", "cat")]), label="Grams")


@pytest.mark.parametrize("duplicate", [copy.copy, copy.deepcopy,
                                       lambda t: pickler.loads(pickler.dumps(t))],
                         ids=["copy", "deepcopy", "pickle"])
@pytest.mark.parametrize("make", [select, extract], ids=["SelectItems", "ExtractNgrams"])
def test_a_copy_made_before_the_first_application_is_the_same_budget(make, duplicate):
    # An "applied" mark on the instance alone would let a copy taken before the first
    # application run as a second, independent release.
    s = make()
    twin = duplicate(s)
    p = beam.Pipeline()
    data = p | beam.Create(DOCS if make is extract else PAIRS)
    data | "a" >> s
    with pytest.raises(RuntimeError, match="already applied as 'a'"):
        data | "b" >> twin


def test_a_release_applying_itself_inside_its_own_expansion_is_refused():
    # Only super().expand() is the one application, not any nested entry.
    class Twice(SelectItems):
        def expand(self, pairs):
            first = super().expand(pairs)
            return (first, pairs | "again" >> self)

    p = beam.Pipeline()
    with pytest.raises(RuntimeError, match="already applied"):
        p | beam.Create(PAIRS) | Twice(WeightedGaussian(30), BUDGET)


def test_super_expand_of_a_subclass_is_one_application():
    class Labelled(SelectItems):
        def expand(self, pairs):
            return super().expand(pairs) | "Upper" >> beam.Map(str.upper)

    with TestPipeline() as p:
        assert_that(p | beam.Create(PAIRS) | Labelled(WeightedGaussian(30), BUDGET, seed=3),
                    equal_to(["COMMON"]))


# -- the public release steps: each object applied once --------------------------------
# NoisyThreshold and KeepWithProbability are public release steps too: applied twice, or
# as a copy of an applied one, they would release one calibrated histogram twice.


def noisy_threshold():
    return NoisyThreshold(WeightedGaussian(10).calibrate(Budget(1.0, 1e-5)))


def keep_with_probability():
    return KeepWithProbability(TruncatedGeometric(1).calibrate(Budget(1.0, 1e-5)))


RELEASE_STEPS = {"NoisyThreshold": noisy_threshold,
                 "KeepWithProbability": keep_with_probability}


def histogram(pipeline):
    return pipeline | "Histogram" >> beam.Create([("a", 3.0), ("b", 1.0)])


@pytest.mark.parametrize("step", sorted(RELEASE_STEPS))
def test_a_release_step_applied_twice_is_refused(step):
    pipeline = beam.Pipeline()
    weights = histogram(pipeline)
    release = RELEASE_STEPS[step]()
    _ = weights | "First" >> release
    with pytest.raises(AppliedTwiceError):
        _ = weights | "Second" >> release


@pytest.mark.parametrize("step", sorted(RELEASE_STEPS))
def test_a_copy_of_an_applied_release_step_is_refused(step):
    pipeline = beam.Pipeline()
    weights = histogram(pipeline)
    release = RELEASE_STEPS[step]()
    _ = weights | "First" >> release
    with pytest.raises(AppliedTwiceError):
        _ = weights | "Second" >> copy.deepcopy(release)


@pytest.mark.parametrize("step", sorted(RELEASE_STEPS))
def test_two_release_steps_each_applied_once_are_fine(step):
    """What the guard must keep allowing (each object is its own release)."""
    pipeline = beam.Pipeline()
    weights = histogram(pipeline)
    _ = weights | "First" >> RELEASE_STEPS[step]()
    _ = weights | "Second" >> RELEASE_STEPS[step]()


# -- one accountant, several transforms: refused at construction ----------------------


def test_dpsu_baselines_spend_from_an_accountant():
    # NgramsByDPSU takes an accountant, so that it can share a total.
    accountant = BudgetAccountant(Budget(1.5, 1e-5))
    NgramsByDPSU("dpsu-all", 2, Budget(1.0, 5e-6), 4, accountant=accountant)
    with pytest.raises(BudgetExceededError, match="NgramsByDPSU"):
        NgramsByDPSU("dpsu-even", 2, Budget(1.0, 5e-6), 4, accountant=accountant)


def test_transforms_sharing_an_accountant_refuse_to_overspend_it():
    accountant = BudgetAccountant(Budget(2.0, 1e-5))
    s = SelectItems(WeightedGaussian(30), Budget(1.0, 5e-6), accountant=accountant)
    assert s.budget == Budget(1.0, 5e-6)
    e = ExtractNgrams(2, Budget(0.5, 4e-6), max_items_per_user=4, accountant=accountant)
    assert accountant.spent() == pytest.approx({"epsilon": 1.5, "delta": 9e-6})
    with pytest.raises(BudgetExceededError) as err:
        SelectItems(WeightedGaussian(30), Budget(0.6, 1e-6), accountant=accountant)
    message = str(err.value)
    # Names what asked, what it asked for, and the total.
    assert "SelectItems" in message and "epsilon=0.6" in message
    assert "total epsilon=2.0" in message and "already spent 1.5" in message
    assert accountant.spent()["epsilon"] == pytest.approx(1.5)   # nothing spent on refusal
    # The counts of the first release take the rest.
    p = beam.Pipeline()
    pairs = p | beam.Create(PAIRS)
    released = pairs | "Select" >> s
    docs = p | "Docs" >> beam.Create(DOCS)
    docs | "Ngrams" >> e
    c = CountReleased(released, Budget(0.5), max_items_per_user=4, accountant=accountant)
    assert c.budget == Budget(0.5)
    with pytest.raises(BudgetExceededError, match="CountReleased.*total epsilon=2.0"):
        CountReleased(released, Budget(0.01), accountant=accountant)
    assert accountant.remaining()["epsilon"] == pytest.approx(0.0, abs=1e-12)


def test_a_refused_construction_spends_nothing_and_kinds_must_match():
    accountant = BudgetAccountant(ZCDPBudget(0.2, 1e-5))
    with pytest.raises(ValueError, match="delta"):
        # A pure budget is refused by the selection before anything is spent.
        SelectItems(WeightedGaussian(30), ZCDPBudget(0.1), accountant=accountant)
    with pytest.raises(TypeError, match="cannot spend a Budget from a ZCDPBudget"):
        SelectItems(WeightedGaussian(30), Budget(0.1, 1e-6), accountant=accountant)
    with pytest.raises(TypeError, match="accountant must be a BudgetAccountant"):
        SelectItems(WeightedGaussian(30), ZCDPBudget(0.1, 1e-6), accountant=object())
    assert accountant.spent() == {"rho": 0.0, "delta": 0.0}


# -- invariant 2: a seeded transform says so when it is built --------------------------


def seeded_warnings(caplog):
    return [r for r in caplog.records
            if r.name == "beam_dpsu" and r.levelno == logging.WARNING and SEEDED in r.message]


def test_a_seeded_transform_warns_once_when_built(caplog):
    caplog.set_level(logging.WARNING, logger="beam_dpsu")
    SelectItems(WeightedGaussian(30), BUDGET)
    ExtractNgrams(2, BUDGET)
    assert seeded_warnings(caplog) == []
    s = SelectItems(SIPS(30), BUDGET, seed=7)
    records = seeded_warnings(caplog)
    assert len(records) == 1 and "SelectItems" in records[0].message
    # Building the pipeline adds nothing: the seeded parts inside a seeded
    # release are that release's seed, already announced.
    p = beam.Pipeline()
    released = p | beam.Create(PAIRS) | s
    assert len(seeded_warnings(caplog)) == 1
    extract()
    count(released)
    NgramsByDPSU("dpsu-even", 2, BUDGET, seed=1)
    NoisyThreshold(SelectItems(WeightedGaussian(3), BUDGET).calibration, seed=1)
    names = [r.message.split(" ")[0] for r in seeded_warnings(caplog)]
    assert names == ["SelectItems", "ExtractNgrams", "CountReleased", "NgramsByDPSU",
                     "NoisyThreshold"]
