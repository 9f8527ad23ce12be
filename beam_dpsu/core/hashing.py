"""Random number generators for noise and sampling.

Every generator is seeded from OS entropy, so a private run is never reproducible. A
fixed ``seed`` is test-only: each draw then comes from (seed, a stable hash of what it is
for, e.g. the user id), whatever way a runner splits the data.
"""

from __future__ import annotations

import hashlib
import os
import threading
from typing import Any

import numpy as np

__all__ = ["canonical_bytes", "stable_hash64", "os_rng", "derived_rng",
           "random_id128", "RANDOM_ID_BATCH"]

# How many 128-bit random ids one read of OS randomness gives (``random_id128``).
RANDOM_ID_BATCH = 4096


def canonical_bytes(value: Any) -> bytes:
    # Distinct types get distinct prefixes so that "1" and 1 and b"1" differ.
    if isinstance(value, bytes):
        return b"b" + value
    if isinstance(value, str):
        # Lone surrogates passed through: strict encoding would raise an error
        # quoting the character (a user id's or an item's).
        return b"s" + value.encode("utf-8", "surrogatepass")
    if isinstance(value, (bool, np.bool_)):
        return b"?" + (b"1" if value else b"0")
    if isinstance(value, (int, np.integer)):
        return b"i" + str(int(value)).encode()
    if isinstance(value, tuple):
        parts = [canonical_bytes(v) for v in value]
        return b"t" + b"".join(len(p).to_bytes(8, "big") + p for p in parts)
    return b"r" + repr(value).encode("utf-8")


def stable_hash64(value: Any, key: bytes = b"") -> int:
    """A 64-bit hash of ``value``, the same in every process and run (unlike ``hash``);
    with ``key``, a BLAKE2b MAC, unpredictable without the key."""
    h = hashlib.blake2b(canonical_bytes(value), digest_size=8, key=key[:64])
    return int.from_bytes(h.digest(), "big")


class _RandomIds(threading.local):
    """Each thread's ids not yet handed out, drawn from the OS a batch at a time."""

    def __init__(self):
        self.pool: list = []


_random_ids = _RandomIds()


def _forget_random_ids() -> None:
    # A forked child must not hand out the ids its parent holds.
    global _random_ids
    _random_ids = _RandomIds()


os.register_at_fork(after_in_child=_forget_random_ids)


def random_id128() -> int:
    """128 bits of fresh OS randomness as an int, drawn ``RANDOM_ID_BATCH`` at a time per
    thread and process (one system call, not one per element)."""
    pool = _random_ids.pool
    if not pool:
        raw = os.urandom(16 * RANDOM_ID_BATCH)
        pool.extend(int.from_bytes(raw[i:i + 16], "big") for i in range(0, len(raw), 16))
    return pool.pop()


def os_rng() -> np.random.Generator:
    """A generator seeded from fresh OS entropy."""
    return np.random.default_rng(np.random.SeedSequence())


def derived_rng(seed: int, *keys: Any) -> np.random.Generator:
    """A generator for (seed, keys…), reproducible across processes (tests only)."""
    return np.random.default_rng([seed] + [stable_hash64(k) for k in keys])
