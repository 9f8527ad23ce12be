"""Δ0 chosen privately for SIPS: a model of its rounds (pure math, no Beam).

``max_items_choice.AutoPlan`` scores a one-round mechanism by M(Δ0)/T(Δ0),
the users' total weight over the release threshold. SIPS is not one round:
it runs Weighted Gaussian I times with growing budgets, and each round reads
every user's items *minus* those earlier rounds released, re-sampled to Δ0
(dp-sips §4, Algorithm 3; the rounds are §3.1's Algorithm 2). The last
rounds, which hold most of the budget and release most of the rare items,
therefore see users far smaller than the size histogram says (on IMDb the
last round reads 16 % of the (user, item) pairs), and they gain less from a
large Δ0 than Weighted Gaussian does: scored by M/T, SIPS took a Δ0 one grid
step above its best. A uniform shrink (every user keeps the same share) is
not enough either: a large user holds the popular items as a small user
does, so it loses a smaller *share* of its items to them (IMDb, last round:
users of 30-45 items keep 9 % of them, users of 360-510 keep 24 %).

The model (``expected_released``). Items are ranked k = 1, 2, … by
popularity q_k = k^{−a}/ζ(a), a Zipf law whose exponent a is a public prior
(``EXPONENT``; nothing about the items is read). A user holding n distinct
items holds item k with probability

    p_k(n) = 1 − exp(−λ(n)·q_k),   λ(n) fixed by Σ_k p_k(n) = n,

the user drawing items from the law until it holds n distinct ones
(Poissonised): a large user holds the popular items almost surely, a small
one in proportion to its size. Round r = 0 … I−1 has threshold T_r; the
ranks 1 … K_r are released before it (K_0 = 0). A user of n items holds

    n^(r) = n − Σ_{k ≤ K_r} p_k(n)

of the others, samples min(n^(r), Δ0) of them uniformly and gives each
1/√min(n^(r), Δ0) (dp-sips Algorithm 2), so item k > K_r has the expected
weight

    W_k^(r) = Σ_users p_k(n)·min(1, Δ0/n^(r))/√min(n^(r), Δ0)
            = Σ_users p_k(n)·√min(n^(r), Δ0)/n^(r).

Every p_k(n) falls with k, so W^(r) does: round r releases the ranks above
K_r up to K_{r+1} = the largest k with W_k^(r) ≥ T_r (the rank where an
item is released about half the time; K_{r+1} = K_r if there is none). The
rule takes the candidate with the largest K_I, the items the model releases
(ties go to the smaller Δ0), among the candidates up to the M/T rule's
choice (see Noise below). With one round this is Weighted Gaussian's count,
saturation included.

The sums over users come from the noisy size histogram alone (one user in
one bin, as for the M/T rule), its users at the bin's geometric middle (the
open last bin at its lower edge, the largest candidate: such a user keeps
Δ0 items whichever candidate is chosen, and its weight per item,
p_k(n)/n^(r)·√Δ0, hardly moves with n), the counts as they are (mean-zero
noise); the thresholds T_r are the calibrations' (data-independent). So the
choice is post-processing of the DP histogram and public parameters.

Noise. The model reads every bin, and the bins of large sizes, nearly
empty, weigh most in it: a user of n items holds a rare item about n^a
times as often as a user of one, so a few noise users in the top bins can
make a large Δ0 look best on small data. The M/T rule guards against that by
taking M two noise deviations low (``AutoPlan.proxy``); its choice also
bounds SIPS's from above, since SIPS's later rounds read users smaller than
the histogram's, whose weight stops growing at a smaller Δ0 while the
thresholds grow with Δ0 as one round's do. So the rule takes the model's best
among the candidates up to the M/T choice (``AutoPlan.proxy``).

The prior. What decides Δ0 is how much of each user the early rounds take,
which the exponent sets: a near 1 spreads the users over many rare items (a
larger Δ0 pays), a large a puts them on a few popular ones (a small Δ0
suffices). Measured on the benchmark's data sets (docs/benchmarks.md,
"Choosing Δ0 privately"), whose items fall off as rank^−1.0 to rank^−1.6
where SIPS releases them, every a from 1.3 to 1.5 puts the model's best Δ0
on SIPS's best grid step (IMDb 100, zipf-a 100, zipf-b 5, AskReddit 100);
a = 1.1 moves IMDb to 200 and zipf-b to 10, a = 2 IMDb to 50 and zipf-a to
500, one grid step each. The
model leaves out each item's noise and a popularity that changes with the
user's size; the benchmark measures the rule against the best Δ0 of a grid.

Numerics: the ranks are 1 … 199 one by one and then ~3,000 log-spaced
points to 10^9, each standing for the ranks up to the next (``rank_grid``);
λ(n) is found by bisection on log λ; K is interpolated log-linearly between
grid points, so that nearby candidates do not tie on one grid point.
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

# The Zipf exponent of the prior popularity law (see the module docstring).
EXPONENT = 1.3
# The rule, as ``AutoPlan.to_dict`` reports it.
RULE = ("argmax over candidates of the items the rounds release in a model of them: users "
        "from the noisy size histogram, each round reading the users' items minus those "
        f"earlier rounds released, items of Zipf popularity rank^-{EXPONENT:g} "
        "(beam_dpsu.core.max_items_rounds)")
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
    """The (fractional) number of grid points from ``start`` whose weight is ≥ threshold,
    interpolated log-linearly to the crossing; weights fall with the rank."""
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
    """K_I: the items the rounds release in the model (module docstring).

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
    if rounds is None:
        return None
    return tuple(float(r.release_threshold) for r in rounds)
