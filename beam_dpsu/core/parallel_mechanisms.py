"""The parallel mechanisms' configs and SIPS (table: ``beam_dpsu.core.mechanisms``)."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction
from typing import ClassVar

import numpy as np

from beam_dpsu.core import budgets, checks, max_items_choice, policies, thresholds
from beam_dpsu.core.exact_floats import nudged
from beam_dpsu.core.gaussian import sqrt_rounded_up
from beam_dpsu.core.budgets import Budget, ZCDPBudget
from beam_dpsu.core.checks import ParameterError
from beam_dpsu.core.calibration import (Calibration, KeepProbabilityCalibration,
                                        RoundsCalibration, gaussian_calibration,
                                        laplace_calibration, truncated_geometric_calibration)
from beam_dpsu.core.delta_split import DeltaSplit, split_delta
from beam_dpsu.core.mechanism_config import MechanismConfig

__all__ = ["ParallelMechanism", "CountLaplace", "CountGaussian", "WeightedLaplace",
           "WeightedGaussian", "TruncatedGeometric", "SIPS"]


@dataclasses.dataclass(frozen=True)
class ParallelMechanism(MechanismConfig):
    """A mechanism whose per-user update is a fixed weight per sampled item."""

    max_items_per_user: int = 100
    user_mass: ClassVar[str] = "m"
    # A staticmethod: a Callable class attribute would read as a method to mypy.
    item_weight: ClassVar[staticmethod[[int], float]] = staticmethod(policies.count_weight)
    # What ``calibrate`` runs: (the noise's calibration, sensitivity(Δ0), ρ, source).
    _rule: ClassVar[tuple]

    def calibrate(self, budget) -> Calibration | KeepProbabilityCalibration:
        calibrate_noise, sensitivity, threshold, source = self._rule
        return calibrate_noise(self._check_budget(budget), self.max_items_per_user,
                               sensitivity(self.max_items_per_user), threshold, source)


@dataclasses.dataclass(frozen=True)
class CountLaplace(ParallelMechanism):
    """Count Laplace: each user adds 1 to each of ≤ Δ0 sampled items; Lap(Δ0/ε) noise.

    Attributes:
      max_items_per_user: Δ0, the number of distinct items sampled per user.
    """

    name: ClassVar[str] = "count-laplace"
    _rule = (laplace_calibration, float, thresholds.count_laplace_threshold,
             "dpsu (Gopi et al. 2020) §1.1; Korolova et al. 2009")


@dataclasses.dataclass(frozen=True)
class CountGaussian(ParallelMechanism):
    """Count Gaussian: +1 to each of ≤ Δ0 sampled items; Gaussian noise for L2 = √Δ0.

    Attributes:
      max_items_per_user: Δ0, the number of distinct items sampled per user.
    """

    name: ClassVar[str] = "count-gaussian"
    _rule = (gaussian_calibration, sqrt_rounded_up, thresholds.count_gaussian_threshold,
             "dpsu (Gopi et al. 2020) §1.1, Proposition 2.2 (analytic Gaussian)")


@dataclasses.dataclass(frozen=True)
class WeightedLaplace(ParallelMechanism):
    """Weighted Laplace: +1/|W| to each of ≤ Δ0 sampled items; Lap(1/ε) noise.

    Attributes:
      max_items_per_user: Δ0, the number of distinct items sampled per user.
    """

    name: ClassVar[str] = "weighted-laplace"
    user_mass: ClassVar[str] = "1"
    item_weight = staticmethod(policies.weighted_laplace_weight)
    _rule = (laplace_calibration, lambda d0: 1.0, thresholds.weighted_laplace_threshold,
             "dpsu (Gopi et al. 2020) Algorithm 9, Theorem B.1")


@dataclasses.dataclass(frozen=True)
class WeightedGaussian(ParallelMechanism):
    """Weighted Gaussian: +1/√|W| to each of ≤ Δ0 sampled items; Gaussian noise for L2 = 1.

    Attributes:
      max_items_per_user: Δ0, the number of distinct items sampled per user.
    """

    name: ClassVar[str] = "weighted-gaussian"
    user_mass: ClassVar[str] = "sqrt(m)"
    item_weight = staticmethod(policies.weighted_gaussian_weight)
    _rule = (gaussian_calibration, lambda d0: 1.0, thresholds.weighted_gaussian_threshold,
             "dpsu (Gopi et al. 2020) Algorithm 10, Theorem B.2; dp-sips Theorem 1")


@dataclasses.dataclass(frozen=True)
class TruncatedGeometric(ParallelMechanism):
    """Truncated geometric: the optimal partition selection for users holding one item.

    Keeps an item held by n users with probability π(n) at (ε/Δ0, δ/Δ0) (Desfontaines
    et al. 2022, Theorem 1); (ε, δ)-DP only, a ``ZCDPBudget`` is refused.
    Derivation: docs/explanation/accounting.md#truncated-geometric.

    Attributes:
      max_items_per_user: Δ0, the number of distinct items sampled per user.
    """

    name: ClassVar[str] = "truncated-geometric"

    def calibrate(self, budget) -> KeepProbabilityCalibration:
        budget = self._check_budget(budget)
        if not isinstance(budget, Budget):
            raise ParameterError.worded("budget", (
                "mechanism 'truncated-geometric' is (ε, δ)-DP only (Desfontaines et al. 2022) and "
                "has no zCDP calibration: give it a Budget(epsilon, delta)"))
        return truncated_geometric_calibration(budget, self.max_items_per_user)


@dataclasses.dataclass(frozen=True)
class SIPS(MechanismConfig):
    """DP-SIPS: iterative partition selection (dp-sips §4, Algorithm 3; Theorem 1, Lemma 6).

    Round i runs Weighted Gaussian at share w_i of the budget on each user's items not
    released before; under ``Budget(ε, δ)`` the rounds are one Gaussian mechanism.
    Derivation: docs/explanation/accounting.md#sipss-budget.

    Attributes:
      max_items_per_user: Δ0, distinct items sampled per user in each round.
      rounds: I ≥ 1, the number of rounds (at most ``MAX_ROUNDS`` = 40).
      ratio: r in (0, 1], the ratio between consecutive rounds' budgets.
      removal: "side_input" (default; broadcast) or "join" (no memory bound): execution only.
    """

    max_items_per_user: int = 100
    _: dataclasses.KW_ONLY  # the fields after Δ0 are keyword-only
    rounds: int = 3
    ratio: float = 1.0 / 3.0
    removal: str = "side_input"
    name: ClassVar[str] = "sips"
    user_mass: ClassVar[str] = "sqrt(m)"
    # "auto"'s default share of the budget (max_items_choice, "The share").
    auto_share: ClassVar[float] = max_items_choice.SIPS_SHARE
    # Rounds are unrolled into a chain (11-17 steps each) that Beam's runners walk
    # recursively at Python's 1000-frame limit: 100 rounds hit RecursionError, 40 leave
    # a quarter of it (tests/pipelines/test_pipeline_depth.py); dp-sips uses 3-5 (§5).
    MAX_ROUNDS: ClassVar[int] = 40

    def __post_init__(self):
        super().__post_init__()
        object.__setattr__(self, "removal", checks.one_name_of(
            "removal", self.removal, ("side_input", "join"), "'side_input' or 'join'"))
        if (isinstance(self.rounds, (int, np.integer)) and not isinstance(self.rounds, bool)
                and self.rounds > self.MAX_ROUNDS):
            raise ParameterError("rounds", f"must be at most {self.MAX_ROUNDS} (each round is a "
                                           f"stage of the pipeline), got {self.rounds!r}")
        budgets.geometric_split_weights(self.rounds, self.ratio)  # validates both
        object.__setattr__(self, "rounds", int(self.rounds))
        object.__setattr__(self, "ratio", float(self.ratio))

    def _delta_split(self, budget: Budget) -> DeltaSplit:
        """The δ split minimising the last round's threshold (σ_total/√w_last, δ_thr·w_last)."""
        w_last = budgets.geometric_split_weights(self.rounds, self.ratio)[-1]
        return split_delta(budget.epsilon, budget.delta, lambda sigma_total, delta_thr: (
            thresholds.weighted_gaussian_threshold(sigma_total / math.sqrt(w_last),
                                                   delta_thr * w_last, self.max_items_per_user)))

    def _total(self, budget) -> tuple[ZCDPBudget, float | None]:
        """((ρ = 1/(2σ_total²), δ_thr), δ_noise) of the rounds' Gaussian; zCDP: (budget, None)."""
        if isinstance(budget, ZCDPBudget):
            return budget, None
        split = self._delta_split(budget)
        rho = 0.5 * (1.0 / split.sigma_total) ** 2
        # Rounded down until 2ρ ≤ 1/σ_total² exactly: the rounds' σ_i are each rounded up
        # for their ρ_i, whose sum is at most ρ, so Σ 1/σ_i² ≤ 1/σ_total², the Gaussian
        # the analytic calibration paid for (to nearest, ρ could be an ulp above it).
        rho = nudged(rho, lambda r: not (r > 0.0 and math.isfinite(r))
                     or 2 * Fraction(r) * Fraction(split.sigma_total) ** 2 <= 1, 0.0)
        w_first = budgets.geometric_split_weights(self.rounds, self.ratio)[0]
        if not (math.isfinite(rho) and rho * w_first > 0.0):
            raise ParameterError(
                "epsilon", f"= {budget.epsilon:g} is too small for sips over {self.rounds} "
                           f"rounds: the rounds' noise (sigma_total = {split.sigma_total:g}) is "
                           "outside the float range; raise epsilon or use fewer rounds")
        return ZCDPBudget(rho, split.threshold_delta), split.delta_noise

    def zcdp_budget(self, budget) -> ZCDPBudget:
        """The δ-approximate ρ-zCDP budget split over the rounds (ρ = 1/(2σ_total²), δ_thr)."""
        return self._total(self._check_budget(budget))[0]

    def round_budgets(self, budget) -> list[ZCDPBudget]:
        """(ρ_i, δ_i) of each round; they sum to the total (dp-sips Thm 1 proof)."""
        return self.zcdp_budget(budget).split(
            budgets.geometric_split_weights(self.rounds, self.ratio))

    def calibrate(self, budget) -> RoundsCalibration:
        budget = self._check_budget(budget)
        total, delta_noise = self._total(budget)
        # Each round is Weighted Gaussian on its share (dp-sips Algorithm 2).
        round_mechanism = WeightedGaussian(self.max_items_per_user)
        rounds = tuple(round_mechanism.calibrate(part) for part in total.split(
            budgets.geometric_split_weights(self.rounds, self.ratio)))
        return RoundsCalibration(
            rounds=rounds, budget=budget, zcdp_budget=total, delta_noise=delta_noise,
            source="dp-sips (Swanberg et al. 2023) §4, Algorithm 3, Theorem 1; under (ε, δ): one "
                   "analytic Gaussian for all rounds (Dong, Roth & Su 2022, Cor. 3.3)")
