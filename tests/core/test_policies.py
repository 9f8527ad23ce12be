"""Sensitivity property tests of the parallel update rules (docs/privacy.md, invariant 8).

For random datasets D and D' = D with one more user inserted at a random
position, the histograms differ by at most the sensitivity the noise was
calibrated to: 1 in ℓ1 (Weighted Laplace), 1 in ℓ2 (Weighted Gaussian),
Δ0 in ℓ1 and √Δ0 in ℓ2 (Count). The same test run on a deliberately wrong rule
must find a counterexample, which shows it can fail.
"""

import math
from collections import Counter

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from beam_dpsu.core import policies
from tests.support.histograms import histogram_distance, weighted_histogram
from tests.support.byte_cases import blob, item_list, nth_permutation
from tests.support.hypothesis_profiles import examples

ITEMS = [f"w{i}" for i in range(30)]
MAX_USERS = 25
MAX_ITEMS = 12
USER_BYTES = 1 + MAX_ITEMS
ORDER_BYTES = 12  # 2^96 > 25!


@st.composite
def users(draw, extra=0):
    """0..25 users and ``extra`` more, drawn as one blob (tests/support/byte_cases.py).

    Case space: each user a list of 1..12 items of w0..w29, repeats allowed
    (already bounded: ≤ Δ0 = 12 distinct). Shrinks toward no users (and an
    extra user [w0]).
    """
    n = draw(st.integers(0, MAX_USERS))
    data = draw(blob((MAX_USERS + extra) * USER_BYTES))
    return [item_list(data[i * USER_BYTES:(i + 1) * USER_BYTES], ITEMS, MAX_ITEMS)
            for i in range(n + extra)]


@st.composite
def neighbours(draw):
    """(D, D plus one more user at any position), D as ``users()``."""
    extra, *d = draw(users(extra=1))
    position = draw(st.integers(0, len(d)))
    return d, d[:position] + [extra] + d[position:]


