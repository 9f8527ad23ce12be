"""Property-test cases decoded from one fixed-size byte string.

Hypothesis's cost is per primitive draw, not per case: a list of 15 users
drawn as dictionaries or lists of items takes ~140 draws, and drawing them
cost several times what checking the property did. The strategies here draw
all the users' bytes as ONE ``st.binary`` of a fixed size and decode them in
Python (a few draws per case instead of ~140), over a case space at least as
large as the per-item strategies they replace.

Shrinking still gives small examples: Hypothesis shrinks a byte string toward
zero bytes, and every decoder maps zero bytes to the smallest part (the first
item alone, count 1, absent from the public counts). The blob always has the
size of the largest case, so shrinking the number of users does not change
the blob's size (the shrinker keeps the blob while it lowers the count).
"""

import math

from hypothesis import strategies as st


def blob(size: int) -> st.SearchStrategy[bytes]:
    """``size`` random bytes: one primitive draw."""
    return st.binary(min_size=size, max_size=size)


def nth_permutation(items, n: int) -> list:
    """The ``n``-th permutation of ``items`` (mod len(items)!) in Lehmer order: 0 is ``items``."""
    pool = list(items)
    out = []
    for size in range(len(pool), 0, -1):
        n, index = divmod(n, size)
        out.append(pool.pop(index))
    return out


USER_LIST_BYTES = 3


def ordered_user(chunk: bytes, alphabet, max_size: int, min_size: int = 1) -> list:
    """An ordered list of min_size..max_size distinct items of ``alphabet`` (fewer if the
    alphabet is shorter).

    ``chunk`` (read as one integer v): the size is min_size + v mod s, s =
    max_size − min_size + 1, the order the (v // s)-th permutation of the
    alphabet, mod len(alphabet)!. The chunk must be long enough that
    256^len(chunk) / s ≥ len(alphabet)! (asserted), so every order and size is
    reached, near uniformly when it is much longer. Zero bytes: the first
    min_size items of the alphabet.
    """
    sizes = max_size - min_size + 1
    orders = math.factorial(len(alphabet))
    assert 256 ** len(chunk) // sizes >= orders, "too few bytes for every order"
    v = int.from_bytes(chunk, "little")
    size, rank = min_size + v % sizes, v // sizes
    return nth_permutation(alphabet, rank % orders)[:size]


def held(chunk: bytes, items) -> list:
    """(item, its byte) of the items held: a subset of ``items``, sparse or dense.

    chunk[0] sets the density: ``keep`` = 1 + chunk[0] mod 8, and item k is
    held iff its byte b = chunk[1 + k] has b mod 8 ≥ 8 − keep (probability
    keep/8). Every subset is reached (keep = 7: b mod 8 = 0 leaves an item
    out); zero bytes hold none.
    """
    keep = 1 + chunk[0] % 8
    return [(item, b) for item, b in zip(items, chunk[1:]) if b % 8 >= 8 - keep]


COUNTS_BYTES = 11  # one density byte, then one byte per item (up to 10 items)


def item_counts(chunk: bytes, items, max_count: int) -> dict:
    """A non-empty {item: count} over ``items`` (≤ 10 of them), counts 1..max_count (≤ 32).

    The items ``held`` (sparse and dense users both occur), item k with count
    1 + (b // 8) mod max_count of its byte b. Every non-empty dict of
    ≤ len(items) keys is reached. No item held (zero bytes among them) stands
    for {items[0]: 1}, the smallest user.
    """
    counts = {item: 1 + (b // 8) % max_count for item, b in held(chunk, items)}
    return counts or {items[0]: 1}


def optional_counts(chunk: bytes, items, max_count: int) -> dict:
    """A possibly empty {item: count} over ``items``, counts 0..max_count (< 255).

    Byte b of item k: absent if b mod (max_count + 2) = 0, else count
    b mod (max_count + 2) − 1. Zero bytes: {}. Every such dict is reached.
    """
    base = max_count + 2
    return {item: b % base - 1 for item, b in zip(items, chunk) if b % base}


def item_list(chunk: bytes, items, max_size: int, min_size: int = 1) -> list:
    """A list of min_size..max_size items of ``items`` (≤ 256), repeats allowed, in order.

    ``chunk`` has 1 + max_size bytes: the size is min_size + chunk[0] mod
    (max_size − min_size + 1), item j is items[chunk[1 + j] mod len(items)].
    Every such list is reached. Zero bytes: min_size times items[0].
    """
    size = min_size + chunk[0] % (max_size - min_size + 1)
    return [items[b % len(items)] for b in chunk[1:1 + size]]
