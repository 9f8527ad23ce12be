"""DPNE's level work on blocks of users, in numpy (dpne §2, Algorithm 1 lines 4–9).

A ``DocumentBlock`` holds users' documents as token ids into its own vocabulary, so a
level over it is a few array operations and one set lookup per distinct (k−1)-gram,
computing exactly the per-user rule (``kgrams.is_valid``).
Sampling and why: docs/explanation/bounding.md#document-blocks.
"""

from __future__ import annotations

from array import array
from typing import Callable, Hashable, NamedTuple

import numpy as np

from beam_dpsu.core.sampling import sample_user_items

__all__ = ["DocumentBlock", "BlockBuilder", "BadToken", "sampled_weighted_sums",
           "distinct_items_per_user", "level1_sums", "level_sums"]


class DocumentBlock(NamedTuple):
    """A block of users' documents as arrays: the distinct tokens (``vocab``), every
    document's token ids concatenated, each document's length and user index, and the
    users' ids (only seeded samples read them) or None."""
    vocab: list
    tokens: np.ndarray
    doc_lengths: np.ndarray
    doc_users: np.ndarray
    user_ids: list | None


class _Vocabulary(dict):
    """token → id in order of first use; ``check`` (if any) vets each new token."""

    def __init__(self, check: Callable[[Hashable], bool] | None):
        super().__init__()
        self._check = check

    def __missing__(self, token):
        if self._check is not None and not self._check(token):
            raise BadToken
        self[token] = i = len(self)
        return i


class BadToken(ValueError):
    """A token failed the builder's check (the caller re-checks its record, to name it)."""


class BlockBuilder:
    """Builds a ``DocumentBlock`` user by user, each token an id as it arrives: a few flat
    arrays and one vocabulary, nothing for the garbage collector to walk."""

    def __init__(self, keep_ids: bool, check: Callable[[Hashable], bool] | None = None):
        self._index = _Vocabulary(check)
        self._tokens = array("q")
        self._doc_lengths = array("q")
        self._doc_users = array("q")
        self._user_ids: list | None = [] if keep_ids else None
        self.users = 0

    @property
    def tokens(self) -> int:
        """The number of tokens added so far."""
        return len(self._tokens)

    def add(self, user_id, documents) -> None:
        """Adds one user's documents (sequences of tokens). If a token fails the check
        (``BadToken``) or is unhashable (``TypeError``), nothing of the user is added:
        not its tokens, nor the new words they brought to the vocabulary."""
        tokens, lengths = self._tokens, self._doc_lengths
        n_tokens, n_docs, n_vocab = len(tokens), len(lengths), len(self._index)
        try:
            for doc in documents:
                tokens.extend(map(self._index.__getitem__, doc))
                lengths.append(len(doc))
        except (BadToken, TypeError):
            del tokens[n_tokens:], lengths[n_docs:]
            while len(self._index) > n_vocab:
                self._index.popitem()  # dicts pop their last insertion first
            raise
        self._doc_users.extend([self.users] * (len(lengths) - n_docs))
        if self._user_ids is not None:
            self._user_ids.append(user_id)
        self.users += 1

    def build(self) -> DocumentBlock:
        index = self._index
        token_type = np.min_scalar_type(max(len(index) - 1, 0))
        return DocumentBlock(
            vocab=list(index),
            tokens=np.frombuffer(self._tokens, dtype=np.int64).astype(token_type),
            doc_lengths=np.frombuffer(self._doc_lengths, dtype=np.int64).copy(),
            doc_users=np.frombuffer(self._doc_users, dtype=np.int64).copy(),
            user_ids=self._user_ids)


# Keys stay below this (int64 with a bit to spare).
_DIGIT_KEYS = 1 << 62


def _gram_keys(tokens: np.ndarray, starts: np.ndarray, length: int,
               n_tokens: int) -> tuple[np.ndarray, bool]:
    """(an int64 key per ``length``-gram at ``starts``, equal iff the grams are, whether
    they are the token ids as digits base ``n_tokens``, not dense ids past overflow)."""
    keys = tokens[starts].astype(np.int64)
    base = max(n_tokens, 1)
    bound = base  # keys < bound
    digits = True
    for j in range(1, length):
        if bound * base < _DIGIT_KEYS:
            keys = keys * n_tokens + tokens[starts + j]
            bound *= base
        else:  # one more digit could overflow: number the pairs densely instead
            keys = _pair_ids(keys, tokens[starts + j])[1]
            bound = keys.size
            digits = False
    return keys, digits and bound < _DIGIT_KEYS


def _pair_ids(left: np.ndarray, right: np.ndarray) -> tuple:
    """(an index of each distinct (left[i], right[i]) pair, its dense id in (left, right) order)."""
    if left.size and left.min() >= 0 and right.min() >= 0:
        width = int(right.max()) + 1
        bound = (int(left.max()) + 1) * width
        if bound <= _table_limit(left.size):
            return _dense_ids(left * width + right, bound)
    order = np.lexsort((right, left))
    a, b = left[order], right[order]
    new = np.r_[True, (a[1:] != a[:-1]) | (b[1:] != b[:-1])] if order.size else np.ones(0, bool)
    ids = np.empty(order.size, dtype=np.int64)
    ids[order] = np.cumsum(new) - 1
    return order[new], ids


