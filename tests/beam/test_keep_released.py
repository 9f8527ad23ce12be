"""KeepReleased: records restricted to a released set, by side input or by join."""

import enum
import itertools
import re

import apache_beam as beam
import numpy as np
import pytest
from tests.support.runner import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from apache_beam.transforms import window

from beam_dpsu import (InvalidRecordError, KeepReleased, NonGlobalWindowError, SelectItems,
                       WeightedGaussian, ZCDPBudget)
from beam_dpsu.core.checks import ParameterError
from beam_dpsu.beam.bounding import check_pair
from beam_dpsu.keep_released import (_KeepBySideInputFn, _item_key, _keyed_record,
                                      _released_as_key)
from tests.support.text_subclasses import EXAMPLES

pytestmark = pytest.mark.pipeline

METHODS = ("side_input", "join")

class _Level(enum.IntEnum):
    HIGH = 3


# (name, records, released, key, expected kept records)
CASES = [
    # Records with duplicate keys all pass (or all drop); a released item repeated
    # in the release still passes each record once.
    ("duplicate_keys", [("a", 1), ("a", 2), ("b", 3), ("c", 4), ("a", 2)],
     ["a", "c", "zz", "a"], lambda r: r[0], [("a", 1), ("a", 2), ("c", 4), ("a", 2)]),
    ("empty_release", [("a", 1), ("b", 2)], [], lambda r: r[0], []),
    ("int_keys", [{"id": 1}, {"id": 2}, {"id": 3}], [3, 1], lambda r: r["id"],
     [{"id": 1}, {"id": 3}]),
    # n-grams as ExtractNgrams releases them (tuples of str).
    ("ngram_keys", [(("new", "york"), 5), (("york", "new"), 6), (("new",), 7)],
     [("new", "york"), ("new",)], lambda r: r[0], [(("new", "york"), 5), (("new",), 7)]),
    ("bytes_keys", [(b"x", 1), (b"y", 2), ("x", 3)], [b"x"], lambda r: r[0], [(b"x", 1)]),
    # numpy scalars equal their Python values, by either method.
    ("numpy_keys", [(np.str_("a"), 1), (np.int64(4), 2), ("b", 3)], ["a", 4],
     lambda r: r[0], [(np.str_("a"), 1), (np.int64(4), 2)]),
    # An IntEnum and numpy ints are the ints they equal, and bytes are never str.
    ("int_and_bytes_kinds", [(_Level.HIGH, 1), (np.int64(3), 2), (3, 3), ("a", 4), (b"a", 5)],
     [np.int64(3), b"a"], lambda r: r[0],
     [(_Level.HIGH, 1), (np.int64(3), 2), (3, 3), (b"a", 5)]),
    # Without a key the record is its own item.
    ("no_key", ["a", "b", "a", "c"], ["a", "c"], None, ["a", "a", "c"]),
]


def test_keep_released_keeps_exactly_the_records_whose_key_is_released():
    with TestPipeline() as p:
        for name, records, released, key, expected in CASES:
            recs = p | f"Records {name}" >> beam.Create(records)
            rel = p | f"Released {name}" >> beam.Create(released)
            for method in METHODS:
                kept = recs | f"Keep {name} {method}" >> KeepReleased(rel, key=key,
                                                                     method=method)
                assert_that(kept, equal_to(expected), label=f"Check {name} {method}")
        # A release straight from SelectItems (its output means a set).
        pairs = p | "Pairs" >> beam.Create([(f"u{i}", w) for i in range(200)
                                            for w in ("cat", "dog")] + [("loner", "secret")])
        words = pairs | SelectItems(WeightedGaussian(max_items_per_user=2),
                                    ZCDPBudget(1.0, 1e-6), seed=3)
        rows = p | "Rows" >> beam.Create([{"word": "cat", "n": 1}, {"word": "secret", "n": 2},
                                          {"word": "dog", "n": 3}])
        for method in METHODS:
            assert_that(rows | f"KeepSelected {method}" >> KeepReleased(
                words, key=lambda row: row["word"], method=method),
                equal_to([{"word": "cat", "n": 1}, {"word": "dog", "n": 3}]),
                label=f"CheckSelected {method}")


def test_the_side_input_set_is_built_once_per_dofn_instance():
    # The released set is one value (global window): later bundles reuse the set
    # instead of reading and hashing the side input again.
    reads = []

    def released():
        reads.append(1)
        yield from ("a", "b")

    fn = _KeepBySideInputFn(lambda record: record)
    fn.setup()
    assert [list(fn.process(r, released())) for r in ("a", "c", "b")] == [["a"], [], ["b"]]
    assert len(reads) == 1


# Keys both methods accept, as they match: the side input compares with ``==``, the
# join compares the keys' encoded bytes, so the two agree exactly when equal keys
# encode equally. numpy's and IntEnum's ints and numpy's str are the plain values.
GOOD_KEYS = ["a", np.str_("a"), b"a", np.bytes_(b"a"), "é", 3, np.int64(3), _Level.HIGH,
             -1, 2 ** 70, ("a", 3), ("a", np.int64(3)), (b"a", ("a",)), (), ("a",)]

# Keys neither method accepts (the join could not encode some; others equal an
# accepted key in Python but not once encoded: 1.0 and True are 1 to the side input
# only). Each with the type its error names.
BAD_KEYS = [
    (1.0, "a float"), (True, "a bool"), (np.bool_(True), "a bool"), (np.float64(1), "a float64"),
    (None, "a NoneType"), (frozenset({"secret"}), "a frozenset"), (["secret"], "a list"),
    ({"secret": 1}, "a dict"), (("secret", 1.5), "a tuple holding a float"),
    (("secret", ("deep", True)), "a tuple holding a bool"),
    ("secret\ud800", "a str that is not UTF-8 (a lone surrogate)"),
]


