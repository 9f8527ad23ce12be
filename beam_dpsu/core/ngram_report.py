"""DPNE's report: its parameters and calibration as ``ExtractNgrams.report`` gives them.

Pure (no Beam, no data): fixed when the transform is built.
"""

from __future__ import annotations

from beam_dpsu.core import max_items_choice
from beam_dpsu.core.budgets import ZCDPBudget
from beam_dpsu.core.calibration import gaussian_dp_equivalents
from beam_dpsu.core.ngram_parameters import NgramParameters
from beam_dpsu.core.report import _add_seed, _header, dp_equivalents, requested_epsilon

__all__ = ["dpne_report"]


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
