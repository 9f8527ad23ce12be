"""A selection's Δ0 chosen from the noisy size histogram: ``AutoPlan``, ``plan_auto``.

The rule maximises M(Δ0)/T(Δ0), M = Σ_u g(min(n_u, Δ0)) taken two noise deviations low,
T the release threshold in weight units; SIPS is scored by ``max_items_choice.rounds``.
Derivation and each g: docs/explanation/proofs.md#choosing-0-privately-the-mt-rule.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

import beam_dpsu.core.max_items_choice.rounds as max_items_rounds
from beam_dpsu.core.max_items_choice.option import (AutoMaxItems, default_share, is_auto,
                                                    split_budget, with_max_items)
from beam_dpsu.core.max_items_choice.size_histogram import (_noisy_counts, _report,
                                                            size_bin_edges, size_noise)
from beam_dpsu.core.pre_threshold import calibrations as pre_threshold_calibrations
from beam_dpsu.core.checks import ParameterError
from beam_dpsu.core.budgets import Budget, ZCDPBudget

__all__ = ["MASSES", "user_mass", "weight_threshold", "AutoPlan", "calibrate_candidates",
           "plan_auto"]


# g(m) by name: a plan holds the name, and travels to the workers pickled.
MASSES: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "m": lambda m: m, "1": np.ones_like, "sqrt(m)": np.sqrt, "m/(m+1)": lambda m: m / (m + 1.0)}


def user_mass(mechanism) -> str:
    """The name, in ``MASSES``, of g(m), the weight a user keeping m items places."""
    mass = getattr(mechanism, "user_mass", None)
    if mass not in MASSES:
        raise TypeError(f"no Δ0 rule for {type(mechanism).__name__}")
    return mass


def weight_threshold(calibration) -> float:
    """T: the weight at which an item is released with probability ½."""
    threshold = getattr(calibration, "weight_threshold", None)
    if threshold is None:
        raise TypeError(f"no release threshold for {type(calibration).__name__}")
    return threshold()


@dataclasses.dataclass(frozen=True)
class AutoPlan:
    """Everything "auto" needs, fixed when the transform is built (no data).

    Attributes:
      auto: the share and the candidates asked for.
      size_budget: what the size histogram spends.
      selection_budget: what the selection spends (any Δ0).
      candidates: those the mechanism calibrates at under ``selection_budget``.
      weight_thresholds: T(Δ0) of each candidate.
      edges: the lower edges of the size bins.
      mechanism_name: the mechanism the rule is for.
      user_mass: g(m), a key of ``MASSES``.
      round_thresholds: for SIPS, each candidate's rounds' thresholds T_r; else empty.
      calibrations: each candidate's calibration (with the pre-threshold).
    """

    auto: AutoMaxItems
    size_budget: Any
    selection_budget: Any
    candidates: tuple
    weight_thresholds: tuple
    edges: tuple
    mechanism_name: str
    user_mass: str
    round_thresholds: tuple = ()
    calibrations: tuple = dataclasses.field(default=(), compare=False, repr=False)

    def proxy(self, noisy_counts: np.ndarray) -> np.ndarray:
        """(M(Δ0) − 2·sd(M(Δ0)))/T(Δ0) per candidate, from the noisy counts as they are.

        With ``round_thresholds`` (SIPS): the items ``max_items_choice.rounds``' model
        releases, up to the candidate M/T picks (0 above it). Why:
        docs/explanation/bounding.md#the-selections-rule.
        """
        counts = _noisy_counts(noisy_counts, self.edges)
        lower = np.asarray(self.edges, dtype=np.float64)
        # A bin's users sit at the geometric middle of its sizes (the last, open bin is
        # only ever read at its lower edge, the largest candidate).
        middle = np.sqrt(lower * np.append(lower[1:] - 1.0, lower[-1]))
        mass = MASSES[self.user_mass]
        noise_sd = math.sqrt(size_noise(self.size_budget).variance())
        out = []
        for c, t in zip(self.candidates, self.weight_thresholds):
            g = mass(np.where(lower >= c, float(c), np.minimum(middle, float(c))))
            lower_mass = float(np.dot(counts, g)) - 2.0 * noise_sd * math.sqrt(float(np.dot(g, g)))
            # No mass above the noise scores 0 (a negative mass over T favours a large T).
            out.append(max(lower_mass, 0.0) / t)
        if self.round_thresholds and max(out) > 0.0:
            # Up to the M/T choice (docs/explanation/proofs.md, "Noise"); 0 above it.
            cap = int(np.argmax(out))
            holding = max_items_rounds.holding_probabilities(middle)
            return np.asarray([
                max_items_rounds.expected_released(counts, middle, t, c, holding) if i <= cap
                else 0.0 for i, (c, t) in enumerate(zip(self.candidates, self.round_thresholds))])
        return np.asarray(out)

    def choose(self, noisy_counts: np.ndarray) -> int:
        """The candidate with the largest score (the smaller on a tie): post-processing."""
        return int(self.candidates[int(np.argmax(self.proxy(noisy_counts)))])

    def _rule(self) -> dict:
        if self.round_thresholds:
            return {"rule": max_items_rounds.RULE, "user_mass": f"g(m) = {self.user_mass}",
                    "round_thresholds": [list(t) for t in self.round_thresholds]}
        return {"rule": "argmax over candidates of M(Δ0)/T(Δ0): M = Σ_users g(min(size, Δ0)) "
                        "from the noisy size histogram, T = the release threshold in weight "
                        "units (beam_dpsu.core.max_items_choice)",
                "user_mass": f"g(m) = {self.user_mass}"}

    def to_dict(self) -> dict:
        return {**self.auto.to_dict(), **self._rule(),
                "size_histogram": _report(self.size_budget, self.edges),
                "selection_budget": self.selection_budget.to_dict(),
                "candidates_calibrated": list(self.candidates),
                "weight_thresholds": list(self.weight_thresholds)}


def calibrate_candidates(auto: AutoMaxItems, calibrate: Callable[[int], Any], who: str,
                         part: str) -> dict:
    """{Δ0: calibrate(Δ0)} for every candidate ``calibrate`` does not refuse (ValueError);
    if it refuses all, an error worded with ``who`` and ``part``, naming the first."""
    calibrations, refusals, errors = {}, [], []
    for c in auto.candidates:
        try:
            calibrations[c] = calibrate(c)
        except ValueError as e:
            refusals.append(f"{c}: {e}")
            errors.append(e)
    if not calibrations and all(getattr(e, "param", None) == "alpha" for e in errors):
        # Every candidate refuses the policy's alpha: that flag is the one to change, by
        # the first (smallest) candidate's bound, the loosest.
        raise errors[0]
    if not calibrations:
        raise ParameterError.worded(
            "max_items_per_user",
            f"max_items_per_user='auto': {who} at none of the {len(refusals)} candidates under "
            f"{part} ({1 - auto.spent:g} of it); at max_items_per_user={refusals[0]}")
    return calibrations


def plan_auto(mechanism, budget: Budget | ZCDPBudget, pre_threshold: int = 1) -> AutoPlan:
    """Splits the budget and calibrates every candidate Δ0 with pre-threshold k (no data)."""
    auto = mechanism.max_items_per_user
    if not is_auto(auto):
        raise ParameterError.worded("max_items_per_user",
                                    "plan_auto is for max_items_per_user='auto'")
    auto = auto.with_share(default_share(mechanism))
    size_budget, selection_budget = split_budget(budget, auto.spent)

    def thresholds_at(c: int) -> tuple:
        calibration = pre_threshold_calibrations.calibrate(
            with_max_items(mechanism, c), selection_budget, pre_threshold)
        t = weight_threshold(calibration)
        if not (math.isfinite(t) and t > 0):
            raise ValueError(f"threshold {t!r}")
        return t, max_items_rounds.round_thresholds(calibration), calibration

    found = calibrate_candidates(auto, thresholds_at, f"{mechanism.name} calibrates",
                                 "the selection's part of the budget")
    weights, rounds, calibrations = zip(*found.values())
    return AutoPlan(auto=auto, size_budget=size_budget, selection_budget=selection_budget,
                    candidates=tuple(found), weight_thresholds=weights,
                    edges=tuple(int(e) for e in size_bin_edges(auto.candidates)),
                    mechanism_name=mechanism.name, user_mass=user_mass(mechanism),
                    round_thresholds=rounds if all(r is not None for r in rounds) else (),
                    calibrations=calibrations)
