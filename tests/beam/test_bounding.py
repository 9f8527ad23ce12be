"""Input forms and contribution bounding: pairs, per-user records, and a mix of both.

A user may arrive as (user_id, item) pairs, as (user_id, items) records, or
split over many of either; every form must be merged into one record per
user before anything is bounded (docs/privacy.md, invariant 1), so that the released set
does not depend on how the input was split into rows. The pure parts
(``item_counts``, the merging combiner) are checked on random splits with
hypothesis; the Beam parts on the DirectRunner, seeded, against each other
and against the pure core.
"""

import math
import random
from collections import Counter
import zlib

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.transforms.window import GlobalWindow
from hypothesis import given, settings
from hypothesis import strategies as st

from beam_dpsu import (MECHANISMS, BoundContributions, Budget, InvalidRecordError, SelectItems,
                       WeightedHistogram, ZCDPBudget, mechanism_from_name)
from beam_dpsu.core import mechanisms
from beam_dpsu.core import policies
from beam_dpsu.beam.bounding import (ItemCountsPerUser, SampleItemsPerUser, _MergeItemCountsFn,
                                canonical_user_id, check_pair, element_distinct_items,
                                element_item_counts, item_counts)
from beam_dpsu.beam.sequential import run_order_key, user_order_key
from beam_dpsu.core.tokenizer import Tokens
from beam_dpsu.core.calibration import GAUSSIAN, Calibration
from beam_dpsu.beam.histograms import merge_histograms, shard_of_item, split_by_shard
from beam_dpsu.beam.noisy_threshold import NOISE_BATCH, KeepWithProbability, NoisyThreshold
from tests.support.byte_cases import blob, nth_permutation
from tests.support.text_subclasses import EXAMPLES
from tests.support.hypothesis_profiles import examples
from tests.support.one_pipeline import run_cases
from tests.support import histograms

pytestmark = pytest.mark.pipeline

# --- the pure part ----------------------------------------------------------------------


def test_item_counts_of_pairs_and_records():
    assert item_counts(("u", "a")) == ("u", {"a": 1})
    assert item_counts(("u", ["a", "b", "a"])) == ("u", {"a": 2, "b": 1})
    assert item_counts(("u", ("a",))) == ("u", {"a": 1})
    assert item_counts(("u", {"a", "b"})) == ("u", {"a": 1, "b": 1})
    assert item_counts(("u", frozenset([b"x"]))) == ("u", {b"x": 1})
    assert item_counts(("u", [])) == ("u", {})  # a user holding nothing
    assert item_counts(("u", (t for t in ["a", "a"]))) == ("u", {"a": 2})
    # Only the distinct items (the mechanisms that do not use frequencies).
    assert item_counts(("u", ["a", "b", "a"]), occurrences=False) == ("u", {"a": 1, "b": 1})
    assert item_counts(("u", [np.str_("a"), "a"]), occurrences=False) == ("u", {"a": 1})


def test_item_counts_canonicalises_user_ids_and_items():
    user, counts = item_counts((np.int64(7), np.array(["x", "y", "x"])))
    assert user == "7" and type(user) is str  # an int id is its text: 7 and "7" are one user
    assert counts == {"x": 2, "y": 1} and all(type(i) is str for i in counts)
    # numpy.str_ and str are one item, and come out as plain str.
    _, counts = item_counts(("u", [np.str_("x"), "x", b"x"]))
    assert counts == {"x": 2, b"x": 1} and {type(i) for i in counts} == {str, bytes}


@pytest.mark.parametrize("value,held", EXAMPLES)
def test_an_item_of_a_subclass_is_keyed_by_what_it_holds(value, held):
    # Not by its own __str__ / __bytes__: the item is what it holds, as every transform
    # (KeepReleased, CountReleased) keys it.
    assert check_pair(("u", value)) == ("u", held) and type(check_pair(("u", value))[1]) is \
        type(held)
    for element in (("u", value), ("u", [value, held]), ("u", {value})):
        _, counts = item_counts(element)
        assert list(counts) == [held] and type(next(iter(counts))) is type(held)


