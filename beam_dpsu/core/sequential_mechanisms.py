"""The sequential mechanisms' configs (table: ``beam_dpsu.core.mechanisms``)."""

from __future__ import annotations

import dataclasses
import sys
from typing import ClassVar, Mapping, cast

from beam_dpsu.core import checks, thresholds
from beam_dpsu.core.checks import ParameterError, ParameterTypeError
from beam_dpsu.core.calibration import Calibration, gaussian_calibration, laplace_calibration
from beam_dpsu.core.mechanism_config import MechanismConfig

__all__ = ["SequentialMechanism", "PolicyLaplace", "PolicyGaussian", "GreedyWithoutSampling"]


class SequentialMechanism(MechanismConfig):
    """A mechanism whose users update the histogram one after another, in keyed-hash order
    (``shards`` orders' histograms summed, same sensitivity; ``beam_dpsu.beam.sequential``)."""

    alpha: float
    shards: int
    max_items_per_user: int | None  # every subclass's field (GW: None until __post_init__)
    # What ``calibrate`` runs at sensitivity 1: (the noise's calibration, ρ, source).
    _rule: ClassVar[tuple]

    def calibrate(self, budget) -> Calibration:
        calibrate_noise, threshold, source = self._rule
        max_items = cast(int, self.max_items_per_user)  # GW: set by __post_init__
        calibration = calibrate_noise(self._check_budget(budget), max_items, 1.0, threshold, source)
        cutoff = thresholds.policy_cutoff(calibration.release_threshold, calibration.noise_scale,
                                          self.alpha, max_items,
                                          thresholds.DESCENT_NORMS.get(self.name),
                                          calibration.budget)
        return dataclasses.replace(calibration, cutoff=cutoff)


@dataclasses.dataclass(frozen=True)
class PolicyLaplace(SequentialMechanism):
    """Policy Laplace: ℓ1-descent toward Γ = ρ_Lap + α/ε, Lap(1/ε) noise (dpsu §4, Alg. 3–4).

    Attributes:
      max_items_per_user: Δ0, distinct items sampled per user.
      alpha: α ≥ 0 in the cutoff Γ = ρ + α·λ (the paper finds 2–6 works best).
      shards: P ≥ 1 independent user orders (1 = the paper's algorithm).
    """

    max_items_per_user: int = 100
    _: dataclasses.KW_ONLY  # the fields after Δ0 are keyword-only
    alpha: float = 3.0
    shards: int = 1
    name: ClassVar[str] = "policy-laplace"
    user_mass: ClassVar[str] = "m/(m+1)"
    _rule = (laplace_calibration, thresholds.weighted_laplace_threshold,
             "dpsu (Gopi et al. 2020) Algorithms 3-4, Theorem 4.1")


@dataclasses.dataclass(frozen=True)
class PolicyGaussian(SequentialMechanism):
    """Policy Gaussian: ℓ2-descent toward Γ = ρ_Gauss + α·σ (dpsu §5, Alg. 5 and 7).

    Algorithm 5 prints Γ ← ρ_Lap + α·σ; the intent is ρ_Gauss + α·σ. Algorithm 8
    (ℓ1-descent) is not private and not offered. σ and ρ are Weighted Gaussian's.

    Attributes:
      max_items_per_user: Δ0, distinct items sampled per user.
      alpha: α ≥ 0 in the cutoff Γ = ρ + α·σ.
      shards: P ≥ 1 independent user orders (1 = the paper's algorithm).
    """

    max_items_per_user: int = 100
    _: dataclasses.KW_ONLY  # the fields after Δ0 are keyword-only
    alpha: float = 3.0
    shards: int = 1
    name: ClassVar[str] = "policy-gaussian"
    user_mass: ClassVar[str] = "sqrt(m)"
    _rule = (gaussian_calibration, thresholds.weighted_gaussian_threshold,
             "dpsu (Gopi et al. 2020) Algorithms 5 and 7, Theorem 5.1")


