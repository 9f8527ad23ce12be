"""Uniform sampling of a user's items down to Δ0 (pure Python/numpy).

A user keeps a uniform sample of at most Δ0 of its distinct items, drawn from OS
randomness, or (tests only) from (seed, salt, user id), whatever the worker or bundle.
"""

from __future__ import annotations

from functools import cached_property
from operator import itemgetter

import numpy as np

from beam_dpsu.core import hashing

__all__ = ["item_sort_key", "sample_items", "sample_user_items", "sample_block",
           "UserSampler", "CandidateSamplers"]


def item_sort_key(item):
    """The order of ``ordered`` samples and element ids: str before bytes, then by value."""
    return (isinstance(item, bytes), item)


def sample_items(items, max_items_per_user: int, rng: np.random.Generator | None,
                 ordered: bool = False) -> list:
    """A uniform sample of at most Δ0 distinct items, without replacement; ``ordered``
    sorts them first, so a seeded ``rng`` samples the same whatever PYTHONHASHSEED."""
    items = list(items)
    if ordered:
        items.sort(key=item_sort_key)
    if len(items) <= max_items_per_user:
        return items
    # The first Δ0 of a uniform permutation: one numpy call (half ``choice``'s cost).
    assert rng is not None, "sampling draws from rng"
    chosen = rng.permutation(len(items))[:max_items_per_user].tolist()
    if len(chosen) == 1:  # itemgetter of one index gives the item, not a tuple
        return [items[chosen[0]]]
    return list(itemgetter(*chosen)(items))


def sample_user_items(user_id, items, max_items_per_user: int, rng: np.random.Generator | None,
                      seed: int | None = None, salt: str = "") -> list:
    """One user's sample of ≤ Δ0 items: from ``rng``, or seeded from (seed, salt, user id)."""
    if seed is None:
        return sample_items(items, max_items_per_user, rng)
    return sample_items(items, max_items_per_user,
                        hashing.derived_rng(seed, "sample", salt, user_id), ordered=True)


def sample_block(ids: np.ndarray, sizes: np.ndarray, max_items_per_user: int,
                 rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Every user of a block (``ids`` one user after another, ``sizes`` each user's number)
    sampled as ``sample_items`` samples one, unseeded, in a few numpy calls: (the kept
    ids, each user's kept number). Why: numerics.md#sampling-a-block-of-users."""
    sizes = np.asarray(sizes, dtype=np.int64)
    kept_sizes = np.minimum(sizes, max_items_per_user)
    over = sizes > max_items_per_user
    if not over.any():
        return ids, kept_sizes
    over_pairs = np.repeat(over, sizes)
    over_sizes = sizes[over]
    # Sorted by (user, place in the permutation): each user's items in a uniform order,
    # no ties; its first Δ0 are kept.
    pairs = int(over_sizes.sum())
    users = np.repeat(np.arange(len(over_sizes), dtype=np.int64), over_sizes)
    places = rng.permutation(pairs).astype(np.int64, copy=False)
    order = (np.argsort(users * pairs + places) if pairs < 1 << 31  # it fits int64
             else np.lexsort((places, users)))
    rank = np.arange(pairs) - np.repeat(np.cumsum(over_sizes) - over_sizes, over_sizes)
    sampled = ids[over_pairs][order[rank < max_items_per_user]]
    # Every user's kept ids back in user order: those within Δ0 as they were.
    out = np.empty(int(kept_sizes.sum()), dtype=ids.dtype)
    out_starts = np.cumsum(kept_sizes) - kept_sizes
    keep_all = ~over_pairs
    shift = np.repeat(out_starts - (np.cumsum(sizes) - sizes), sizes)
    out[(np.arange(len(ids)) + shift)[keep_all]] = ids[keep_all]
    out[np.repeat(out_starts[over], max_items_per_user)
        + np.tile(np.arange(max_items_per_user), len(over_sizes))] = sampled
    return out, kept_sizes


class UserSampler:
    """``sample_user_items`` with its Δ0, seed and salt, and a generator of its own, made
    at its first use (in a DoFn: on the worker, one per DoFn instance)."""

    def __init__(self, max_items_per_user: int, seed: int | None, salt: str):
        self.max_items, self.seed, self.salt = max_items_per_user, seed, salt

    @cached_property
    def _rng(self) -> np.random.Generator:
        return hashing.os_rng()

    def __getstate__(self) -> dict:  # each copy draws a generator of its own, never this one
        return {k: v for k, v in vars(self).items() if k != "_rng"}

    def __call__(self, user_id, items) -> list:
        return sample_user_items(user_id, items, self.max_items, self._rng, self.seed, self.salt)

    def sample_block(self, ids: np.ndarray, sizes: np.ndarray) -> tuple:
        """``sample_block`` with this sampler's Δ0 and generator (unseeded only)."""
        assert self.seed is None, "unseeded only"
        return sample_block(ids, sizes, self.max_items, self._rng)


class CandidateSamplers:
    """One ``UserSampler`` per candidate Δ0 of ``max_items_per_user="auto"``.

    Args:
      max_items_per_user: the candidates' Δ0, a tuple; or one Δ0 (one candidate).
      seed, salt: as ``UserSampler``'s, the same for every candidate.
    """

    def __init__(self, max_items_per_user, seed: int | None, salt: str):
        values = (max_items_per_user if isinstance(max_items_per_user, tuple)
                  else (max_items_per_user,))
        self._samplers = tuple(UserSampler(m, seed, salt) for m in values)

    def __getitem__(self, index: int) -> UserSampler:
        return self._samplers[index]
