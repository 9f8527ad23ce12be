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
    from beam_dpsu.beam.bounding import BoundContributions
    from beam_dpsu.beam.histograms import WeightedHistogram
    from beam_dpsu.beam.noisy_threshold import NoisyThreshold
    from beam_dpsu.beam.output import (WriteReleased, WriteReleasedCounts, read_counts,
                                       read_released, unescape)
    from beam_dpsu.beam.release_guard import AppliedTwiceError
    from beam_dpsu.beam.windowing import NonGlobalWindowError, require_global_window
    from beam_dpsu.core.budgets import (Budget, BudgetAccountant, BudgetExceededError, ZCDPBudget,
                                        dp_to_zcdp, geometric_split_weights)
    from beam_dpsu.core.counts_budget import (SelectionAndCountsBudget, count_calibration,
                                              split_selection_and_counts)
    from beam_dpsu.core.discrete_noise import DiscreteGaussian, DiscreteLaplace
    from beam_dpsu.core.gaussian import analytic_gaussian_sigma, zcdp_to_dp
    from beam_dpsu.core.max_items_choice.option import AutoMaxItems
    from beam_dpsu.core.mechanisms import (MECHANISMS, SIPS, CountGaussian, CountLaplace,
                                           GreedyWithoutSampling, PolicyGaussian, PolicyLaplace,
                                           TruncatedGeometric, WeightedGaussian, WeightedLaplace,
                                           mechanism_from_name)
    from beam_dpsu.core.tokenizer import Tokenizer, Tokens, tokenize
    from beam_dpsu.core.user_records import InvalidRecordError, canonical_user_id
    from beam_dpsu.count_released import CountReleased
    from beam_dpsu.extract_ngrams import ExtractNgrams
    from beam_dpsu.keep_released import KeepReleased
    from beam_dpsu.select_items import SelectItems

# The core (beam_dpsu.core) needs no Beam: the public names load their modules
# on first use (PEP 562), so ``import beam_dpsu`` alone imports no Beam.
_MODULES = {  # module -> the public names it defines
    "beam_dpsu.beam.bounding": ("BoundContributions",),
    "beam_dpsu.beam.histograms": ("WeightedHistogram",),
    "beam_dpsu.beam.noisy_threshold": ("NoisyThreshold",),
    "beam_dpsu.beam.output": ("WriteReleased", "WriteReleasedCounts", "read_counts",
                              "read_released", "unescape"),
    "beam_dpsu.beam.release_guard": ("AppliedTwiceError",),
    "beam_dpsu.beam.windowing": ("NonGlobalWindowError", "require_global_window"),
    "beam_dpsu.core.budgets": ("Budget", "BudgetAccountant", "BudgetExceededError", "ZCDPBudget",
                               "dp_to_zcdp", "geometric_split_weights"),
    "beam_dpsu.core.counts_budget": ("SelectionAndCountsBudget", "count_calibration",
                                     "split_selection_and_counts"),
    "beam_dpsu.core.discrete_noise": ("DiscreteGaussian", "DiscreteLaplace"),
    "beam_dpsu.core.gaussian": ("analytic_gaussian_sigma", "zcdp_to_dp"),
    "beam_dpsu.core.max_items_choice.option": ("AutoMaxItems",),
    "beam_dpsu.core.mechanisms": ("MECHANISMS", "SIPS", "CountGaussian", "CountLaplace",
                                  "GreedyWithoutSampling", "PolicyGaussian", "PolicyLaplace",
                                  "TruncatedGeometric", "WeightedGaussian", "WeightedLaplace",
                                  "mechanism_from_name"),
    "beam_dpsu.core.tokenizer": ("Tokenizer", "Tokens", "tokenize"),
    "beam_dpsu.core.user_records": ("InvalidRecordError", "canonical_user_id"),
    "beam_dpsu.count_released": ("CountReleased",),
    "beam_dpsu.extract_ngrams": ("ExtractNgrams",),
    "beam_dpsu.keep_released": ("KeepReleased",),
    "beam_dpsu.select_items": ("SelectItems",),
}
_PUBLIC = {name: module for module, names in _MODULES.items() for name in names}


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'beam_dpsu' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_PUBLIC))


__all__ = [  # the names of _MODULES, spelled out for type checkers
    "BoundContributions", "WeightedHistogram", "NoisyThreshold", "WriteReleased",
    "WriteReleasedCounts", "read_counts", "read_released", "unescape", "AppliedTwiceError",
    "NonGlobalWindowError", "require_global_window", "Budget", "BudgetAccountant",
    "BudgetExceededError", "ZCDPBudget", "dp_to_zcdp", "geometric_split_weights",
    "SelectionAndCountsBudget", "count_calibration", "split_selection_and_counts",
    "DiscreteGaussian", "DiscreteLaplace", "analytic_gaussian_sigma", "zcdp_to_dp",
    "AutoMaxItems", "MECHANISMS", "SIPS", "CountGaussian", "CountLaplace",
    "GreedyWithoutSampling", "PolicyGaussian", "PolicyLaplace", "TruncatedGeometric",
    "WeightedGaussian", "WeightedLaplace", "mechanism_from_name", "Tokenizer", "Tokens",
    "tokenize", "InvalidRecordError", "canonical_user_id", "CountReleased", "ExtractNgrams",
    "KeepReleased", "SelectItems",
]
