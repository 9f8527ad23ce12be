"""k-gram sets for DPNE, as pure functions (dpne §2 and App. A).

An n-gram is a tuple of tokens. Level k counts only *valid* k-grams: both (k−1)-subgrams
in S_{k−1} (``pruning="both"``, dpne Algorithm 1), or the prefix in S_{k−1} and the last
token in S_1 (``"single"``, dpne §3.1.1). |V_k| is counted, and V_k sampled, without
listing it: docs/explanation/numerics.md#valid-k-grams.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Iterable, Sequence

import numpy as np

from beam_dpsu.core import checks

__all__ = ["PRUNINGS", "kgrams_of", "is_valid", "valid_kgram_count", "ValidKgramSampler"]

PRUNINGS = ("both", "single")


def kgrams_of(tokens: Sequence[str], k: int) -> list[tuple]:
    """The k-grams of one document (n-grams never cross documents)."""
    return [tuple(tokens[i:i + k]) for i in range(len(tokens) - k + 1)]


def is_valid(kgram: tuple, previous: set | dict, unigrams: set | dict, pruning: str) -> bool:
    """Whether ``kgram`` (k ≥ 2) is in V_k for released (k−1)-grams ``previous``."""
    return kgram[:-1] in previous and (kgram[1:] in previous if pruning == "both"
                                       else (kgram[-1],) in unigrams)


def valid_kgram_count(previous: Iterable[tuple], unigrams: Iterable[tuple],
                      pruning: str = "both") -> int:
    """|V_k| exactly, from S_{k−1} (and S_1 for "single"), without listing V_k."""
    pruning = checks.one_name_of("pruning", pruning, PRUNINGS)
    previous = list(previous)
    if pruning == "single":
        return len(previous) * len(set(unigrams))
    suffixes = Counter(x[1:] for x in previous)
    prefixes = Counter(y[:-1] for y in previous)
    return sum(n * prefixes.get(o, 0) for o, n in suffixes.items())


class ValidKgramSampler:
    """Uniform samples from V_k ∖ excluded (dpne App. A, spurious k-grams), built once per
    level from S_{k−1} (and S_1)."""

    def __init__(self, previous: Iterable[tuple], unigrams: Iterable[tuple], pruning: str = "both"):
        pruning = checks.one_name_of("pruning", pruning, PRUNINGS)
        previous = sorted(set(previous))
        if pruning == "single":
            self._left = {(): previous}
            self._right = {(): sorted(u[0] for u in set(unigrams))}
        else:
            left, right = defaultdict(list), defaultdict(list)
            for x in previous:
                left[x[1:]].append(x)         # x contributes its whole self
                right[x[:-1]].append(x[-1])   # y contributes its last token
            self._left, self._right = dict(left), dict(right)
        self._overlaps = [o for o in sorted(self._left) if o in self._right]
        sizes = np.array([len(self._left[o]) * len(self._right[o]) for o in self._overlaps],
                         dtype=np.float64)
        self.size = int(sizes.sum())
        self._weights = sizes / sizes.sum() if self.size else sizes

    def all(self) -> list[tuple]:
        """Every valid k-gram (only for small V_k: tests and the enumeration path)."""
        return [x + (z,) for o in self._overlaps for x in self._left[o] for z in self._right[o]]

    def sample(self, n: int, excluded, rng: np.random.Generator) -> list[tuple]:
        """n distinct valid k-grams not in ``excluded`` (a subset of V_k), uniformly."""
        if n <= 0:
            return []
        available = self.size - len(excluded)
        if n > available:
            # No figure in the message: |V_k| − |supp H_k| is a raw support size.
            raise ValueError("asked for more spurious k-grams than there are zero-weight "
                             "valid k-grams")
        # Enumerate when the candidates are few or n is a large share of them;
        # otherwise rejection-sample (expected O(n) draws when n ≪ available).
        if available <= 4 * n + 10_000:
            candidates = [w for w in self.all() if w not in excluded]
            picked = rng.choice(len(candidates), size=n, replace=False)
            return sorted(candidates[i] for i in picked)
        chosen: set = set()
        while len(chosen) < n:
            groups = rng.choice(len(self._overlaps), size=max(64, 2 * (n - len(chosen))),
                                p=self._weights)
            for g in groups:
                o = self._overlaps[g]
                left, right = self._left[o], self._right[o]
                w = left[rng.integers(len(left))] + (right[rng.integers(len(right))],)
                if w not in excluded and w not in chosen:
                    chosen.add(w)
                    if len(chosen) == n:
                        break
        return sorted(chosen)
