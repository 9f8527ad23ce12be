"""beam_dpsu: differentially private set union on Apache Beam.

Release as many items as possible (a vocabulary, n-grams, partition keys) from
data held by users, under user-level (ε, δ)-DP or δ-approximate ρ-zCDP.

    import apache_beam as beam
    import beam_dpsu

    with beam.Pipeline() as p:
        pairs = p | beam.Create([("alice", "cat"), ("bob", "cat"), ...])
        released = pairs | beam_dpsu.SelectItems(
            beam_dpsu.WeightedGaussian(max_items_per_user=100),
            beam_dpsu.ZCDPBudget(rho=0.1, delta=1e-5))

Free text becomes items with ``beam_dpsu.tokenize`` (or a
``beam_dpsu.Tokenizer(lowercase=False, ...)`` of your own).
"""

__version__ = "0.1.0"

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the names as type checkers and the API reference see them
    from beam_dpsu.core.budgets import (Budget, BudgetAccountant, BudgetExceededError, ZCDPBudget,
                                        dp_to_zcdp, geometric_split_weights)
    from beam_dpsu.core.gaussian import analytic_gaussian_sigma, zcdp_to_dp
    from beam_dpsu.beam.bounding import BoundContributions
    from beam_dpsu.core.user_records import InvalidRecordError, canonical_user_id
    from beam_dpsu.core.discrete_noise import (DiscreteGaussian, DiscreteLaplace)
    from beam_dpsu.core.mechanisms import (CountGaussian, CountLaplace, MECHANISMS, SIPS,
                                           GreedyWithoutSampling, TruncatedGeometric,
                                           PolicyGaussian, PolicyLaplace, WeightedGaussian,
                                           WeightedLaplace, mechanism_from_name)
    from beam_dpsu.core.max_items_choice.option import (AutoMaxItems)
    from beam_dpsu.beam.histograms import (WeightedHistogram)
    from beam_dpsu.select_items import (SelectItems)
    from beam_dpsu.beam.release_guard import (AppliedTwiceError)
    from beam_dpsu.extract_ngrams import (ExtractNgrams)
    from beam_dpsu.beam.output import (WriteReleased, WriteReleasedCounts, read_counts,
                                       read_released, unescape)
    from beam_dpsu.beam.noisy_threshold import (NoisyThreshold)
    from beam_dpsu.core.tokenizer import (Tokenizer, Tokens, tokenize)
    from beam_dpsu.beam.windowing import (NonGlobalWindowError, require_global_window)
    from beam_dpsu.count_released import CountReleased
    from beam_dpsu.keep_released import KeepReleased
    from beam_dpsu.core.counts_budget import (SelectionAndCountsBudget, count_calibration,
                                              split_selection_and_counts)

_PUBLIC = {  # public name -> the module that defines it
    "Budget": "beam_dpsu.core.budgets",
    "BudgetAccountant": "beam_dpsu.core.budgets",
    "BudgetExceededError": "beam_dpsu.core.budgets",
    "ZCDPBudget": "beam_dpsu.core.budgets",
    "analytic_gaussian_sigma": "beam_dpsu.core.gaussian",
    "dp_to_zcdp": "beam_dpsu.core.budgets",
    "geometric_split_weights": "beam_dpsu.core.budgets",
    "zcdp_to_dp": "beam_dpsu.core.gaussian",
    "BoundContributions": "beam_dpsu.beam.bounding",
    "InvalidRecordError": "beam_dpsu.core.user_records",
    "canonical_user_id": "beam_dpsu.core.user_records",
    "DiscreteGaussian": "beam_dpsu.core.discrete_noise",
    "DiscreteLaplace": "beam_dpsu.core.discrete_noise",
    "CountGaussian": "beam_dpsu.core.mechanisms",
    "CountLaplace": "beam_dpsu.core.mechanisms",
    "MECHANISMS": "beam_dpsu.core.mechanisms",
    "SIPS": "beam_dpsu.core.mechanisms",
    "GreedyWithoutSampling": "beam_dpsu.core.mechanisms",
    "TruncatedGeometric": "beam_dpsu.core.mechanisms",
    "PolicyGaussian": "beam_dpsu.core.mechanisms",
    "PolicyLaplace": "beam_dpsu.core.mechanisms",
    "WeightedGaussian": "beam_dpsu.core.mechanisms",
    "WeightedLaplace": "beam_dpsu.core.mechanisms",
    "mechanism_from_name": "beam_dpsu.core.mechanisms",
    "AutoMaxItems": "beam_dpsu.core.max_items_choice.option",
    "WeightedHistogram": "beam_dpsu.beam.histograms",
    "SelectItems": "beam_dpsu.select_items",
    "AppliedTwiceError": "beam_dpsu.beam.release_guard",
    "ExtractNgrams": "beam_dpsu.extract_ngrams",
    "WriteReleased": "beam_dpsu.beam.output",
    "WriteReleasedCounts": "beam_dpsu.beam.output",
    "read_counts": "beam_dpsu.beam.output",
    "read_released": "beam_dpsu.beam.output",
    "unescape": "beam_dpsu.beam.output",
    "NoisyThreshold": "beam_dpsu.beam.noisy_threshold",
    "Tokenizer": "beam_dpsu.core.tokenizer",
    "Tokens": "beam_dpsu.core.tokenizer",
    "tokenize": "beam_dpsu.core.tokenizer",
    "NonGlobalWindowError": "beam_dpsu.beam.windowing",
    "require_global_window": "beam_dpsu.beam.windowing",
    "CountReleased": "beam_dpsu.count_released",
    "KeepReleased": "beam_dpsu.keep_released",
    "SelectionAndCountsBudget": "beam_dpsu.core.counts_budget",
    "count_calibration": "beam_dpsu.core.counts_budget",
    "split_selection_and_counts": "beam_dpsu.core.counts_budget",
}

# The core (beam_dpsu.core) needs no Beam: the public names load their modules
# on first use (PEP 562), so ``import beam_dpsu`` alone imports no Beam.


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'beam_dpsu' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_PUBLIC))


__all__ = [
    "Budget",
    "BudgetAccountant",
    "BudgetExceededError",
    "ZCDPBudget",
    "analytic_gaussian_sigma",
    "dp_to_zcdp",
    "geometric_split_weights",
    "zcdp_to_dp",
    "BoundContributions",
    "InvalidRecordError",
    "canonical_user_id",
    "CountGaussian",
    "CountLaplace",
    "MECHANISMS",
    "SIPS",
    "GreedyWithoutSampling",
    "TruncatedGeometric",
    "PolicyGaussian",
    "PolicyLaplace",
    "WeightedGaussian",
    "WeightedLaplace",
    "mechanism_from_name",
    "AutoMaxItems",
    "WeightedHistogram",
    "SelectItems",
    "AppliedTwiceError",
    "ExtractNgrams",
    "WriteReleased",
    "WriteReleasedCounts",
    "read_released",
    "read_counts",
    "unescape",
    "NoisyThreshold",
    "Tokenizer",
    "Tokens",
    "tokenize",
    "NonGlobalWindowError",
    "require_global_window",
    "DiscreteGaussian",
    "DiscreteLaplace",
    "CountReleased",
    "KeepReleased",
    "SelectionAndCountsBudget",
    "count_calibration",
    "split_selection_and_counts",
]
