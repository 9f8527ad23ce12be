"""The public transforms' input type hints: a wrongly typed input fails when the
pipeline is built; every form of input they read is accepted."""

import typing

import apache_beam as beam
import numpy as np
import pytest
from tests.support.runner import TestPipeline
from apache_beam.typehints.decorators import TypeCheckError

from beam_dpsu import (BoundContributions, Budget, CountReleased, NoisyThreshold, SelectItems,
                       WeightedGaussian, WeightedHistogram, WriteReleased, tokenize)
from beam_dpsu.core import policies
from beam_dpsu.core.calibration import GAUSSIAN, Calibration

pytestmark = pytest.mark.pipeline

BUDGET = Budget(1.0, 1e-5)
CALIBRATION = Calibration(noise=GAUSSIAN, noise_scale=1.0, release_threshold=5.0,
                          threshold_delta=1e-6, sensitivity_norm=2, sensitivity=1.0,
                          budget=BUDGET, source="test")


class Doc(typing.NamedTuple):
    author: str
    words: typing.List[str]


def transforms(p):
    released = p | "Released" >> beam.Create(["a"])
    return {
        "SelectItems": SelectItems(WeightedGaussian(3), BUDGET),
        "CountReleased": CountReleased(released, BUDGET, max_items_per_user=3),
        "BoundContributions": BoundContributions(3),
        "WeightedHistogram": WeightedHistogram(policies.weighted_gaussian_weight),
        "NoisyThreshold": NoisyThreshold(CALIBRATION),
        "WriteReleased": WriteReleased("/tmp/never-written"),
    }


@pytest.mark.parametrize("name", ["SelectItems", "CountReleased", "BoundContributions",
                                  "WeightedHistogram", "NoisyThreshold", "WriteReleased"])
def test_a_pcollection_of_ints_fails_when_the_pipeline_is_built(name):
    p = TestPipeline()
    numbers = p | beam.Create([1, 2, 3])
    with pytest.raises(TypeCheckError, match=f"Input type hint violation at {name}"):
        _ = numbers | name >> transforms(p)[name]


@pytest.mark.parametrize("name", ["SelectItems", "CountReleased", "BoundContributions"])
@pytest.mark.parametrize("elements", [
    [("u", "a")],                                   # (user_id, item) pairs
    [("u", ["a", "b"])],                            # (user_id, items) records
    [("u", "a"), ("u", {"b"})],                     # a mix
    [("u", np.array(["a"]))],
    [("u",)],                                        # a bad record: refused when it runs
], ids=["pairs", "records", "mixed", "array", "short-tuple"])
def test_every_keyed_input_form_builds(name, elements):
    p = TestPipeline()
    _ = p | beam.Create(elements) | name >> transforms(p)[name]


@pytest.mark.parametrize("elements, kwargs", [
    ([Doc("u", ["a"])], {"user_field": "author", "item_list_field": "words"}),
    ([beam.Row(author="u", words=["a"])], {"user_field": "author", "item_list_field": "words"}),
    ([{"author": "u", "word": "a"}], {"user_field": "author", "item_field": "word"}),
    ([tokenize("a b")], {"privacy_unit": "element"}),
    ([["a", "b"], {"c"}], {"privacy_unit": "element"}),
], ids=["namedtuple", "row", "dict", "tokens", "lists-and-sets"])
def test_fields_and_elements_build(elements, kwargs):
    p = TestPipeline()
    _ = p | beam.Create(elements) | SelectItems(WeightedGaussian(3), BUDGET, **kwargs)


def test_released_items_and_count_pairs_are_written():
    p = TestPipeline()
    for label, elements in (("Str", ["a"]), ("Bytes", [b"a"]), ("Ngrams", [("a", "b")]),
                            ("Counts", [("a", 3)])):
        _ = (p | f"Create{label}" >> beam.Create(elements)
             | f"Write{label}" >> WriteReleased(f"/tmp/never-written-{label}"))
