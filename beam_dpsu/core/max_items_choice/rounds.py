"""Δ0 chosen privately for SIPS: a model of its rounds (pure math, no Beam).

Each round reads users' items minus those earlier rounds released, so the last rounds
gain less from a large Δ0 than M/T says: ``expected_released`` follows the rounds on a
Zipf prior, from the noisy size histogram and the thresholds alone (post-processing).
Model: docs/explanation/proofs.md#choosing-0-for-sips-a-model-of-its-rounds.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from typing import Union

import numpy as np
# scipy: imported where it is used (beam_dpsu.core's docstring says why).

__all__ = ["EXPONENT", "RULE", "rank_grid", "holding_probabilities", "expected_released",
           "round_thresholds"]

# The Zipf exponent of the prior popularity law (docs/explanation/proofs.md, "The prior").
EXPONENT = 1.3
RULE = ("argmax over candidates of the items the rounds release in a model of them: users "
        "from the noisy size histogram, each round reading the users' items minus those "
        f"earlier rounds released, items of Zipf popularity rank^-{EXPONENT:g} "
        "(beam_dpsu.core.max_items_choice)")
_MAX_RANK = 1e9
_LOG_POINTS = 3000
_EXACT_RANKS = 200
# Counts, sizes, thresholds: any sequence of floats or a numpy array.
Floats = Union[Sequence[float], np.ndarray]


@functools.lru_cache(maxsize=4)
def rank_grid() -> tuple[np.ndarray, np.ndarray]:
    """(ranks, widths): grid point j stands for the ``widths[j]`` ranks from ``ranks[j]``."""
    logs = np.unique(np.round(np.logspace(0.0, math.log10(_MAX_RANK), _LOG_POINTS)))
    ranks = np.concatenate([np.arange(1.0, _EXACT_RANKS), logs[logs >= _EXACT_RANKS]])
    return ranks, np.diff(np.append(ranks, ranks[-1] + 1.0))


def holding_probabilities(sizes: Floats, exponent: float = EXPONENT) -> np.ndarray:
    """p_k(n) for each size n (rows) and grid rank k (columns): Σ_k p_k(n) = n."""
    from scipy import special
    n = np.asarray(sizes, dtype=np.float64)
    ranks, widths = rank_grid()
    q = ranks ** -float(exponent) / float(special.zeta(exponent))
    lo, hi = np.full(len(n), -20.0), np.full(len(n), 80.0)  # log λ
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        held = (widths * -np.expm1(-np.exp(mid)[:, None] * q)).sum(axis=1)
        below = held < n
        lo, hi = np.where(below, mid, lo), np.where(below, hi, mid)
    return -np.expm1(-np.exp(0.5 * (lo + hi))[:, None] * q)


def _last_above(weights: np.ndarray, start: int, threshold: float) -> float:
    """The grid points from ``start`` weighing ≥ threshold, log-linearly interpolated."""
    above = np.flatnonzero(weights[start:] >= threshold)
    if not len(above):
        return float(start)
    j = start + int(above[-1])
    if j + 1 >= len(weights) or weights[j + 1] <= 0.0:
        return float(j + 1)
    w0, w1 = weights[j], weights[j + 1]
    fraction = math.log(w0 / threshold) / math.log(w0 / w1) if w0 > threshold else 0.0
    return j + 1 + min(max(fraction, 0.0), 1.0)


def expected_released(counts: Floats, sizes: Floats, thresholds: Floats, max_items: int,
                      holding: np.ndarray | None = None,
                      exponent: float = EXPONENT) -> float:
    """K_I: the items the rounds release in the model (docs/explanation/proofs.md).

    Args:
      counts: users per size bin (noisy counts as they are).
      sizes: the size each bin's users are read at.
      thresholds: T_r of each round, in order.
      max_items: Δ0.
      holding: ``holding_probabilities(sizes, exponent)``, if already computed.
      exponent: a, the prior's Zipf exponent.
    """
    _, widths = rank_grid()
    p = holding_probabilities(sizes, exponent) if holding is None else holding
    users = np.asarray(counts, dtype=np.float64)
    n = np.asarray(sizes, dtype=np.float64)
    held = np.cumsum(p * widths, axis=1)  # held[b, j]: bin b's items among ranks ≤ grid j
    cut = 0.0  # grid points released so far (fractional at the crossing)
    for threshold in thresholds:
        whole = int(cut)
        before = held[:, whole - 1] if whole else 0.0
        if whole < p.shape[1]:
            before = before + (cut - whole) * p[:, whole] * widths[whole]
        left = np.maximum(n - before, 1e-12)
        per_item = np.sqrt(np.minimum(left, float(max_items))) / left
        weights = (users * per_item) @ p
        cut = max(cut, _last_above(weights, int(math.ceil(cut)), float(threshold)))
    whole = int(cut)
    released = float(widths[:whole].sum())
    if whole < len(widths):
        released += (cut - whole) * float(widths[whole])
    return released


def round_thresholds(calibration) -> tuple | None:
    """The rounds' release thresholds of a calibration made of rounds (SIPS), or None."""
    rounds = getattr(calibration, "rounds", None)
    return None if rounds is None else tuple(float(r.release_threshold) for r in rounds)
