"""The DPSU baselines of dpne Table 3: n-grams released by set-union selections.

Details: docs/explanation/transforms.md#ngramsbydpsu
"""

from __future__ import annotations

import json
import typing

import apache_beam as beam

from beam_dpsu.core import checks
from beam_dpsu.core import policies
from beam_dpsu.core.budgets import Budget, ZCDPBudget
from beam_dpsu.core.documents import check_document
from beam_dpsu.core.kgrams import kgrams_of
from beam_dpsu.core.mechanisms import WeightedGaussian
from beam_dpsu.core.ngram_calibration import dpsu_even_calibration
from beam_dpsu.core.ngram_parameters import check_max_n
from beam_dpsu.beam.bounding import SampleEachUser, WholeItemCountsPerUser
from beam_dpsu.beam.input_types import DOCUMENT_ELEMENT
from beam_dpsu.beam.histograms import WeightedHistogram
from beam_dpsu.beam.noisy_threshold import NoisyThreshold
from beam_dpsu.beam.release_guard import ReleaseTransform
from beam_dpsu.beam.windowing import require_global_window
from beam_dpsu.select_items import SelectItems

__all__ = ["NgramsByDPSU", "BASELINES"]

BASELINES = ("dpsu-all", "dpsu-even", "dpsu-single")


@beam.typehints.with_input_types(DOCUMENT_ELEMENT)
@beam.typehints.with_output_types(typing.Tuple[str, ...])
class NgramsByDPSU(ReleaseTransform):
    """The DPSU baselines of dpne Table 3, on (user_id, tokens) documents.

    Variants and their calibration: docs/explanation/transforms.md#ngramsbydpsu.

    Args:
      variant: "dpsu-all" (Weighted Gaussian once over lengths 1..T, Δ = T·Δ0),
        "dpsu-even" (one per length k, σ_k = √T·σ*; dpne Prop. 2.3) or "dpsu-single".
      max_n: T, the longest n-gram length.
      budget: ``Budget`` or ``ZCDPBudget`` (a tight split's part only for its one selection).
      max_items_per_user: Δ0, each user's bound per length (in all, T·Δ0 for "dpsu-all").
      n: the one length of "dpsu-single", 1 ≤ n ≤ max_n.
      seed: test-only fixed seed (logs a WARNING); None (default) uses OS entropy.
      accountant: optional ``BudgetAccountant`` to spend ``budget`` from when built.
    """

    def __init__(self, variant: str, max_n: int, budget, max_items_per_user: int = 100, *,
                 n: int | None = None, seed=None, accountant=None):
        super().__init__()
        if variant not in BASELINES:
            raise checks.ParameterError("variant", f"must be one of {BASELINES}, got {variant!r}")
        max_n = check_max_n(max_n)
        if variant == "dpsu-single" and (n is None or not 1 <= n <= max_n):
            raise checks.ParameterError.worded(
                "n", f"dpsu-single needs 1 <= n <= max_n, got n={n!r}")
        if isinstance(budget, (Budget, ZCDPBudget)):  # refused when built, not when run
            checks.require_delta(budget, f"n-gram baseline {variant!r}")
        self.variant, self.max_n, self.budget = variant, int(max_n), budget
        self.max_items, self.n, self.seed = int(max_items_per_user), n, seed
        if variant == "dpsu-all":  # one selection over all lengths: Δ = T·Δ0
            checks.max_items(self.max_n * self.max_items, "max_n * max_items_per_user")
        # A tight split's part holds only for the one mechanism it was made for.
        if variant == "dpsu-even" or getattr(budget, "for_mechanism", None) is None:
            checks.no_tight_part(budget, f"NgramsByDPSU ({variant!r})")
        else:
            checks.tight_part("mechanism", self._selection_mechanism(), budget.for_mechanism)
        self._spend(accountant, budget, "NgramsByDPSU", variant)

    def _selection_mechanism(self):
        """The one SelectItems mechanism of "dpsu-all" and "dpsu-single"."""
        return WeightedGaussian((self.max_n if self.variant == "dpsu-all" else 1) * self.max_items)

    def _ngram_pairs(self, docs, lengths, label, as_text=False):
        # SelectItems takes str items: n-grams travel as JSON lists, decoded after.
        encode = json.dumps if as_text else (lambda g: g)
        return docs | label >> beam.FlatMap(
            lambda d: ((d[0], encode(g)) for k in lengths for g in set(kgrams_of(d[1], k))))

    def expand(self, documents):
        require_global_window(documents, "NgramsByDPSU")
        docs = documents | "CheckDocuments" >> beam.Map(check_document).with_output_types(
            typing.Any)  # (user_id, tokens)
        if self.variant != "dpsu-even":
            every = self.variant == "dpsu-all"
            pairs = self._ngram_pairs(docs, range(1, self.max_n + 1) if every else [self.n],
                                      "AllNgrams" if every else "Ngrams", True)
            select = SelectItems(self._selection_mechanism(), self.budget, seed=self.seed)
            return (pairs  # (user_id, JSON n-gram)
                    | ("SelectAll" if every else "SelectSingle") >> select
                    | "Decode" >> beam.Map(lambda text: tuple(json.loads(text))))
        # T equal Gaussian selections composing to σ* (transforms.md#ngramsbydpsu).
        calibration = dpsu_even_calibration(self.budget, self.max_n, self.max_items)
        outputs = []
        for k in range(1, self.max_n + 1):
            pairs = self._ngram_pairs(docs, [k], f"Ngrams{k}")  # (user_id, k-gram)
            bound = ("PerUser" >> WholeItemCountsPerUser()  # n-grams are tuples, taken whole
                     | "Sample" >> SampleEachUser(self.max_items, self.seed, f"even{k}"))
            outputs.append(
                pairs
                | f"Level{k}/Bound" >> bound
                | f"Level{k}/Histogram" >> WeightedHistogram(policies.weighted_gaussian_weight)
                | f"Level{k}/NoisyThreshold" >> NoisyThreshold(
                    calibration, seed=self.seed, salt=f"even{k}"))
        return outputs | "Union" >> beam.Flatten()
