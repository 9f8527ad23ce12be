"""The privacy report of a run: what was spent, with which noise and threshold.

The reports of ``SelectItems``, ``CountReleased`` and ``ExtractNgrams``; the mechanism
part is fixed when the pipeline is built. Counts a job observed from
the raw input without noise go under ``non_private_counts`` with a note.
"""

from __future__ import annotations

import json
import math

from beam_dpsu import __version__
from beam_dpsu.core import max_items_choice
from beam_dpsu.core.budgets import Budget, ZCDPBudget
from beam_dpsu.core.calibration import gaussian_dp_equivalents
from beam_dpsu.core.mechanisms import GreedyWithoutSampling, SequentialMechanism
from beam_dpsu.core.ngram_parameters import NgramParameters

__all__ = ["GUARANTEES", "selection_report", "user_order", "counts_report", "dp_equivalents",
           "dpne_report", "requested_epsilon", "NON_PRIVATE_NOTE", "SEEDED_NOTE", "to_json"]

NON_PRIVATE_NOTE = ("These counts are computed from the raw input without noise. They are NOT "
                    "differentially private: keep them out of anything published.")

SEEDED_NOTE = ("This run used a fixed seed: its noise and sampling are reproducible and the "
               "release is NOT differentially private. Seeds are for tests only.")


def dp_equivalents(budget: ZCDPBudget) -> list[dict]:
    """(ε, δ_DP) guarantees implied by a zCDP budget (dp-sips Corollary 9), at a few δ_DP."""
    return [{"epsilon": budget.to_dp(f * budget.delta).epsilon, "delta": f * budget.delta}
            for f in (2.0, 5.0, 10.0) if f * budget.delta < 1.0]


def requested_epsilon(budget) -> float | None:
    """The ε of an (ε, δ) budget, which a mechanism calibrated to it meets at δ by
    construction (``gaussian_dp_equivalents``); None for a zCDP budget."""
    return budget.epsilon if isinstance(budget, Budget) else None


GUARANTEES = {
    "user_id": "user-level (add/remove one user with all their records)",
    "element": "element-level (add/remove one input element, which holds all the data of one "
               "person)",
}


def _header(privacy_unit: str) -> dict:
    return {"library": f"beam_dpsu {__version__}", "guarantee": GUARANTEES[privacy_unit],
            "privacy_unit": privacy_unit}


def _add_seed(report: dict, seed) -> None:
    if seed is not None:
        report["seed"] = seed
        report["seeded_note"] = SEEDED_NOTE


def user_order(mechanism, privacy_unit: str, seed: int | None) -> str:
    """What orders a sequential mechanism's users, for its report."""
    key = ("key derived from the seed" if seed is not None
           else "fresh secret key per run, not recorded")
    if privacy_unit == "user_id":
        return f"keyed hash of the user id; {key}"
    if seed is None and not isinstance(mechanism, GreedyWithoutSampling):
        # sequential._PolicyElementBlocksFn: the bytes stand in for a random id's hash.
        return "32 fresh random bytes per element (no key), drawn from the OS"
    seeded = ("its items and their occurrences" if isinstance(mechanism, GreedyWithoutSampling)
              else "its distinct items")
    return f"keyed hash of a random id per element (a hash of {seeded} when seeded); {key}"


def selection_report(mechanism, budget, calibration, auto_plan, auto_calibrations: dict,
                     seed: int | None, privacy_unit: str) -> dict:
    """``SelectItems.report``: the mechanism, budget, noise, threshold and seeding.

    Given ``auto_plan`` (``max_items_per_user="auto"``): the split, the rule and every
    candidate (the jobs add the chosen Δ0, a DP output, once the pipeline has run).
    """
    report = {**_header(privacy_unit), "mechanism": mechanism.to_dict()}
    if auto_plan is None:
        report.update({**calibration.to_dict(), "seeded": seed is not None})
        mu = getattr(calibration, "gaussian_mu", None)
        zcdp = getattr(calibration, "zcdp_budget", calibration.budget)
        if mu is not None:
            # Gaussian noise (all rounds composed) is exactly μ-GDP: its exact (ε′, δ′) curve
            # plus the thresholds' δ, under either budget, is tighter than dp-sips Cor. 9.
            report["dp_equivalents"] = gaussian_dp_equivalents(
                mu, calibration.threshold_delta, calibration.budget.delta,
                requested_epsilon=requested_epsilon(calibration.budget))
        elif isinstance(zcdp, ZCDPBudget):
            # A zCDP guarantee is also stated as (ε, δ)-DP (dp-sips Corollary 9).
            report["dp_equivalents"] = dp_equivalents(zcdp)
    else:
        report.update({
            "budget": budget.to_dict(),
            "composition": "sequential: the size histogram, then the selection at the chosen "
                           "max_items_per_user (epsilon or rho add; delta is the selection's)",
            "max_items_per_user": auto_plan.to_dict(),
            "selection_by_candidate": {str(c): k.to_dict() for c, k in auto_calibrations.items()},
            "seeded": seed is not None})
        if isinstance(budget, ZCDPBudget):
            report["dp_equivalents"] = dp_equivalents(budget)
    _add_seed(report, seed)
    if isinstance(mechanism, SequentialMechanism):
        # The chosen selection (auto) reads one merged record per user (as elements).
        report["user_order"] = user_order(
            mechanism, privacy_unit if auto_plan is None else "element", seed)
    return report


