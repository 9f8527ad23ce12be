"""Bounding is global (docs/privacy.md, invariant 7): windowed or unbounded input is refused.

BoundContributions, ItemCountsPerUser, the SIPS rounds, the sequential DoFn
and the n-gram GroupByKey group per (user, window): on windowed input a user
whose records fell in 6 fixed windows would contribute Δ0 items 6 times, and
nothing would error. Every public transform that bounds or aggregates users must
refuse such input when the pipeline is built.
"""

import apache_beam as beam
import pytest
import scipy.stats
from apache_beam.testing.test_stream import TestStream
from apache_beam.transforms import window

from beam_dpsu import (BoundContributions, Budget, SelectItems, WeightedGaussian, WeightedHistogram)
from beam_dpsu.core import mechanisms
from beam_dpsu.core import policies
from beam_dpsu.beam.bounding import ItemCountsPerUser, SampleItemsPerUser
from beam_dpsu.extract_ngrams import ExtractNgrams
from beam_dpsu.ngram_baselines import NgramsByDPSU
from beam_dpsu.beam.output import WriteReleased
from beam_dpsu.beam.sequential import SequentialPolicyHistogram
from beam_dpsu.beam.sips import SIPSRounds
from beam_dpsu.beam.windowing import NonGlobalWindowError

pytestmark = pytest.mark.pipeline

BUDGET = Budget(1.0, 1e-5)


def pair_transforms():
    sips = mechanisms.SIPS(3)
    return {
        "SelectItems/weighted": SelectItems(WeightedGaussian(3), BUDGET),
        "SelectItems/sips": SelectItems(sips, BUDGET),
        "SelectItems/policy": SelectItems(mechanisms.PolicyGaussian(3), BUDGET),
        "SelectItems/gw": SelectItems(mechanisms.GreedyWithoutSampling(), BUDGET),
        "BoundContributions": BoundContributions(3),
        "ItemCountsPerUser": ItemCountsPerUser(),
        "SIPSRounds": SIPSRounds(sips.calibrate(BUDGET), 3),
    }


def record_transforms():
    return {
        "SampleItemsPerUser": SampleItemsPerUser(3),
        "WeightedHistogram": WeightedHistogram(policies.weighted_gaussian_weight),
        "SequentialPolicyHistogram": SequentialPolicyHistogram(policies.l2_descent, 5.0,
                                                               b"k" * 32),
    }


def document_transforms():
    return {"ExtractNgrams": ExtractNgrams(2, BUDGET),
            "NgramsByDPSU": NgramsByDPSU("dpsu-even", 2, BUDGET)}


def windowed(p, elements):
    # One user's records spread over 6 fixed windows of 10 s.
    return (p | beam.Create(elements)
            | beam.Map(lambda e: window.TimestampedValue(e, 0))
            | "Stamp" >> beam.Map(lambda e: e)
            | beam.WindowInto(window.FixedWindows(10)))


CASES = ([(name, [("u", "a")]) for name in pair_transforms()]
         + [(name, [("u", ("a",))]) for name in record_transforms()]
         + [(name, [("u", ("a", "b"))]) for name in document_transforms()])


def transform_named(name):
    return {**pair_transforms(), **record_transforms(), **document_transforms()}[name]


@pytest.mark.parametrize("name,elements", CASES, ids=[c[0] for c in CASES])
def test_windowed_input_is_refused(name, elements):
    p = beam.Pipeline()
    with pytest.raises(NonGlobalWindowError, match=f"{name.split('/')[0]} needs its input in "
                                                   "the global window.*FixedWindows"):
        _ = windowed(p, elements) | transform_named(name)


@pytest.mark.parametrize("name", ["SelectItems/weighted", "BoundContributions"])
def test_unbounded_input_is_refused(name):
    p = beam.Pipeline()
    stream = p | TestStream().add_elements([("u", "a")]).advance_watermark_to_infinity()
    assert stream.is_bounded is False
    with pytest.raises(NonGlobalWindowError, match="needs a bounded \\(batch\\) input"):
        _ = stream | transform_named(name)


def test_global_window_with_early_firings_is_refused():
    from apache_beam.transforms import trigger
    p = beam.Pipeline()
    panes = (p | beam.Create([("u", "a")])
             | beam.WindowInto(window.GlobalWindows(),
                               trigger=trigger.Repeatedly(trigger.AfterCount(1)),
                               accumulation_mode=trigger.AccumulationMode.DISCARDING))
    with pytest.raises(NonGlobalWindowError, match="default trigger.*Repeatedly"):
        _ = panes | SelectItems(WeightedGaussian(3), BUDGET)


def test_writer_refuses_windows_too():
    p = beam.Pipeline()
    with pytest.raises(NonGlobalWindowError, match="WriteReleased needs its input"):
        _ = windowed(p, ["a"]) | WriteReleased("/tmp/never")


# The unseeded release of the test below: "common" has 399 + 1/√2 of weight (u0 also
# holds "rare"), "rare" u0's 1/√2. At δ = 1e-5 "rare" passed w.p. 1.7e-6; δ = 1e-7.
REWINDOWED = (WeightedGaussian(3), Budget(1.0, 1e-7))


def test_the_rewindowed_release_fails_by_chance_below_one_in_a_million():
    # It fails when "rare" passes the threshold, or "common" falls below it.
    c = SelectItems(*REWINDOWED).calibration
    rate = (scipy.stats.norm.sf((c.release_threshold - 0.5 ** 0.5) / c.noise_scale)
            + scipy.stats.norm.cdf((c.release_threshold - 399 - 0.5 ** 0.5) / c.noise_scale))
    assert rate < 1e-6, rate


def test_rewindowing_into_the_global_window_is_accepted():
    # Records spread over 6 fixed windows, then put back into the global window:
    # SelectItems builds, its pipeline runs, and it releases what it would from
    # records never windowed: "common" (400 users, weight ≈ 400 against a threshold
    # of 27, σ = 4.8) and not "rare" (one user): fails by chance w.p. 1.7e-8.
    from tests.support.runner import TestPipeline
    from apache_beam.testing.util import assert_that, equal_to
    stamped = [((f"u{u}", "common"), u % 60) for u in range(400)] + [(("u0", "rare"), 55)]
    with TestPipeline() as p:
        released = (p | beam.Create(stamped)
                    | beam.MapTuple(window.TimestampedValue)
                    | beam.WindowInto(window.FixedWindows(10))
                    | "Global" >> beam.WindowInto(window.GlobalWindows())
                    | SelectItems(*REWINDOWED))
        assert_that(released, equal_to(["common"]))


def test_records_rewindowed_into_the_global_window_are_bounded_once_per_user():
    # Per-window GroupByKey, then re-windowed to the global window and sampled: each
    # of the user's 6 window records must not be sampled to Δ0 = 1 on its own (6 items
    # at weight 1, ‖H − H′‖₂² = 6).
    from tests.support.runner import TestPipeline
    from apache_beam.testing.util import assert_that, equal_to
    with TestPipeline() as p:
        histogram = (p | beam.Create([(f"i{t}", t * 10) for t in range(6)])
                     | beam.Map(lambda e: window.TimestampedValue(("u", e[0]), e[1]))
                     | beam.WindowInto(window.FixedWindows(10))
                     | beam.GroupByKey()
                     | "Global" >> beam.WindowInto(window.GlobalWindows())
                     | SampleItemsPerUser(1)
                     | WeightedHistogram(policies.weighted_gaussian_weight)
                     | beam.Values())
        assert_that(histogram, equal_to([1.0]))
