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

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import logging
import sys
from typing import TYPE_CHECKING


class _DropApitoolsWarning(logging.Filter):
    """Beam's "apitools not found" warning: the GCP extras are missing, which
    nothing in beam_dpsu needs (apache_beam/io/gcp/internal/clients/bigquery)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.name == "root" and str(record.msg).startswith("apitools not found"))


class _LastResort(logging.Handler):
    """Passes records on as logging does when no handler is configured."""

    def emit(self, record: logging.LogRecord) -> None:
        last = logging.lastResort
        if last is not None and record.levelno >= last.level:
            last.handle(record)


@contextlib.contextmanager
def _apitools_warning_dropped():
    root = logging.getLogger()
    drop = _DropApitoolsWarning()
    stand_in = None if root.handlers else _LastResort()
    root.addFilter(drop)
    if stand_in is not None:
        root.addHandler(stand_in)
    try:
        yield
    finally:
        root.removeFilter(drop)
        if stand_in is not None:
            root.removeHandler(stand_in)


def _import_quietly(module: str) -> None:
    """Imports ``module`` (apache_beam) without its "apitools not found" warning,
    leaving the user's logging as it was: the filter is on the root logger only
    during the import. Beam logs that warning with ``logging.warning``, which
    calls ``logging.basicConfig()`` when the root logger has no handler; a
    stand-in handler meanwhile keeps that from configuring logging for the
    user (whose own ``basicConfig`` would then do nothing). Once imported,
    nothing is done: Beam has already spoken."""
    if module in sys.modules:
        return
    with _apitools_warning_dropped():
        importlib.import_module(module)


class _QuietBeamFinder(importlib.abc.MetaPathFinder):
    """``import apache_beam`` after ``import beam_dpsu``, by anyone (the user's own
    ``import apache_beam as beam``), is quiet too: the finder runs Beam's package
    module as :func:`_import_quietly` does, then removes itself."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "apache_beam":
            return None
        _remove_finder()
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _QuietLoader(spec.loader)
        return spec


class _QuietLoader(importlib.abc.Loader):
    def __init__(self, loader):
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        with _apitools_warning_dropped():
            self._loader.exec_module(module)

    def __getattr__(self, name):  # get_resource_reader, is_package, …
        return getattr(self._loader, name)


_FINDER = _QuietBeamFinder()


def _remove_finder() -> None:
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)


if "apache_beam" not in sys.modules:
    sys.meta_path.insert(0, _FINDER)


if TYPE_CHECKING:  # the names as type checkers and the API reference see them
    from beam_dpsu.core.budgets import (Budget, BudgetAccountant, BudgetExceededError, ZCDPBudget,
                                        dp_to_zcdp, geometric_split_weights)
    from beam_dpsu.core.gaussian import analytic_gaussian_sigma, zcdp_to_dp
    from beam_dpsu.beam.bounding import BoundContributions
    from beam_dpsu.core.user_records import InvalidRecordError
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
# on first use (PEP 562), and Beam is imported quietly before any module that
# needs it.
_NEEDS_BEAM = ("beam_dpsu.beam", "beam_dpsu.select_items", "beam_dpsu.count_released",
               "beam_dpsu.extract_ngrams", "beam_dpsu.ngram_baselines",
               "beam_dpsu.keep_released")


def __getattr__(name: str):
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'beam_dpsu' has no attribute {name!r}")
    if module.startswith(_NEEDS_BEAM):
        _import_quietly("apache_beam")
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