def counts_report(calibration, auto_plan, budget, calibrations_by_candidate: dict,
                  seed: int | None, privacy_unit: str) -> dict:
    """``CountReleased.report``: the counts' noise, or the "auto" plan and every candidate's."""
    report: dict = {**_header(privacy_unit),
                    "counted": "distinct users holding each released item, each user counted on "
                               "at most max_items_per_user released items (sampled uniformly)"}
    if auto_plan is None:
        report.update(calibration.to_dict())
    else:
        # The chosen Δ0 is a DP output known once the pipeline has run.
        report.update({
            "budget": budget.to_dict(),
            "composition": "sequential: the histogram of users' numbers of released items, then "
                           "the counts at the chosen max_items_per_user (epsilon or rho add)",
            "max_items_per_user": auto_plan.to_dict(),
            "counts_by_candidate": {str(c): k.to_dict()
                                    for c, k in calibrations_by_candidate.items()}})
    report["seeded"] = seed is not None
    _add_seed(report, seed)
    return report


def dpne_report(params: NgramParameters, budget, privacy_unit: str,
                auto_plan: max_items_choice.AutoPlan | None, calibrations: list) -> dict:
    """The report of DPNE with ``params`` under ``budget``: one ``DPNECalibration`` per
    candidate Δ_1 in ``calibrations`` (one, unless ``auto_plan`` is given)."""
    report = {**_header(privacy_unit),
              "mechanism": {"name": "dpne", "max_n": params.max_n, "eta": params.eta,
                            "pruning": params.pruning, "noise_decay": params.noise_decay,
                            "level1": params.level1},
              "budget": budget.to_dict(),
              "source": "dpne (Kim et al. 2021) §2, Theorem 2.1, Algorithm 2",
              "levels": [{"k": k + 1, "max_items_per_user": params.max_items[k]}
                         for k in range(params.max_n)],
              "seeded": params.seed is not None, "pre_threshold": params.pre_threshold}
    if auto_plan is not None:
        # Δ_1 is chosen when the pipeline runs (a DP output): here every candidate.
        report["levels"][0]["max_items_per_user"] = max_items_choice.AUTO
        report["composition"] = (
            "sequential: the size histogram of users' distinct tokens, then DPNE at the "
            "chosen level-1 max_items_per_user (epsilon or rho add; delta is DPNE's)")
        report["max_items_per_user"] = {
            **auto_plan.to_dict(),
            "levels_2_to_T": "an automatic max_items_per_user at level k >= 2 is its "
                             "largest candidate, fixed without data: sigma_k and rho_k "
                             "do not depend on it (beam_dpsu.extract_ngrams.ExtractNgrams)"}
        report["calibration_by_candidate"] = {str(c.max_items_1): c.to_dict() for c in calibrations}
        if isinstance(budget, ZCDPBudget):
            report["dp_equivalents"] = dp_equivalents(budget)
    else:
        only = calibrations[0]
        report["sigma_total"] = only.sigma_total
        if only.delta_noise is not None:
            report["delta_noise"] = only.delta_noise
        for level, sigma in zip(report["levels"], only.sigmas):
            level["sigma"] = sigma
        report["levels"][0].update(
            release_threshold=only.level1.release_threshold, threshold_delta=only.threshold_delta,
            **({} if only.level1.cutoff is None else {"cutoff": only.level1.cutoff}))
        # The levels compose to one Gaussian with σ* plus level 1's threshold event.
        report["dp_equivalents"] = gaussian_dp_equivalents(
            1.0 / only.sigma_total, only.threshold_delta, budget.delta,
            requested_epsilon=requested_epsilon(budget))
    _add_seed(report, params.seed)
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
