"""N-gram test data and the closure check every n-gram release must pass."""

import numpy as np


def phrase_corpus(n_users=300, seed=0):
    """Users write a few documents from a small phrase book, so n-grams repeat."""
    rng = np.random.default_rng(seed)
    phrases = [("the", "cat", "sat", "down"), ("a", "dog", "ran", "home"),
               ("the", "dog", "sat"), ("cat", "ran", "down", "the", "road")]
    docs = []
    for u in range(n_users):
        for _ in range(int(rng.integers(1, 3))):
            docs.append((f"user{u}", phrases[int(rng.integers(len(phrases)))]))
    return docs


def downward_closed(ngrams):
    s = set(ngrams)
    return all(g[:-1] in s and g[1:] in s for g in s if len(g) > 1)