@pytest.mark.parametrize("element,message", [
    (("u", ["ok", ""]), r"^item 1 of a \(user_id, items\) record \(field 1\) is empty$"),
    (("u", ["ok", 2.5]), r"^item 1 of .* must be str or bytes, got a float$"),
    (("u", {"ok", None}), r"^an item of .* must be str or bytes, got a NoneType$"),
    (("u", ({"a"},)), r"^item 0 of .* got a set$"),
    (("u", (t for t in ["ok", 3])), r"^item 1 of a \(user_id, items\) record .* got an int$"),
    (("u", {"a": 1}), r"got a dict; give the items as a list"),
    (("u", 4), r"^field 1 must be an item \(str or bytes\) or a list, tuple, set or array"),
    # A 0-d array is refused: one of a string would be split into characters, one of
    # an int escape as a bare TypeError.
    (("u", np.array("hello")), r"^field 1 must be a 1-D array of items, got a 0-D array$"),
    (("u", np.array(5)), r"^field 1 must be a 1-D array of items, got a 0-D array$"),
    (("u", np.array([["a"]])), r"^field 1 must be a 1-D array of items, got a 2-D array$"),
    (((), ["a"]), r"user id \(field 0\) of a \(user_id, items\) record"),
    ("u", r"^expected a \(user_id, item\) pair or \(user_id, items\) record, got a str$"),
])
def test_item_counts_names_the_problem_never_the_value(element, message):
    with pytest.raises(InvalidRecordError, match=message):
        item_counts(element)


# "a\udc80b" is what errors="surrogateescape" decoding gives for an invalid byte: UTF-8,
# which every writer uses, cannot hold it, so it is refused before anything is noised
# (it used to pass selection and fail both writers after the release).
SURROGATE = "a\udc80b"
LONE_SURROGATE = r"holds a lone surrogate \(not UTF-8; decode the input strictly"
RECORD = r"a \(user_id, items\) record \(field 1\) "


@pytest.mark.parametrize("check, element, where", [
    (item_counts, ("u", ["ok", "é", SURROGATE]), r"^item 2 of " + RECORD),
    (item_counts, ("u", ("ok", SURROGATE)), r"^item 1 of " + RECORD),
    (item_counts, ("u", {SURROGATE}), r"^an item of " + RECORD),
    (item_counts, ("u", SURROGATE), r"^item \(field 1\) of a \(user_id, item\) record "),
    (check_pair, ("u", SURROGATE), r"^item \(field 1\) of a \(user_id, item\) record "),
    (element_item_counts, ["ok", SURROGATE], r"^item 1 of an element "),
    (element_distinct_items, ["ok", SURROGATE], r"^item 1 of an element "),
    (element_distinct_items, Tokens(["ok", SURROGATE]), r"^item 1 of an element "),
])
def test_items_with_lone_surrogates_are_refused_naming_field_and_position(check, element,
                                                                          where):
    with pytest.raises(InvalidRecordError, match=where + LONE_SURROGATE) as raised:
        check(element)
    assert "\udc80" not in str(raised.value)  # the item's text is never echoed


def test_items_that_utf8_holds_pass_the_surrogate_check():
    assert item_counts(("u", ["é", "😀", "ok"]))[1] == {"é": 1, "😀": 1, "ok": 1}
    assert check_pair(("u", "naïve")) == ("u", "naïve")
    assert element_distinct_items(Tokens(["é", "ok"])) == {"é", "ok"}


USERS = ["u1", "u2", 3]
ITEMS = ["a", "b", "c", "d", "e"]
MAX_PAIRS = 40
ORDER_BYTES = 20  # 2^160 > 40!: every order of ≤ 40 elements


