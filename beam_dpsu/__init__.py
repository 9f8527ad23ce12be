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
import logging
import sys


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
    root = logging.getLogger()
    drop = _DropApitoolsWarning()
    stand_in = None if root.handlers else _LastResort()
    root.addFilter(drop)
    if stand_in is not None:
        root.addHandler(stand_in)
    try:
        importlib.import_module(module)
    finally:
        root.removeFilter(drop)
        if stand_in is not None:
            root.removeHandler(stand_in)


_import_quietly("apache_beam")

from beam_dpsu.accounting import (  # noqa: E402
    Budget,
    BudgetAccountant,
    BudgetExceededError,
    ZCDPBudget,
    analytic_gaussian_sigma,
    dp_to_zcdp,
    geometric_split_weights,
    zcdp_to_dp,
)
from beam_dpsu.bounding import BoundContributions, InvalidRecordError  # noqa: E402
from beam_dpsu.discrete_noise import DiscreteGaussian, DiscreteLaplace  # noqa: E402
from beam_dpsu.configs import (  # noqa: E402
    CountGaussian,
    CountLaplace,
    MECHANISMS,
    SIPS,
    GreedyWithoutSampling,
    TruncatedGeometric,
    PolicyGaussian,
    PolicyLaplace,
    WeightedGaussian,
    WeightedLaplace,
    mechanism_from_name,
)
from beam_dpsu.delta0 import AutoMaxItems  # noqa: E402
from beam_dpsu.histograms import WeightedHistogram  # noqa: E402
from beam_dpsu.mechanisms import SelectItems  # noqa: E402
from beam_dpsu.releases import AppliedTwiceError  # noqa: E402
from beam_dpsu.ngrams import ExtractNgrams  # noqa: E402
from beam_dpsu.output import WriteReleased, read_counts, read_released, unescape  # noqa: E402
from beam_dpsu.selection import NoisyThreshold  # noqa: E402
from beam_dpsu.text import Tokenizer, Tokens, tokenize  # noqa: E402
from beam_dpsu.windowing import NonGlobalWindowError, require_global_window  # noqa: E402
from beam_dpsu.counts import (  # noqa: E402
    CountReleased,
    SelectionAndCountsBudget,
    count_calibration,
    split_selection_and_counts,
)

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
    "SelectionAndCountsBudget",
    "count_calibration",
    "split_selection_and_counts",
]
