"""Coverage figures of the evaluation job, against hand-worked examples."""

import math

import pytest

from pipelines.evaluation.evaluate import missing_mass

# Distinct (user, item) pairs per item: a held by 3 users, b by 1, c by 2 (6 pairs).
PAIRS = {"a": 3, "b": 1, "c": 2}


@pytest.mark.parametrize("released, expected", [
    ({"a"}, 3 / 6),            # b and c missing: 1 + 2 of 6 pairs
    ({"b"}, 5 / 6),            # one item of three released, but only 1 pair of 6
    ({"a", "c"}, 1 / 6),
    (set(), 1.0),              # nothing released: all of the mass is missing
    ({"a", "b", "c"}, 0.0),
    ({"a", "z"}, 3 / 6),       # a released item the data does not hold covers nothing
])
def test_missing_mass_is_the_share_of_pairs_whose_item_is_not_released(released, expected):
    assert missing_mass(PAIRS, released) == pytest.approx(expected, abs=1e-15)


def test_missing_mass_weighs_pairs_not_items():
    # 100 items held once each and one held by 100 users: releasing the popular one
    # leaves half the mass missing, though 100 of 101 items are missing.
    pairs = {f"rare{i}": 1 for i in range(100)} | {"common": 100}
    assert missing_mass(pairs, ["common"]) == 0.5
    assert missing_mass(pairs, [f"rare{i}" for i in range(100)]) == 0.5


def test_missing_mass_of_no_pairs_is_nan_and_bad_counts_are_refused():
    assert math.isnan(missing_mass({}, {"a"}))
    assert math.isnan(missing_mass({"a": 0}, set()))
    with pytest.raises(ValueError, match="pair counts must be integers >= 0"):
        missing_mass({"a": -1, "b": 2}, set())
    with pytest.raises(ValueError, match="pair counts must be integers >= 0"):
        missing_mass({"a": 1.5}, set())