# Drawing a case costs Hypothesis more than checking it, so each property test
# below checks every weight rule on the same drawn case: each is still checked
# on examples(500) cases, in a fraction of the time.
SETTINGS = settings(max_examples=examples(500), deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(neighbours())
def test_weighted_laplace_l1_weighted_gaussian_l2_and_count_move_within_their_bounds(pair):
    d, d_plus = pair
    # Weighted Laplace moves ℓ1 by at most one, Weighted Gaussian ℓ2 by at most one.
    h, h2 = (weighted_histogram(x, policies.weighted_laplace_weight) for x in (d, d_plus))
    assert histogram_distance(h, h2, 1) <= 1 + 1e-9, "weighted-laplace"
    h, h2 = (weighted_histogram(x, policies.weighted_gaussian_weight) for x in (d, d_plus))
    assert histogram_distance(h, h2, 2) <= 1 + 1e-9, "weighted-gaussian"
    # Count moves by Δ0 in ℓ1 and √Δ0 in ℓ2.
    h, h2 = (weighted_histogram(x, policies.count_weight) for x in (d, d_plus))
    assert histogram_distance(h, h2, 1) <= MAX_ITEMS + 1e-9, "count l1"
    assert histogram_distance(h, h2, 2) <= math.sqrt(MAX_ITEMS) + 1e-9, "count l2"


def test_property_test_has_teeth():
    """The Gaussian rule 1/√|W| breaks ℓ1 sensitivity 1: the ℓ1 check must find it."""
    found = []

    # Find only, as the self-checks of tests/core/test_sequential_policies.py:
    # shrinking the users' blob took ~250 runs (2.5 s), finding it 4 to 6.
    @settings(max_examples=500, deadline=None, database=None,
              phases=(Phase.explicit, Phase.reuse, Phase.generate))
    @given(neighbours())
    def wrong_rule_is_caught(pair):
        d, d_plus = pair
        h, h2 = (weighted_histogram(x, policies.weighted_gaussian_weight) for x in (d, d_plus))
        if histogram_distance(h, h2, 1) > 1 + 1e-9:
            found.append(pair)
            raise AssertionError("ℓ1 sensitivity above 1")

    with pytest.raises(AssertionError):
        wrong_rule_is_caught()
    assert found


def test_user_contribution_dedupes_and_weights():
    assert policies.user_contribution(["a", "b", "a"], policies.weighted_laplace_weight) == [
        ("a", 0.5), ("b", 0.5)]
    assert policies.user_contribution([], policies.count_weight) == []
    c = policies.user_contribution(["a", "b", "c", "d"], policies.weighted_gaussian_weight)
    assert [w for _, w in c] == [0.5] * 4


def test_weight_rejects_empty_user():
    with pytest.raises(ValueError, match="at least 1 item, got 0"):
        policies.weighted_gaussian_weight(0)


@SETTINGS
@given(neighbours())
def test_only_held_items_enter_and_the_key_set_grows_only_by_the_extra_users_items(pair):
    # docs/privacy.md, invariant 8: keys(H(D ∪ {x})) ∖ keys(H(D)) ⊆ W_x, and nothing is lost.
    d, d_plus = pair
    held = {item for user in d_plus for item in user}
    extra = [user for user in d_plus if user not in d] or [d_plus[0]]
    for weight in (policies.count_weight, policies.weighted_laplace_weight,
                   policies.weighted_gaussian_weight):
        h, h2 = weighted_histogram(d, weight), weighted_histogram(d_plus, weight)
        # Only held items enter the histogram, each at a positive weight.
        assert set(h2) == held and all(v > 0 for v in h2.values()), weight.__name__
        new_keys = set(h2) - set(h)
        assert set(h) <= set(h2), weight.__name__
        assert any(new_keys <= set(user) and len(new_keys) <= MAX_ITEMS
                   for user in extra), weight.__name__


@SETTINGS
@given(users(), blob(2 * ORDER_BYTES))
def test_the_builder_sums_user_contributions_in_an_order_free_way(users, orders):
    # The per-(size, item) sum equals the per-user sum, and is bit-identical
    # for any order of the users (so a bundle's partial sums do not depend on
    # the order the runner delivers users in). Each weight's order is one of
    # ``orders``' two integers < 2^96 (> 25!: every order of ≤ 25 users is
    # reached; zero bytes keep the order), one draw where st.randoms made one
    # per swap.
    for number, weight in enumerate((policies.weighted_laplace_weight,
                                     policies.weighted_gaussian_weight)):
        rank = int.from_bytes(orders[number * ORDER_BYTES:(number + 1) * ORDER_BYTES], "little")
        naive: dict = {}
        for user in users:
            for item, w in policies.user_contribution(user, weight):
                naive[item] = naive.get(item, 0.0) + w
        built = weighted_histogram(users, weight)
        assert set(built) == set(naive)
        assert all(math.isclose(built[k], naive[k], rel_tol=1e-12) for k in naive)
        shuffled = nth_permutation(users, rank)
        assert weighted_histogram(shuffled, weight) == built
        assert _per_size_counter_histogram(users, weight) == built


def _per_size_counter_histogram(users, weight) -> dict:
    # The earlier builder (a Counter per size): the id counts must give the
    # same sums, bit for bit.
    by_size: dict = {}
    for user in users:
        distinct = dict.fromkeys(user)
        if distinct:
            by_size.setdefault(len(distinct), Counter()).update(distinct.keys())
    hist: dict = {}
    for size in sorted(by_size):
        for item, n in by_size[size].items():
            hist[item] = hist.get(item, 0.0) + n * weight(size)
    return hist


@given(users(), st.integers(1, 6))
def test_folding_ids_into_counts_changes_no_sum(users, fold):
    # Lists of ids folded into count arrays early (at `fold` ids), late or
    # never, and histogram() asked for midway: the same sums, bit for bit.
    weight = policies.weighted_gaussian_weight
    expected = weighted_histogram(users, weight)
    folding = policies.WeightedHistogramBuilder(weight)
    folding.FOLD_IDS = fold
    for i, user in enumerate(users):
        folding.add(user)
        if i == len(users) // 2:
            folding.histogram()
    assert folding.histogram() == expected
    assert folding.entries <= len(expected) + sum(len(set(u)) for u in users) // 8 + 1


def test_the_builder_adds_known_distinct_items_as_add_does():
    plain, distinct = (policies.WeightedHistogramBuilder(policies.weighted_gaussian_weight)
                       for _ in range(2))
    users = [["a", "b", "c"], ["b"], [f"i{k}" for k in range(12)] + ["a"]]
    for items in users:
        plain.add(items)
    distinct.add_distinct(dict.fromkeys(users[0], 5))  # a dict: its keys, never its values
    distinct.add_distinct(tuple(users[1]))
    distinct.add_distinct(users[2])
    assert distinct.histogram() == plain.histogram()
    assert distinct.entries == plain.entries
    # A mapping (a Counter, more than 8 items) is its keys: its values must not be added.
    counter = policies.WeightedHistogramBuilder(policies.weighted_laplace_weight)
    counter.add_distinct(Counter({f"i{k}": 5 for k in range(9)}))
    assert counter.histogram() == pytest.approx({f"i{k}": 1 / 9 for k in range(9)})


def test_the_builder_counts_its_entries():
    # One entry per distinct item, plus one per eight ids held.
    builder = policies.WeightedHistogramBuilder(policies.weighted_gaussian_weight)
    builder.add(["a", "b"])
    builder.add(["b", "a", "a"])  # same items: no new item, two more ids
    builder.add(["a"])
    builder.add([])
    assert builder.entries == 2 + 5 // 8
    builder.add([f"i{k}" for k in range(20)])
    assert builder.entries == 22 + 25 // 8
    with pytest.raises(TypeError, match="a user's items must be a collection of items, got a str"):
        builder.add("cat")  # one item, which would be split into characters
    assert builder.histogram() == pytest.approx(
        {"a": 2 / math.sqrt(2) + 1, "b": 2 / math.sqrt(2), **{f"i{k}": 1 / math.sqrt(20)
                                                             for k in range(20)}})


def test_item_ids_number_items_in_order_of_first_sight():
    ids = policies.ItemIds()
    assert ids.ids(["b", "a", "b"]) == [0, 1, 0]
    assert ids.ids(iter(["c", "a"])) == [2, 1]  # read once: an iterator will do
    assert ids.items() == ["b", "a", "c"] and len(ids) == 3


def test_an_unhashable_item_leaves_no_id_behind():
    # A failed user must not leave its new items as keys: a key of the
    # histogram is noised and may be released, even at weight 0.
    ids = policies.ItemIds()
    ids.ids(["a"])
    with pytest.raises(TypeError):
        ids.ids(["b", "a", "c", ["unhashable"]])
    assert ids.items() == ["a"]
    assert ids.ids(["d", "b"]) == [1, 2]  # numbering goes on where it stopped
    builder = policies.WeightedHistogramBuilder(policies.weighted_laplace_weight)
    builder.add_distinct(["x"])
    with pytest.raises(TypeError):
        builder.add_distinct(["y", {}])
    assert builder.histogram() == {"x": 1.0}


def test_item_ids_copy_and_pickle_by_their_items():
    import copy
    import pickle
    ids = policies.ItemIds()
    ids.ids(["b", "a"])
    for twin in (pickle.loads(pickle.dumps(ids)), copy.deepcopy(ids)):
        assert twin.items() == ["b", "a"] and twin.ids(["c", "a"]) == [2, 1]
    assert ids.items() == ["b", "a"]  # the copies are their own
