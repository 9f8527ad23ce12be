"""Hypothesis strategies over k-grams of a four-token alphabet."""

import itertools

from hypothesis import strategies as st

from tests.support.byte_cases import blob, held

TOKENS = "abcd"
UNIGRAMS = [(t,) for t in TOKENS]


@st.composite
def released_sets(draw):
    """(k, S_1, S_{k−1}): k in 2..4, S_1 any non-empty set of unigrams, S_{k−1} any set
    of (k−1)-tuples of TOKENS (up to all 4^(k−1) of them), sparse or dense.

    Both sets are decoded from one blob (tests/support/byte_cases.py ``held``),
    two draws in all where a set of tuples took one to four per tuple. Shrinks
    toward k = 2, S_1 = {("a",)}, S_{k−1} = {}.
    """
    k = draw(st.integers(2, 4))
    data = draw(blob(1 + len(UNIGRAMS) + 1 + len(TOKENS) ** 3))
    unigrams = {u for u, _ in held(data[:1 + len(UNIGRAMS)], UNIGRAMS)} or {UNIGRAMS[0]}
    grams = list(itertools.product(TOKENS, repeat=k - 1))
    previous = {g for g, _ in held(data[1 + len(UNIGRAMS):], grams)}
    return k, unigrams, previous
