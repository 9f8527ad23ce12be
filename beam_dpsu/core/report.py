"""The privacy report of a run: what was spent, with which noise and threshold.

Everything in the mechanism part of the report is fixed when the pipeline is
built. A job may add counts it observed; those that are computed from the
raw input without noise are listed under ``non_private_counts`` with a note.
"""

from __future__ import annotations

import json
import math

from beam_dpsu import __version__
from beam_dpsu.core.budgets import Budget, ZCDPBudget
from beam_dpsu.core.calibration import gaussian_dp_equivalents
from beam_dpsu.core.mechanisms import GreedyWithoutSampling, SequentialMechanism

__all__ = ["GUARANTEES", "mechanism_report", "auto_report", "selection_report", "user_order",
           "counts_report", "dp_equivalents", "requested_epsilon", "NON_PRIVATE_NOTE",
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


def requested_epsilon(budget) -> float | None:
    """The ε of an (ε, δ) budget, which a mechanism calibrated to it meets at δ by
    construction (``gaussian_dp_equivalents``); None for a zCDP budget."""
    return budget.epsilon if isinstance(budget, Budget) else None


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
            mu, calibration.threshold_delta, calibration.budget.delta,
            requested_epsilon=requested_epsilon(calibration.budget))
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


def user_order(mechanism, privacy_unit: str, seed: int | None) -> str:
    """What orders a sequential mechanism's users, for its report."""
    key = ("key derived from the seed" if seed is not None
           else "fresh secret key per run, not recorded")
    if privacy_unit == "user_id":
        return f"keyed hash of the user id; {key}"
    if seed is None and not isinstance(mechanism, GreedyWithoutSampling):
        # sequential._PolicyElementBlocksFn: the bytes stand in for the keyed hash of a
        # random id.
        return "32 fresh random bytes per element (no key), drawn from the OS"
    seeded = ("its items and their occurrences" if isinstance(mechanism, GreedyWithoutSampling)
              else "its distinct items")
    return f"keyed hash of a random id per element (a hash of {seeded} when seeded); {key}"


def selection_report(mechanism, budget, calibration, auto_plan, auto_calibrations: dict,
                     seed: int | None, privacy_unit: str) -> dict:
    """``SelectItems.report``: ``mechanism_report``, or ``auto_report`` with
    ``max_items_per_user="auto"`` (``auto_plan``, each candidate's calibration in
    ``auto_calibrations``), and the user order of a sequential mechanism."""
    sequential = isinstance(mechanism, SequentialMechanism)
    if auto_plan is not None:
        report = auto_report(mechanism, budget, auto_plan, auto_calibrations, seed,
                             privacy_unit)
        if sequential:
            # The chosen selection reads one merged record per user (as elements).
            report["user_order"] = user_order(mechanism, "element", seed)
        return report
    extra = {"user_order": user_order(mechanism, privacy_unit, seed)} if sequential else None
    return mechanism_report(mechanism, calibration, seed, extra, privacy_unit)


def counts_report(calibration, auto_plan, budget, calibrations_by_candidate: dict,
                  seed: int | None, privacy_unit: str) -> dict:
    """``CountReleased.report``: the counts' noise at a fixed Δ0 (``calibration``), or,
    with ``max_items_per_user="auto"``, the plan and every candidate's noise."""
    report: dict = {
        "library": f"beam_dpsu {__version__}",
        "guarantee": GUARANTEES[privacy_unit],
        "privacy_unit": privacy_unit,
        "counted": "distinct users holding each released item, each user counted on at "
                   "most max_items_per_user released items (sampled uniformly)",
    }
    if auto_plan is None:
        report.update(calibration.to_dict())
    else:
        # The chosen Δ0 is a DP output, known once the pipeline has run
        # (chosen_max_items_per_user); everything here is parameters.
        report.update({
            "budget": budget.to_dict(),
            "composition": "sequential: the histogram of users' numbers of released "
                           "items, then the counts at the chosen max_items_per_user "
                           "(epsilon or rho add)",
            "max_items_per_user": auto_plan.to_dict(),
            "counts_by_candidate": {str(c): k.to_dict() for c, k in
                                    calibrations_by_candidate.items()}})
    report["seeded"] = seed is not None
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
