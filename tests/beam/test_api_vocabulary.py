"""One API vocabulary: keyword-only parameters after the first arguments, one
spelling of Δ0 (``max_items_per_user``) and field names that cannot be mistaken."""

import inspect

import apache_beam as beam
import pytest
from tests.support.runner import TestPipeline

import beam_dpsu
from beam_dpsu import (SIPS, AutoMaxItems, Budget, CountReleased, ExtractNgrams,
                       GreedyWithoutSampling, SelectItems, WeightedGaussian, ZCDPBudget)
from beam_dpsu.ngram_baselines import NgramsByDPSU

pytestmark = pytest.mark.pipeline

# Each public callable and the parameters it takes positionally (all others are
# keyword-only): a positional argument past these is a TypeError, not a silent
# mix-up (SelectItems(m, b, 7) was seed=7; SIPS(100, 3, 1/3) rounds and ratio).
POSITIONAL = {
    "SelectItems": ["mechanism", "budget"],
    "CountReleased": ["released", "budget"],
    "ExtractNgrams": ["max_n", "budget", "max_items_per_user"],
    "KeepReleased": ["released"],
    "WriteReleased": ["file_path_prefix"],
    "WriteReleasedCounts": ["file_path_prefix"],
    "BoundContributions": ["max_items_per_user"],
    "WeightedHistogram": ["item_weight"],
    "NoisyThreshold": ["calibration"],
    "read_released": ["source"],
    "read_counts": ["source"],
    "AutoMaxItems": [],
    "SIPS": ["max_items_per_user"],
    "PolicyLaplace": ["max_items_per_user"],
    "PolicyGaussian": ["max_items_per_user"],
    "GreedyWithoutSampling": ["max_items_per_user"],
}


def positional_parameters(obj) -> list:
    signature = inspect.signature(obj)
    return [name for name, p in signature.parameters.items()
            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and name != "self"]


@pytest.mark.parametrize("name", sorted(POSITIONAL))
def test_only_the_first_arguments_are_positional(name):
    assert positional_parameters(getattr(beam_dpsu, name)) == POSITIONAL[name]


def test_the_ngram_baselines_take_what_extract_ngrams_takes_positionally():
    assert positional_parameters(NgramsByDPSU) == ["variant", "max_n", "budget",
                                                   "max_items_per_user"]


def test_a_positional_argument_past_the_first_ones_is_a_type_error():
    budget = ZCDPBudget(0.1, 1e-5)
    with pytest.raises(TypeError, match="positional"):
        SelectItems(WeightedGaussian(10), budget, 7)  # was seed=7
    with pytest.raises(TypeError, match="positional"):
        SIPS(100, 3, 1 / 3)  # were rounds and ratio
    with pytest.raises(TypeError, match="positional"):
        AutoMaxItems(0.05)  # was the share
    with pytest.raises(TypeError, match="positional"):
        ExtractNgrams(3, budget, 10, 0.01)  # was eta
    with pytest.raises(TypeError, match="positional"):
        beam_dpsu.read_released(["a"], True)  # was as_bytes
    p = TestPipeline()
    released = p | beam.Create(["a"])
    with pytest.raises(TypeError, match="positional"):
        CountReleased(released, Budget(1.0), 5)  # was max_items_per_user


def test_delta0_is_max_items_per_user_everywhere_an_int_auto_or_auto_max_items():
    budget = Budget(1.0, 1e-5)
    released = TestPipeline() | beam.Create(["a"])
    auto = AutoMaxItems(share=0.1, candidates=(1, 10))
    for value in (10, "auto", auto):
        assert WeightedGaussian(max_items_per_user=value).max_items_per_user in (10, auto,
                                                                                AutoMaxItems())
        assert GreedyWithoutSampling(max_items_per_user=value).max_items_per_user in (
            10, auto, AutoMaxItems())
        SelectItems(WeightedGaussian(max_items_per_user=value), budget)
        CountReleased(released, Budget(1.0), max_items_per_user=value)
        ExtractNgrams(2, budget, max_items_per_user=value)
    # No other spelling is taken (a mistyped or older keyword is Python's TypeError).
    for spelling in ("max_items", "delta0", "auto_max_items"):
        with pytest.raises(TypeError, match="unexpected keyword argument"):
            CountReleased(released, Budget(1.0), **{spelling: 5})
        with pytest.raises(TypeError, match="unexpected keyword argument"):
            SelectItems(WeightedGaussian(5), budget, **{spelling: 5})


def test_one_item_and_a_list_of_items_have_field_names_that_differ_by_a_word():
    budget = ZCDPBudget(0.1, 1e-5)
    select = SelectItems(WeightedGaussian(5), budget, user_field="u", item_list_field="ws")
    assert (select.fields.value_arg, select.fields.kind) == ("item_list_field", "items")
    select = SelectItems(WeightedGaussian(5), budget, user_field="u", item_field="w")
    assert (select.fields.value_arg, select.fields.kind) == ("item_field", "item")
    released = TestPipeline() | beam.Create(["a"])
    counter = CountReleased(released, Budget(1.0), user_field="u", item_list_field="ws")
    assert counter.fields.value_arg == "item_list_field"
    # The old name, one letter from item_field, is gone.
    with pytest.raises(TypeError, match="unexpected keyword argument 'items_field'"):
        SelectItems(WeightedGaussian(5), budget, user_field="u", items_field="ws")
    with pytest.raises(TypeError, match="unexpected keyword argument 'items_field'"):
        CountReleased(released, Budget(1.0), user_field="u", items_field="ws")
