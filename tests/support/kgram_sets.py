"""Hypothesis strategies over k-grams of a four-token alphabet."""

from hypothesis import strategies as st

TOKENS = "abcd"


@st.composite
def released_sets(draw):
    k = draw(st.integers(2, 4))
    unigrams = draw(st.sets(st.sampled_from([(t,) for t in TOKENS]), min_size=1))
    previous = draw(st.sets(st.tuples(*[st.sampled_from(TOKENS)] * (k - 1)), max_size=30))
    return k, unigrams, previous
