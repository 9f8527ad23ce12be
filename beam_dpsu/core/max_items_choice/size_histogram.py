"""The size histogram "auto" reads: users per size bin, plus integer noise (the DP release).

Each user's number of distinct items falls into one fixed bin, and every bin count gets
integer noise of sensitivity 1 (docs/explanation/bounding.md#the-size-histogram).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from fractions import Fraction

import numpy as np

from beam_dpsu.core.budgets import Budget, ZCDPBudget
from beam_dpsu.core.discrete_noise import DiscreteGaussian, DiscreteLaplace

__all__ = ["size_bin_edges", "size_counts", "size_noise", "noisy_size_histogram"]


def size_bin_edges(candidates: Sequence[int]) -> np.ndarray:
    """The lower edges of the size bins: 1, every candidate, and steps of ~√2 between (the
    last bin open: docs/explanation/bounding.md#the-size-histogram)."""
    top = max(candidates)
    steps = {int(round(2 ** (k / 2))) for k in range(0, 2 * max(1, top.bit_length()) + 2)}
    edges = sorted({1, *candidates, *(s for s in steps if s <= top)})
    return np.asarray(edges, dtype=np.int64)


def size_counts(sizes: Iterable[int], edges: np.ndarray) -> np.ndarray:
    """Users per size bin (raw, NOT private): the query the noise is added to. A user
    holding no item is in no bin, so one user moves the counts by at most 1."""
    sizes = np.fromiter(sizes, dtype=np.int64)
    sizes = sizes[sizes > 0]
    bins = np.searchsorted(edges, sizes, side="right") - 1
    return np.bincount(bins, minlength=len(edges)).astype(np.int64)


def size_noise(size_budget: Budget | ZCDPBudget) -> DiscreteLaplace | DiscreteGaussian:
    """The noise of each bin count, of sensitivity 1: discrete Laplace of scale 1/ε, ε-DP
    (Canonne et al. 2020, §1.1), or discrete Gaussian of σ² = 1/(2ρ), ρ-zCDP (ibid. Thm 4)."""
    # Exact scales (Fractions): a float 1/ε rounded down would spend more than ε.
    if isinstance(size_budget, ZCDPBudget):
        return DiscreteGaussian(1 / (2 * Fraction(size_budget.rho)))
    return DiscreteLaplace(1 / Fraction(size_budget.epsilon))


def noisy_size_histogram(counts: np.ndarray, size_budget: Budget | ZCDPBudget,
                         rng: random.Random | None = None) -> np.ndarray:
    """The DP release: every bin count plus independent integer noise (OS randomness
    unless ``rng`` is given, in tests), as floats, summed as exact ints and then held
    within ±1e300 (post-processing: at a vanishing budget a draw can pass float range)."""
    draws = size_noise(size_budget).samples(len(counts), rng)
    noisy = [int(c) + d for c, d in zip(np.asarray(counts).tolist(), draws)]
    return np.asarray([float(max(min(x, _NOISY_LIMIT), -_NOISY_LIMIT)) for x in noisy])


# Noisy counts beyond this carry no information a float could keep.
_NOISY_LIMIT = 10 ** 300


def _noisy_counts(noisy_counts, edges: tuple) -> np.ndarray:
    """The noisy counts as floats, one per bin."""
    counts = np.asarray(noisy_counts, dtype=np.float64)
    if counts.shape != (len(edges),):
        raise ValueError(f"expected {len(edges)} bin counts, got {counts.shape}")
    return counts


def _report(size_budget, edges: tuple) -> dict:
    """The size histogram as a plan's ``to_dict`` reports it."""
    return {"budget": size_budget.to_dict(), "noise": size_noise(size_budget).to_dict(),
            "bin_lower_edges": list(edges), "sensitivity": 1}
