"""The privacy report of a run: what was spent, with which noise and threshold.

Everything in the mechanism part of the report is fixed when the pipeline is
built. A job may add counts it observed; those that are computed from the
raw input without noise are listed under ``non_private_counts`` with a note.
"""

from __future__ import annotations

import json
import math

from beam_dpsu import __version__
from beam_dpsu.core.budgets import ZCDPBudget
from beam_dpsu.core.calibration import gaussian_dp_equivalents

__all__ = ["GUARANTEES", "mechanism_report", "auto_report", "dp_equivalents", "NON_PRIVATE_NOTE",
           "SEEDED_NOTE", "to_json"]

NON_PRIVATE_NOTE = (
    "These counts are computed from the raw input without noise. They are NOT "
    "differentially private: keep them out of anything published.")

SEEDED_NOTE = (
    "This run used a fixed seed: its noise and sampling are reproducible and "
    "the release is NOT differentially private. Seeds are for tests only.")


def dp_equivalents(budget: ZCDPBudget) -> list[dict]:
    """(ε, δ_DP) guarantees implied by a zCDP budget (dp-sips Corollary 9), at a few δ_DP."""
    out = []
    for factor in (2.0, 5.0, 10.0):
        delta_dp = factor * budget.delta
        if delta_dp < 1.0:
            out.append({"epsilon": budget.to_dp(delta_dp).epsilon, "delta": delta_dp})
    return out


GUARANTEES = {
    "user_id": "user-level (add/remove one user with all their records)",
    "element": "element-level (add/remove one input element, which holds all the data of "
               "one person)",
}


def mechanism_report(mechanism, calibration, seed, extra: dict | None = None,
                     privacy_unit: str = "user_id") -> dict:
    """The report of one selection: mechanism, budget, noise, threshold, seeding."""
    report = {
        "library": f"beam_dpsu {__version__}",
        "guarantee": GUARANTEES[privacy_unit],
        "privacy_unit": privacy_unit,
        "mechanism": mechanism.to_dict(),
        **calibration.to_dict(),
        "seeded": seed is not None,
    }
    mu = getattr(calibration, "gaussian_mu", None)
    zcdp = getattr(calibration, "zcdp_budget", calibration.budget)
    if mu is not None:
        # Gaussian noise (all rounds composed) is exactly μ-GDP: state the
        # exact (ε′, δ′) curve plus the thresholds' δ (beam_dpsu.core.calibration),
        # under either kind of budget; tighter than dp-sips Corollary 9.
        report["dp_equivalents"] = gaussian_dp_equivalents(
            mu, calibration.threshold_delta, calibration.budget.delta)
    elif isinstance(zcdp, ZCDPBudget):
        # A zCDP guarantee is also stated as (ε, δ)-DP (dp-sips Corollary 9).
        report["dp_equivalents"] = dp_equivalents(zcdp)
    if seed is not None:
        report["seed"] = seed
        report["seeded_note"] = SEEDED_NOTE
    if extra:
        report.update(extra)
    return report


def auto_report(mechanism, budget, plan, calibrations: dict, seed,
                privacy_unit: str = "user_id") -> dict:
    """The report of a selection with ``max_items_per_user="auto"`` (fixed when built).

    The chosen Δ0 is known only when the pipeline has run: it is a DP output
    (``SelectItems.chosen_max_items_per_user``), and the jobs add it as
    ``chosen_max_items_per_user``. Everything here is parameters: the split,
    the size histogram's noise, the rule and every candidate's calibration.
    """
    report = {
        "library": f"beam_dpsu {__version__}",
        "guarantee": GUARANTEES[privacy_unit],
        "privacy_unit": privacy_unit,
        "mechanism": mechanism.to_dict(),
        "budget": budget.to_dict(),
        "composition": "sequential: the size histogram, then the selection at the chosen "
                       "max_items_per_user (epsilon or rho add; delta is the selection's)",
        "max_items_per_user": plan.to_dict(),
        "selection_by_candidate": {str(c): calibration.to_dict()
                                   for c, calibration in calibrations.items()},
        "seeded": seed is not None,
    }
    if isinstance(budget, ZCDPBudget):
        report["dp_equivalents"] = dp_equivalents(budget)
    if seed is not None:
        report["seed"] = seed
        report["seeded_note"] = SEEDED_NOTE
    return report


def _finite(obj):
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_finite(v) for v in obj]
    return obj


def to_json(report: dict) -> str:
    """Strict JSON (non-finite floats as strings), keys in insertion order."""
    return json.dumps(_finite(report), indent=2, allow_nan=False)