def _table_limit(n: int) -> int:
    """The largest key range a table counts for n keys (a sort costs more up to it)."""
    return max(1 << 22, 4 * n)


def _dense_ids(keys: np.ndarray, bound: int) -> tuple:
    """(an index of each distinct key, its dense id) for keys in [0, bound), by a table."""
    present = np.zeros(bound, dtype=bool)
    present[keys] = True
    rank = np.cumsum(present) - 1
    ids = rank[keys]
    where = np.empty(int(rank[-1]) + 1 if bound else 0, dtype=np.int64)
    where[ids] = np.arange(keys.size)  # any occurrence represents its key
    return where, ids


def _unique_ids(keys: np.ndarray, bound: int) -> tuple:
    """``_dense_ids`` by a table when the range is small, else by ``np.unique``."""
    if bound <= _table_limit(keys.size):
        return _dense_ids(keys, bound)
    _, where, ids = np.unique(keys, return_index=True, return_inverse=True)
    return where, ids


def _digit_keys(grams, vocab: list, length: int) -> np.ndarray:
    """``_gram_keys``' digit keys of those ``grams`` made only of the block's tokens."""
    index = {t: i for i, t in enumerate(vocab)}
    base = len(vocab)
    keys = []
    for gram in grams:
        if len(gram) != length:
            continue
        key = 0
        for token in gram:
            i = index.get(token)
            if i is None:
                break
            key = key * base + i
        else:
            keys.append(key)
    return np.array(keys, dtype=np.int64)


def sampled_weighted_sums(users: np.ndarray, items: np.ndarray, n_items: int, max_items: int,
                          item_weight: Callable[[int], float], rng: np.random.Generator | None,
                          seeded_sample=None, count_holders: bool = False):
    """Σ_users item_weight(|S_u|) on each item of S_u, per item index (length ``n_items``).

    S_u: user u's distinct items of the occurrences ``(users[j], items[j])``, sampled
    to ``max_items`` by priorities from ``rng``, or by ``seeded_sample(u, item indices)``
    (tests). ``count_holders``: also each item's number of holders (a pre-threshold).
    """
    if users.size == 0:
        empty = np.zeros(n_items)
        return (empty, np.zeros(n_items, dtype=np.int64)) if count_holders else empty
    user, item = _distinct_pairs(users, items, n_items)
    counts = np.bincount(user)
    over = counts > max_items
    if over.any():
        # Only users holding more than Δ are sampled: each keeps the pairs it ranks
        # first by random priority (or the seeded sample's).
        pairs = np.flatnonzero(over[user])
        if seeded_sample is None:
            assert rng is not None, "an unseeded sample draws from rng"
            order = np.lexsort((rng.random(pairs.size), user[pairs]))
        else:
            order = np.lexsort((item[pairs], user[pairs]))
        pairs = pairs[order]
        grouped = user[pairs]
        starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]])
        sizes = np.diff(np.r_[starts, grouped.size])
        if seeded_sample is None:
            kept = np.arange(grouped.size) - np.repeat(starts, sizes) < max_items
        else:
            kept = np.zeros(grouped.size, dtype=bool)
            for s, c in zip(starts.tolist(), sizes.tolist()):
                own = item[pairs[s:s + c]]
                kept[s:s + c] = np.isin(own, seeded_sample(int(grouped[s]), own))
        keep = np.ones(user.size, dtype=bool)
        keep[pairs[~kept]] = False
        user, item = user[keep], item[keep]
        counts = np.minimum(counts, max_items)
    weight_of_size = np.array([0.0] + [item_weight(n) for n in range(1, int(counts.max()) + 1)])
    sums = np.bincount(item, weights=weight_of_size[counts[user]], minlength=n_items)
    if count_holders:
        return sums, np.bincount(item, minlength=n_items)
    return sums


def _distinct_pairs(users: np.ndarray, items: np.ndarray, n_items: int) -> tuple:
    """(user, item) of each distinct (users[j], items[j]) pair: by a stable radix sort by
    item when users ascend and items fit 16 bits, else by one combined key."""
    if n_items <= 1 << 16 and (users.size < 2 or bool((users[1:] >= users[:-1]).all())):
        order = np.argsort(items.astype(np.uint16), kind="stable")
        user, item = users[order].astype(np.int64), items[order].astype(np.int64)
        new = np.r_[True, (item[1:] != item[:-1]) | (user[1:] != user[:-1])]
        return user[new], item[new]
    # By a sort, not ``np.unique`` (numpy 2's hash-based one is slower on int64).
    pairs = np.sort(users.astype(np.int64) * n_items + items)
    pairs = pairs[np.r_[True, pairs[1:] != pairs[:-1]]] if pairs.size else pairs
    return pairs // n_items, pairs % n_items


