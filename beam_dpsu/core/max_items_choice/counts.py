"""``CountReleased``'s Δ0 chosen privately (``max_items_per_user="auto"``): ``CountsAutoPlan``.

A share of the counts' budget buys a noisy histogram of users' numbers of distinct
*released* items; the candidate with the smallest expected error of the counts wins
(docs/explanation/proofs.md#counts-of-released-items).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np

from beam_dpsu.core.checks import ParameterError
from beam_dpsu.core.discrete_noise import DiscreteGaussian, DiscreteLaplace
from beam_dpsu.core.max_items_choice.option import DEFAULT_SHARE, AutoMaxItems, split_budget
from beam_dpsu.core.max_items_choice.selection import calibrate_candidates
from beam_dpsu.core.max_items_choice.size_histogram import _noisy_counts, _report, size_bin_edges

__all__ = ["mean_absolute_noise", "CountsAutoPlan", "plan_counts_auto"]


def mean_absolute_noise(distribution) -> float:
    """E|Z| of a ``DiscreteLaplace`` (2q/(1 − q²), q = e^{−1/t}) or ``DiscreteGaussian``
    (σ·√(2/π) from σ = 10 on). Derivation: docs/explanation/bounding.md#the-counts-rule."""
    if isinstance(distribution, DiscreteLaplace):
        q = math.exp(-1.0 / float(distribution.scale))
        return 2.0 * q / (1.0 - q * q)
    if isinstance(distribution, DiscreteGaussian):
        sigma = distribution.sigma
        if sigma >= DiscreteGaussian._CLOSED_FORM_SIGMA:
            return sigma * math.sqrt(2.0 / math.pi)
        z = distribution._support()
        return float(np.sum(distribution.pmf(z) * np.abs(z)))
    raise TypeError(f"no mean absolute value for {type(distribution).__name__}")


@dataclasses.dataclass(frozen=True)
class CountsAutoPlan:
    """Everything ``CountReleased(max_items_per_user="auto")`` needs, fixed when built.

    The rule: the smallest K·E|Z(Δ0)| + Σ_u (n_u − Δ0)_+, K the public number of released
    items (docs/explanation/proofs.md#counts-of-released-items).

    Attributes:
      auto: the share and the candidates asked for.
      size_budget: what the histogram of users' released-item counts spends.
      counts_budget: what the noisy counts spend (any Δ0).
      candidates: the candidates the counts calibrate at under ``counts_budget``.
      mean_absolute_noise: E|Z| of each candidate's count noise.
      edges: the lower edges of the size bins.
    """

    auto: AutoMaxItems
    size_budget: Any
    counts_budget: Any
    candidates: tuple
    mean_absolute_noise: tuple
    edges: tuple

    def _excess(self, released_items: int) -> np.ndarray:
        """(n − Δ0)_+ of a bin's users, one row per candidate, 0 in the bins above K."""
        lower = np.asarray(self.edges, dtype=np.float64)
        upper = np.append(lower[1:] - 1.0, lower[-1])  # the open last bin: its lower edge
        at = np.sqrt(lower * np.minimum(upper, max(float(released_items), 1.0)))
        excess = np.maximum(at[None, :] - np.asarray(self.candidates, np.float64)[:, None], 0.0)
        excess[:, lower > released_items] = 0.0
        return excess

    def expected_error(self, noisy_counts: np.ndarray, released_items: int) -> np.ndarray:
        """K·E|Z(Δ0)| + D(Δ0) for each candidate, D from the noisy counts as they are, with
        NO margin, unlike ``AutoPlan.proxy`` (proofs.md#counts-of-released-items says why)."""
        counts = _noisy_counts(noisy_counts, self.edges)
        if (isinstance(released_items, bool) or int(released_items) != released_items
                or released_items < 0):
            raise ParameterError("released_items", f"must be an int >= 0, got {released_items!r}")
        dropped = self._excess(int(released_items)) @ counts
        return float(released_items) * np.asarray(self.mean_absolute_noise) + dropped

    def choose(self, noisy_counts: np.ndarray, released_items: int) -> int:
        """The candidate with the smallest expected error (the smaller on a tie)."""
        return int(self.candidates[int(np.argmin(self.expected_error(noisy_counts,
                                                                      released_items)))])

    def to_dict(self) -> dict:
        return {**self.auto.to_dict(),
                "rule": "argmin over candidates of K·E|noise(Δ0)| + D(Δ0): K = the number of "
                        "released items, D = Σ_users (released items held − Δ0)_+ from the "
                        "noisy size histogram (beam_dpsu.core.max_items_choice)",
                "size_histogram": {"of": "each user's number of distinct released items",
                                   **_report(self.size_budget, self.edges)},
                "counts_budget": self.counts_budget.to_dict(),
                "candidates_calibrated": list(self.candidates),
                "mean_absolute_noise": list(self.mean_absolute_noise)}


def plan_counts_auto(auto: AutoMaxItems, budget, calibrate) -> tuple:
    """Splits the counts' budget and calibrates every candidate Δ0 (no data).

    Args:
      auto: the share and candidates.
      budget: the counts' ``Budget`` or ``ZCDPBudget`` (not a tight split's part).
      calibrate: (budget, Δ0) → a calibration with ``.noise`` (``count_calibration``).

    Returns:
      The plan, and each calibrated candidate's calibration (a dict).

    Raises:
      ValueError: a tight split's part, or no candidate calibrates.
    """
    auto = auto.with_share(DEFAULT_SHARE)
    size_budget, counts_budget = split_budget(budget, auto.spent)
    calibrations = calibrate_candidates(auto, lambda c: calibrate(counts_budget, c),
                                        "the counts calibrate", "their part of the budget")
    return CountsAutoPlan(
        auto=auto, size_budget=size_budget, counts_budget=counts_budget,
        candidates=tuple(calibrations),
        mean_absolute_noise=tuple(mean_absolute_noise(k.noise) for k in calibrations.values()),
        edges=tuple(int(e) for e in size_bin_edges(auto.candidates))), calibrations