@dataclasses.dataclass(frozen=True)
class GreedyWithoutSampling(SequentialMechanism):
    """GW: greedy updates on each user's top-Δ0 items, Lap(1/ε) (gw §3 as fixed in docs/privacy.md).

    Each user fills its Δ0 most frequent items (``policies.gw_item_order``) toward Γ,
    most frequent first, until its budget of 1 is spent; with ``public_order``,
    GW-KT (gw §4) ranks by public counts. Every listed item is noised, zero weight
    included (ρ: ``thresholds.gw_threshold``; docs/explanation/proofs.md#gw-and-gw-kt).
    Not the published GW, whose ρ_GW = 1 − λ·ln(2δ) is not DP (docs/privacy.md, GW fix).

    Attributes:
      max_items_per_user: Δ0, the length of a user's list, all of it noised. None (the
        default): 30 for GW, 300 for GW-KT (docs/explanation/proofs.md#gw-and-gw-kt).
      alpha: α ≥ 0 in Γ = ρ + α·λ; Γ must be ≥ 1 (gw Theorem 1).
      public_counts: None, or a mapping item → count (GW-KT; absent items count 1).
        A ``PCollection`` of (item, count) goes to ``SelectItems(..., public_counts=)``.
      shards: P ≥ 1 independent user orders (1 = the paper's algorithm).
      public_order: GW-KT (True whenever ``public_counts`` is given; set it when
        the counts come to the transform).
    """

    max_items_per_user: int | None = None
    _: dataclasses.KW_ONLY  # the fields after Δ0 are keyword-only
    alpha: float = 3.0
    public_counts: Mapping | None = None
    shards: int = 1
    public_order: bool = False
    name: ClassVar[str] = "gw"
    user_mass: ClassVar[str] = "m/(m+1)"

    DEFAULT_MAX_ITEMS: ClassVar[int] = 30
    DEFAULT_MAX_ITEMS_KT: ClassVar[int] = 300
    _rule = (laplace_calibration, thresholds.gw_threshold,
             "gw (Carvalho et al. 2022) Algorithm 2, Lemma 1; §4 (KT); top-Δ0 lists with every "
             "held item noised and ρ for one key at 1 and Δ0−1 at 0 (docs/privacy.md, The GW "
             "cascade gap and its fix)")

    def __post_init__(self):
        pc = self.public_counts
        # Beam is not imported (the core needs none): unless loaded, nothing is a PCollection.
        pvalue = sys.modules.get("apache_beam.pvalue")
        if pvalue is not None and isinstance(pc, pvalue.PCollection):
            raise ParameterTypeError(
                "public_counts", "must be None or a mapping item -> count: a PCollection of "
                "(item, count) goes to the transform, SelectItems(GreedyWithoutSampling("
                "public_order=True), budget, public_counts=pcoll)")
        checks.instance("public_order", self.public_order, bool, "True or False")
        if pc is not None:
            object.__setattr__(self, "public_order", True)
        if self.max_items_per_user is None:
            object.__setattr__(self, "max_items_per_user", self.DEFAULT_MAX_ITEMS_KT
                               if self.public_order else self.DEFAULT_MAX_ITEMS)
        super().__post_init__()
        if pc is not None and not isinstance(pc, Mapping):
            raise ParameterTypeError("public_counts", "must be None, a mapping item -> count or "
                                     f"a PCollection of (item, count), got {type(pc).__name__}")
        if isinstance(pc, Mapping):
            for count in pc.values():
                checks.public_count(count)

    def calibrate(self, budget) -> Calibration:
        calibration = super().calibrate(budget)
        assert calibration.cutoff is not None  # set by SequentialMechanism.calibrate
        if calibration.cutoff < 1.0:
            raise ParameterError.worded("alpha", "GW needs a cutoff Γ >= 1 (gw Theorem 1), got "
                                        f"Γ = {calibration.cutoff!r}; raise alpha or lower delta")
        return calibration

    def to_dict(self) -> dict:
        pc = self.public_counts
        # Without a mapping here, GW-KT's counts come to the transform as a PCollection.
        public = (None if not self.public_order else
                  f"mapping of {len(pc)} items" if pc is not None else "PCollection")
        return {"name": "gw-kt" if self.public_order else self.name,
                "max_items_per_user": self._reported_max_items(), "alpha": self.alpha,
                "shards": self.shards, "public_counts": public}