@st.composite
def split_occurrences(draw):
    """A few users' item occurrences, the same occurrences as a random mix of pairs
    and records of any size, shuffled, and each element's bundle (0..2).

    Case space: 1..40 (user, item) pairs of users u1, u2, 3 and items a..e;
    each user's items cut into consecutive parts of any sizes, a part of one
    item a pair or a record, a record a list or a tuple; the elements in any
    order. All of it decoded from one blob (tests/support/byte_cases.py): one
    byte per pair, two per part, one per element's bundle and 20 for the
    order. Zero bytes: every pair (u1, a), each item its own list record, in
    order, all in bundle 0.
    """
    n = draw(st.integers(1, MAX_PAIRS))
    data = draw(blob(4 * MAX_PAIRS + ORDER_BYTES))
    pairs = [(USERS[b % 3], ITEMS[b // 3 % 5]) for b in data[:n]]
    by_user: dict = {}
    for user, item in pairs:
        by_user.setdefault(user, []).append(item)
    cuts = iter(zip(data[MAX_PAIRS:3 * MAX_PAIRS:2], data[MAX_PAIRS + 1:3 * MAX_PAIRS:2]))
    elements = []
    for user, items in by_user.items():
        while items:
            cut, form = next(cuts)  # at most one part per pair
            size = 1 + cut % len(items)
            part, items = items[:size], items[size:]
            as_pair = size == 1 and form % 2 == 1
            elements.append((user, part[0]) if as_pair else
                            (user, (list, tuple)[form // 2 % 2](part)))
    rank = int.from_bytes(data[-ORDER_BYTES:], "little")
    bundles = [b % 3 for b in data[3 * MAX_PAIRS:3 * MAX_PAIRS + len(elements)]]
    return pairs, nth_permutation(elements, rank), bundles


@settings(max_examples=examples(300), deadline=None)
@given(split_occurrences())
def test_any_split_into_pairs_and_records_merges_to_the_same_counts(case):
    # Bundles are random groups of elements, merged the way a runner does:
    # add_input within a bundle, merge_accumulators across bundles.
    pairs, elements, bundles = case
    fn = _MergeItemCountsFn()
    per_user: dict = {}
    for (user, counts), bundle in zip(map(item_counts, elements), bundles, strict=True):
        accs = per_user.setdefault(user, [fn.create_accumulator() for _ in range(3)])
        accs[bundle] = fn.add_input(accs[bundle], counts)
    merged = {u: fn.extract_output(fn.merge_accumulators(accs)) for u, accs in per_user.items()}
    expected: dict = {}
    for user, item in pairs:
        expected.setdefault(canonical_user_id(user), Counter())[item] += 1
    assert merged == {u: dict(c) for u, c in expected.items()}


# --- Beam: every case below in one pipeline ----------------------------------------------
#
# Each test's pipeline is a builder (``_build_*``, next to its test) returning its
# PCollections; the module fixture ``beam_cases`` applies every builder to ONE
# TestPipeline (a TestPipeline each cost seconds) and each test asserts on the lists
# read back from its own case (tests/support/one_pipeline.py).


@pytest.fixture(scope="module")
def beam_cases(tmp_path_factory):
    """{case: the list of its PCollection's elements, or {part: list}}, every ``_BUILDERS``
    case."""
    def build(p):
        return {case: builder(p, case) for case, builder in _BUILDERS.items()}

    return run_cases(tmp_path_factory.mktemp("bounding"), build)


# --- Beam: one user is bounded once, whatever the split -----------------------------------

SPLIT_USER = [("alice", [f"w{r}.{i}" for i in range(10)]) for r in range(3)] + [
    ("alice", "w0.0"), ("bob", ["x", "x"]), ("bob", "y")]


def _build_split_user(p, case):
    # 3 records of 10 distinct items (and a pair) for one user: Δ0 = 5 in all, not per record.
    created = p | f"Create {case}" >> beam.Create(SPLIT_USER)
    return {"counts": created | f"Counts {case}" >> ItemCountsPerUser(),
            "sampled": created | f"Sample {case}" >> SampleItemsPerUser(5),
            "bounded": created | f"Bound {case}" >> BoundContributions(5)}


def test_a_user_split_over_many_records_is_bounded_once(beam_cases):
    out = beam_cases["split user"]
    expected_counts = {**{f"w{r}.{i}": 1 for r in range(3) for i in range(10)}, "w0.0": 2}
    assert sorted(out["counts"]) == [("alice", expected_counts), ("bob", {"x": 2, "y": 1})]

    def check(records, name):
        by_user = dict(records)
        assert len(records) == 2, f"a user came out in more than one record ({name})"
        assert len(by_user["alice"]) == 5 == len(set(by_user["alice"])), name
        assert set(by_user["alice"]) <= set(expected_counts), name
        assert sorted(by_user["bob"]) == ["x", "y"], name

    check(out["sampled"], "SampledOnce")
    check(out["bounded"], "BoundedOnce")


ONE_ID = [(5, "a"), ("5", "b"), (b"5", ["c"]), (np.int64(5), "d"), ("u1", "x"),
          (b"u1", ["y"]), (("g", 1), "z"), (("g", "1"), "z")]


def _build_one_id(p, case):
    # 5, "5", b"5" and numpy.int64(5) are one person (as are "u1" and b"u1"): keyed
    # apart, each spelling was a user of its own, bounded and counted on its own (a
    # pre-threshold of k passed with fewer than k people).
    created = p | f"Create {case}" >> beam.Create(ONE_ID)
    return {"counts": created | f"Counts {case}" >> ItemCountsPerUser(),
            "bounded": created | f"Bound {case}" >> BoundContributions(1, seed=3)}


def test_one_id_spelt_as_int_str_or_bytes_is_one_user_bounded_once(beam_cases):
    out = beam_cases["one id"]
    assert sorted(out["counts"], key=repr) == sorted(
        [("5", {"a": 1, "b": 1, "c": 1, "d": 1}), ("u1", {"x": 1, "y": 1}),
         (("g", "1"), {"z": 2})], key=repr), "OneRecordPerPerson"
    assert sorted([(r[0], len(r[1])) for r in out["bounded"]], key=repr) == sorted(
        [("5", 1), ("u1", 1), (("g", "1"), 1)], key=repr), "BoundedOnce"
    # The keyed-hash order of users (the sequential policies') is on the canonical id:
    # neighbouring datasets that spell a common user differently order it the same.
    key = run_order_key(3)
    assert len({user_order_key(item_counts((u, "a"))[0], key) for u in (5, "5", b"5")}) == 1


def dataset():
    """60 users with overlapping vocabularies (some above Δ0), as (user, item) pairs."""
    rng = random.Random(5)
    pairs = []
    for u in range(60):
        for _ in range(3 + u % 9):
            pairs.append((f"u{u}", f"w{min(int(rng.paretovariate(0.8)), 40)}"))
    return pairs


def as_records(pairs, parts: int):
    """The pairs as per-user records, each user split into up to ``parts`` records, shuffled."""
    by_user: dict = {}
    for user, item in pairs:
        by_user.setdefault(user, []).append(item)
    records = [(user, items[i::parts]) for user, items in by_user.items() for i in range(parts)
               if items[i::parts]]
    random.Random(parts).shuffle(records)
    return records


def _build_seeded_selection(p, case):
    # Each branch is its own SelectItems with one seed: draws are derived from
    # (seed, user or item), so only a difference in bounding could tell the
    # branches apart (e.g. a user bounded once per record).
    pairs = dataset()
    records = as_records(pairs, 1)
    mixed = as_records(pairs, 3)[::2] + [(u, i) for r in as_records(pairs, 3)[1::2] for u, i in
                                         [(r[0], item) for item in r[1]]]
    created = {label: p | f"Create{label} {case}" >> beam.Create(elements)
               for label, elements in [("pairs", pairs), ("records", records),
                                       ("mixed", mixed)]}
    outputs = {}
    for name in sorted(MECHANISMS):
        mechanism = mechanism_from_name(name, max_items_per_user=4)
        budget = Budget(4.0, 1e-3) if name != "sips" else ZCDPBudget(2.0, 1e-3)
        for label, elements in created.items():
            outputs[name, label] = elements | f"Select{label} {name}" >> SelectItems(
                mechanism, budget, seed=3)
    return outputs


def test_seeded_selection_is_the_same_for_pairs_records_and_mixed_input(beam_cases):
    # Every mechanism on the three forms of one input; each check names its own.
    out = beam_cases["seeded selection"]
    for name in sorted(MECHANISMS):
        from_pairs, from_records, from_mixed = (out[name, label]
                                                for label in ("pairs", "records", "mixed"))
        assert sorted(from_pairs) == sorted(from_records) == sorted(from_mixed), name
        assert len(from_pairs) == len(set(from_pairs)), name
        # Every mechanism releases some of these items at this budget (7 to
        # 14 of them with this seed), so equal outputs are not empty ones.
        assert from_pairs, name


# --- Beam: neighbours given as records ---------------------------------------------------

X_ITEMS = ["w1", "w2", "w3", "xonly1", "xonly2", "xonly3", "xonly4", "xonly5"]
NEIGHBOUR_MECHANISMS = [(mechanisms.WeightedGaussian(4), 2), (mechanisms.WeightedLaplace(4), 1)]


def _build_extra_user(p, case):
    # D and D ∪ {x}, x split over three records among the others. Seeded
    # sampling is derived from (seed, user), so common users sample alike and
    # the histograms differ by x's contribution alone.
    base = as_records(dataset(), 2)
    extra = [("x", X_ITEMS[0:3]), ("x", X_ITEMS[3:6]), ("x", X_ITEMS[6:])]
    neighbour = base[:5] + [extra[0]] + base[5:20] + [extra[1]] + base[20:] + [extra[2]]
    bounded = {label: (p | f"Create{label} {case}" >> beam.Create(elements)
                       | f"Bound{label} {case}" >> BoundContributions(4, seed=9))
               for label, elements in [("D", base), ("D+x", neighbour)]}
    return {(mechanism.name, label): records | f"Histogram{label} {mechanism.name}" >> (
                WeightedHistogram(mechanism.item_weight, max_partial_keys=3))
            for mechanism, _ in NEIGHBOUR_MECHANISMS for label, records in bounded.items()}


def test_an_extra_user_in_several_records_moves_keys_and_weights_within_the_bound(beam_cases):
    # ‖H − H'‖ ≤ 1 in the mechanism's norm, and the new keys are x's items, at
    # most Δ0 of them. Both mechanisms in one pipeline, each check naming its own.
    out = beam_cases["extra user"]
    for mechanism, norm in NEIGHBOUR_MECHANISMS:
        name = mechanism.name
        h, h_prime = (dict(out[name, label]) for label in ("D", "D+x"))
        new_keys = set(h_prime) - set(h)
        assert new_keys <= set(X_ITEMS) and len(new_keys) <= 4, name
        assert set(h) <= set(h_prime), name
        distance = histograms.histogram_distance(h, h_prime, norm)
        assert distance <= 1.0 + 1e-9, name
        assert distance > 0.5, name  # x did contribute: one user of ≤ 4 items moves it by 1


# --- Beam: the partial histograms and the batched noise ------------------------------------

FLUSH_USERS = [u for u in [(f"u{u}", tuple(f"w{(u * k) % 23}" for k in range(1, 1 + u % 7)))
                           for u in range(80)] if u[1]]
FLUSH_SIZES = (1, 5, 1 << 18)


def _build_flushing(p, case):
    created = p | f"Create {case}" >> beam.Create(FLUSH_USERS)  # every flush size in one
    return {max_keys: created | f"Histogram {max_keys}" >> WeightedHistogram(
                policies.weighted_gaussian_weight, max_partial_keys=max_keys)
            for max_keys in FLUSH_SIZES}


def test_flushing_partial_histograms_early_gives_the_same_sums(beam_cases):
    expected = histograms.weighted_histogram([items for _, items in FLUSH_USERS],
                                           policies.weighted_gaussian_weight)
    for max_keys in FLUSH_SIZES:
        pairs = beam_cases["flushing"][max_keys]
        got = dict(pairs)
        assert len(got) == len(pairs), f"an item was emitted twice ({max_keys})"
        assert set(got) == set(expected), max_keys
        assert all(math.isclose(got[k], expected[k], abs_tol=1e-9) for k in got), max_keys


def _certain_calibration(threshold):
    """σ = 1e-6 against a margin of 50 (or 0.5): a wrong decision by chance has
    probability below 1e-300 (never, in practice)."""
    return Calibration(noise=GAUSSIAN, noise_scale=1e-6, release_threshold=threshold,
                       threshold_delta=1e-6, sensitivity_norm=2, sensitivity=1.0,
                       budget=Budget(1.0, 1e-6), source="test")


BATCHED_HISTOGRAM = [(f"i{j}", 100.0 if j % 3 else 0.0) for j in range(2 * NOISE_BATCH + 123)]


def _build_batched_noise(p, case):
    return (p | f"Create {case}" >> beam.Create(BATCHED_HISTOGRAM)
            | f"Noise {case}" >> NoisyThreshold(_certain_calibration(50.0)))


def test_batched_noise_decides_every_item_once_across_batches(beam_cases):
    # More items than one batch, so decisions happen both in process() and
    # at the end of the bundle. σ = 1e-6 against a margin of 50: a wrong
    # decision by chance has probability below 1e-300 (never, in practice).
    expected = [item for item, w in BATCHED_HISTOGRAM if w > 50]
    assert sorted(beam_cases["batched noise"]) == sorted(expected)


def test_items_go_to_a_stable_shard():
    # CRC-32 of the item's bytes: the same in every process (golden values),
    # str as UTF-8 (lone surrogates too), so a str and its bytes share a shard.
    assert shard_of_item("the", 64) == zlib.crc32(b"the") % 64 == 38
    assert shard_of_item(b"the", 64) == shard_of_item("the", 64)
    assert shard_of_item("caf\u00e9", 1000) == zlib.crc32("café".encode()) % 1000
    assert 0 <= shard_of_item("\ud800", 64) < 64
    histogram = {f"i{k}": float(k) for k in range(500)}
    parts = split_by_shard(histogram, 7)
    assert sorted(parts) == list(range(7))
    assert {k: w for part in parts.values() for k, w in part.items()} == histogram
    assert all(shard_of_item(k, 7) == s for s, part in parts.items() for k in part)


def test_merging_shard_histograms_sums_per_item():
    first, second = {"a": 1.0, "b": 2.0}, {"b": 0.5, "c": 4.0}
    shard, merged = merge_histograms((7, iter([first, {}, second, {"c": 1.0, "d": 1.0}])))
    assert shard == 7 and merged == {"a": 1.0, "b": 2.5, "c": 5.0, "d": 1.0}
    assert first == {"a": 1.0, "b": 2.0} and second == {"b": 0.5, "c": 4.0}  # unchanged
    assert merge_histograms((0, [])) == (0, {})


SHARDED_HISTOGRAM = {f"i{j}": 100.0 if j % 3 else 0.0 for j in range(3 * NOISE_BATCH)}


def _build_per_shard_noise(p, case):
    shards = list(split_by_shard(SHARDED_HISTOGRAM, 2).items()) + [(5, {"lone": 100.0})]
    created = p | f"Create {case}" >> beam.Create(shards)  # unseeded and seeded
    return {f"seed={seed}": created | f"Noise seed={seed}" >> NoisyThreshold.per_shard(
                _certain_calibration(50.0), seed)
            for seed in (None, 3)}


def test_per_shard_noise_decides_every_item_once(beam_cases):
    # A shard larger than a noise batch and several shards: each item decided
    # once, whole shards at a time. σ = 1e-6 against a margin of 50: a wrong
    # decision by chance has probability below 1e-300 (never, in practice).
    expected = sorted([k for k, w in SHARDED_HISTOGRAM.items() if w > 50] + ["lone"])
    for seed in (None, 3):
        assert sorted(beam_cases["per-shard noise"][f"seed={seed}"]) == expected, seed


def _sure_counts(n):
    """n items, every other one held by enough users to be kept surely, the rest by none."""
    calibration = mechanisms.TruncatedGeometric(2).calibrate(Budget(1.0, 1e-5))
    sure = int(math.ceil(calibration.users_kept_surely))
    return calibration, [(f"i{j}", sure if j % 2 else 0) for j in range(n)]


def _build_per_shard_keep(p, case):
    calibration, counts = _sure_counts(NOISE_BATCH + 77)
    return (p | f"Create {case}" >> beam.Create(list(split_by_shard(dict(counts), 3).items()))
            | f"KeepWithProbability {case}" >> KeepWithProbability.per_shard(calibration))


def test_per_shard_keep_with_probability_keeps_certain_items_and_drops_impossible_ones(
        beam_cases):
    _, counts = _sure_counts(NOISE_BATCH + 77)
    assert sorted(beam_cases["per-shard keep"]) == sorted(item for item, c in counts if c)


def _build_batched_keep(p, case):
    calibration, counts = _sure_counts(NOISE_BATCH + 77)
    return (p | f"Create {case}" >> beam.Create(counts)
            | f"KeepWithProbability {case}" >> KeepWithProbability(calibration))


def test_batched_keep_with_probability_keeps_certain_items_and_drops_impossible_ones(
        beam_cases):
    # π(0) = 0 and π(count ≥ users_kept_surely) = 1: no chance involved.
    _, counts = _sure_counts(NOISE_BATCH + 77)
    assert sorted(beam_cases["batched keep"]) == sorted(item for item, c in counts if c)


class _Timestamp(beam.DoFn):
    def process(self, item, timestamp=beam.DoFn.TimestampParam):
        yield timestamp.micros // 1000  # runners carry timestamps in milliseconds


def _build_timestamps(p, case):
    # Items decided in process() (a full batch) must not keep the input's timestamp
    # while the rest (finish_bundle) get another: how many fall in each depends on
    # the histogram's support, not on the released set.
    users = [(f"u{j}", (f"i{j}",)) for j in range(NOISE_BATCH + 10)]
    return (p | f"Create {case}" >> beam.Create(users)
            | f"Histogram {case}" >> WeightedHistogram(policies.weighted_gaussian_weight,
                                                       max_partial_keys=7)
            | f"Noise {case}" >> NoisyThreshold(_certain_calibration(0.5))
            | f"Timestamp {case}" >> beam.ParDo(_Timestamp())
            | f"Distinct {case}" >> beam.Distinct())


def test_released_items_share_one_timestamp_whatever_the_batch(beam_cases):
    assert beam_cases["timestamps"] == [GlobalWindow().max_timestamp().micros // 1000]


_BUILDERS = {"split user": _build_split_user, "one id": _build_one_id,
             "seeded selection": _build_seeded_selection, "extra user": _build_extra_user,
             "flushing": _build_flushing, "batched noise": _build_batched_noise,
             "per-shard noise": _build_per_shard_noise, "per-shard keep": _build_per_shard_keep,
             "batched keep": _build_batched_keep, "timestamps": _build_timestamps}


class _SameForAll(str):
    """A str subclass whose own ``__eq__``/``__hash__`` make every instance equal."""

    def __eq__(self, other):
        return isinstance(other, _SameForAll)

    def __hash__(self):
        return 0


class _LooksAscii(str):
    """A str subclass whose own ``isascii``/``__len__`` hide what it holds."""

    def isascii(self):
        return True

    def __len__(self):
        return 1


def test_items_are_checked_and_counted_as_the_plain_text_they_hold():
    # The checks and the counts read what an item holds (the text it is keyed by),
    # never a subclass's own methods: distinct items stay distinct, and a lone
    # surrogate or an empty text cannot pass the checks by overriding them.
    from beam_dpsu.beam.bounding import check_pair, item_counts
    _, counts = item_counts(("u1", [_SameForAll("a"), _SameForAll("b")]))
    assert sorted(counts) == ["a", "b"] and all(type(k) is str for k in counts)
    for bad in (_LooksAscii("a\udc80b"), _LooksAscii("")):
        with pytest.raises(InvalidRecordError):
            check_pair(("u1", bad))
        with pytest.raises(InvalidRecordError):
            item_counts(("u1", [bad, "ok"]))