def distinct_items_per_user(block: DocumentBlock) -> np.ndarray:
    """Each user's number of distinct tokens (level 1's sizes, which "auto" bins)."""
    n_users = len(block.user_ids) if block.user_ids is not None else (
        int(block.doc_users.max()) + 1 if block.doc_users.size else 0)
    users = np.repeat(block.doc_users, block.doc_lengths)
    if users.size == 0:  # (_distinct_pairs needs a token)
        return np.zeros(n_users, dtype=np.int64)
    user, _ = _distinct_pairs(users, block.tokens, len(block.vocab))
    return np.bincount(user, minlength=n_users)


def _grams_at(words: np.ndarray, tokens: np.ndarray, positions: np.ndarray, length: int) -> list:
    """The ``length``-grams (tuples of tokens) starting at ``positions``, decoded in C."""
    ids = tokens[positions[:, None] + np.arange(length)]
    return list(map(tuple, words[ids].tolist()))


def _seeded_sampler(block: DocumentBlock, label: Callable[[int], Hashable], max_items: int,
                    seed: int | None, salt: str):
    """``sampled_weighted_sums``' seeded_sample for this block (None unseeded)."""
    if seed is None:
        return None

    def sample(user: int, item_indices: np.ndarray) -> list:
        by_label = {label(i): i for i in item_indices.tolist()}
        assert block.user_ids is not None, "a seeded sample needs the block's user ids"
        chosen = sample_user_items(block.user_ids[user], list(by_label), max_items, None,
                                   seed, salt)
        return [by_label[g] for g in chosen]

    return sample


def level1_sums(block: DocumentBlock, max_items: int, item_weight, rng, seed=None,
                salt: str = "", count_holders: bool = False) -> list:
    """Level 1: [(token, Σ weights)], or [(token, (Σ weights, holders))] (``count_holders``)."""
    users = np.repeat(block.doc_users, block.doc_lengths)
    vocab = block.vocab
    sampler = _seeded_sampler(block, vocab.__getitem__, max_items, seed, salt)
    sums = sampled_weighted_sums(users, block.tokens, len(vocab), max_items, item_weight, rng,
                                 sampler, count_holders)
    sums, holders = sums if count_holders else (sums, None)
    held = np.flatnonzero(sums if holders is None else holders)
    values = sums[held].tolist()
    return list(zip([vocab[i] for i in held.tolist()],
                    values if holders is None else zip(values, holders[held].tolist())))


def level_sums(block: DocumentBlock, k: int, pruning: str, previous, unigrams, max_items: int,
               item_weight, rng, seed=None, salt: str = "") -> list:
    """Level k ≥ 2: [(k-gram, Σ weights)] over the block's users' distinct valid k-grams
    (``kgrams.is_valid`` with ``previous`` = S_{k−1}, ``unigrams`` = S_1, token tuples)."""
    tokens, vocab = block.tokens, block.vocab
    n = tokens.size
    ends = np.repeat(np.cumsum(block.doc_lengths), block.doc_lengths)  # each position's doc end
    positions = np.arange(n)
    # A dense id per distinct (k−1)-gram, at every position that starts one.
    starts = np.flatnonzero(positions + (k - 1) <= ends)
    if starts.size == 0:
        return []
    keys, digit_keys = _gram_keys(tokens, starts, k - 1, len(vocab))
    first, gram = _unique_ids(keys, int(keys.max()) + 1)
    # Which were released: by digit keys when S_{k−1} is the smaller side, else one
    # lookup per distinct (k−1)-gram.
    words = np.array(vocab, dtype=object)
    if digit_keys and len(previous) < first.size:
        released_gram = np.isin(keys[first], _digit_keys(previous, vocab, k - 1))
    else:
        released_gram = np.array([g in previous for g in _grams_at(words, tokens,
                                                                  starts[first], k - 1)],
                                 dtype=bool)
    released = np.zeros(n + 1, dtype=bool)
    released[starts] = released_gram[gram]
    gram_at = np.zeros(n, dtype=np.int64)
    gram_at[starts] = gram
    # Then the valid k-grams: prefix released and suffix (or last token) too.
    kgram_starts = np.flatnonzero(positions + k <= ends)
    if pruning == "both":
        valid = released[kgram_starts] & released[kgram_starts + 1]
    else:
        unigram_ok = np.array([(t,) in unigrams for t in vocab], dtype=bool)
        valid = released[kgram_starts] & unigram_ok[tokens[kgram_starts + k - 1]]
    at = kgram_starts[valid]
    if at.size == 0:
        return []
    first, kgram = _pair_ids(gram_at[at], tokens[at + k - 1])  # (prefix, last token)
    labels = _grams_at(words, tokens, at[first], k)
    users = np.repeat(block.doc_users, block.doc_lengths)[at]
    sums = sampled_weighted_sums(users, kgram, len(labels), max_items, item_weight, rng,
                                 _seeded_sampler(block, labels.__getitem__, max_items, seed,
                                                 salt))
    held = np.flatnonzero(sums)
    return list(zip([labels[i] for i in held.tolist()], sums[held].tolist()))