def _encoded(value):
    return beam.coders.FastPrimitivesCoder().as_deterministic_coder("KeepReleased").encode(value)


def test_accepted_keys_match_by_equality_as_by_their_encoding():
    keys = [_item_key(value, "key(record)") for value in GOOD_KEYS]
    for key in keys:
        assert type(key) in (str, bytes, int, tuple)
    for a, b in itertools.product(keys, repeat=2):
        assert (a == b) == (_encoded(a) == _encoded(b)), (a, b)


@pytest.mark.parametrize("value,held", EXAMPLES)
def test_a_key_of_a_subclass_is_what_it_holds_as_bounding_keys_the_item(value, held):
    # Not its own __str__ / __bytes__: a released item kept by KeepReleased is the
    # item SelectItems counted, keyed as bounding keys it.
    for key in (_item_key(value, "key(record)"), _item_key((value, 1), "key(record)")[0],
                _released_as_key(value)[0]):
        assert key == held and type(key) is type(held)
    assert _item_key(value, "key(record)") == check_pair(("u", value))[1]


@pytest.mark.parametrize("value, named", BAD_KEYS, ids=[n for _, n in BAD_KEYS])
def test_both_methods_refuse_a_key_or_item_of_another_type_naming_the_type(value, named):
    wanted = re.escape(f"must be a str, bytes, int (not a bool) or tuple of these, got {named}")
    fn = _KeepBySideInputFn(lambda record: record[0])
    fn.setup()
    # The side input's set, the record's key; the join's keying of the same two.
    with pytest.raises(InvalidRecordError, match=r"KeepReleased: a released item " + wanted):
        list(fn.process(("a", 1), [value]))
    fn.setup()
    with pytest.raises(InvalidRecordError, match=r"KeepReleased: key\(record\) " + wanted):
        list(fn.process((value, 1), ["a"]))
    with pytest.raises(InvalidRecordError, match=r"KeepReleased: a released item " + wanted) \
            as info:
        _released_as_key(value)
    assert "secret" not in str(info.value)
    with pytest.raises(InvalidRecordError, match=r"KeepReleased: key\(record\) " + wanted) \
            as info:
        _keyed_record((value, "secret-user"), lambda record: record[0])
    assert "secret" not in str(info.value)


@pytest.mark.parametrize("method", METHODS)
def test_an_unencodable_key_fails_naming_its_type_not_its_value(method):
    # A frozenset is hashable: the side input once kept it, and the join's coder
    # failed with a message that printed it.
    with pytest.raises(Exception, match=r"KeepReleased: key\(record\) must be a str, bytes, "
                                        r"int \(not a bool\) or tuple of these, got a "
                                        r"frozenset") as info:
        with TestPipeline() as p:
            rel = p | "Released" >> beam.Create(["secret-item"])
            _ = (p | beam.Create([(frozenset({"secret-item"}), "secret-user")])
                 | KeepReleased(rel, key=lambda r: r[0], method=method))
    assert "secret" not in str(info.value)
    assert isinstance(info.value, InvalidRecordError) or "InvalidRecordError" in str(info.value)


def test_bad_arguments_are_refused_when_built():
    p = TestPipeline()
    records = p | "Records" >> beam.Create(["a"])
    released = p | "Released" >> beam.Create(["a"])
    with pytest.raises(TypeError, match="released must be the PCollection of released items, "
                                        "got a list"):
        KeepReleased(["a"])
    with pytest.raises(ParameterError, match="method must be 'side_input' or 'join', got 'sql'"):
        KeepReleased(released, method="sql")
    with pytest.raises(TypeError, match="key must be a function record -> item, got a str"):
        KeepReleased(released, key="word")
    # The method's name is read as mechanism names are: case and spaces ignored.
    spelled = records | "KeepJoinSpelled" >> KeepReleased(released, method=" Join ")
    assert spelled.producer.full_label == "KeepJoinSpelled/KeepJoined"
    with pytest.raises(TypeError, match="positional"):
        KeepReleased(released, lambda r: r)  # key is keyword-only
    typed = p | "Typed" >> beam.Create([("a", 1)]).with_output_types(tuple[str, int])
    for method in METHODS:  # the kept records keep their type
        kept = typed | f"KeepTyped {method}" >> KeepReleased(released, key=lambda r: r[0],
                                                             method=method)
        assert kept.element_type == typed.element_type
    other = TestPipeline() | "Elsewhere" >> beam.Create(["a"])
    with pytest.raises(ParameterError, match="released is a PCollection of another pipeline"):
        _ = records | "FromElsewhere" >> KeepReleased(other)
    windowed = records | "Window" >> beam.WindowInto(window.FixedWindows(10))
    with pytest.raises(NonGlobalWindowError, match=r"KeepReleased \(its records\) needs its "
                                                   "input in the global window"):
        _ = windowed | "WindowedRecords" >> KeepReleased(released)
    windowed_release = released | "WindowRelease" >> beam.WindowInto(window.FixedWindows(10))
    with pytest.raises(NonGlobalWindowError, match=r"KeepReleased \(its released items\)"):
        _ = records | "WindowedRelease" >> KeepReleased(windowed_release)
