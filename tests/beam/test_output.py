"""Only the released set leaves (docs/privacy.md, invariant 6): output files depend on the
set alone.

Written in the order the runner produces them, released items would give the
input away: a pairs file in user order comes back in user order, a sequential
policy emits one user's items as a block, and DPNE's spurious k-grams come
back sorted, one block after the held ones, labelling every one of them.
``WriteReleased`` writes sorted lines in hash-chosen shards, so the same
seeded run on the same records in another order, split differently, writes
byte-identical files.
"""

import glob
import os
import random
import re

import apache_beam as beam
import pytest
from tests.support.runner import TestPipeline

from beam_dpsu import Budget, InvalidRecordError, SelectItems, ZCDPBudget

from beam_dpsu.core import mechanisms
from beam_dpsu.extract_ngrams import ExtractNgrams
from beam_dpsu.beam.output import WriteReleased, format_released, release_order, shard_path
from tests.support.hypothesis_profiles import examples

pytestmark = pytest.mark.pipeline


def read_files(prefix):
    out = {}
    for path in sorted(glob.glob(prefix + "*")):
        with open(path, "rb") as f:
            out[os.path.basename(path)] = f.read()
    return out


def write(elements, prefix, **kwargs):
    with TestPipeline() as p:
        _ = p | beam.Create(elements) | WriteReleased(prefix, **kwargs)
    return read_files(prefix)


# The writes most tests below check, built in ONE pipeline (module fixture ``written``;
# a TestPipeline per test cost a run each): each case writes under its own folder,
# each test reads its own case's files. Writes that must fail run their own.

SORTED = [
    ([f"w{i}" for i in range(50)] + ["z\nnewline"], "z\\nnewline"),
    ([f"w{i}".encode() for i in range(50)] + [b"raw\xff"], "raw\\xff"),
]


def corpus():
    rng = random.Random(3)
    vocab = [f"w{i}" for i in range(40)]
    return [(f"user{u}", vocab[min(int(rng.paretovariate(1.0)), 39)])
            for u in range(300) for _ in range(rng.randint(1, 8))]


def documents():
    rng = random.Random(5)
    vocab = [f"t{i}" for i in range(12)]
    return [(f"user{u}", tuple(rng.choice(vocab[:3 + u % 9]) for _ in range(rng.randint(2, 6))))
            for u in range(400)]


PERMUTED = [
    ("weighted-gaussian", lambda: SelectItems(mechanisms.WeightedGaussian(3),
                                              ZCDPBudget(0.5, 1e-3), seed=11), corpus),
    ("sips", lambda: SelectItems(mechanisms.SIPS(3), ZCDPBudget(0.5, 1e-3), seed=11), corpus),
    ("policy-gaussian", lambda: SelectItems(mechanisms.PolicyGaussian(3), ZCDPBudget(0.5, 1e-3),
                                            seed=11), corpus),
    ("dpne", lambda: ExtractNgrams(3, ZCDPBudget(1.0, 1e-3), max_items_per_user=4, eta=0.5,
                                   seed=11), documents),
]


def _write_release(p, transform_factory, elements, prefix, splits, label):
    """The seeded transform on ``elements`` given as ``splits`` Create()s, flattened."""
    chunks = [elements[i::splits] for i in range(splits)]
    parts = [p | f"{label} Part{i}" >> beam.Create(chunk) for i, chunk in enumerate(chunks)]
    released = (parts | f"{label} Flatten" >> beam.Flatten()
                | f"{label} Release" >> transform_factory())
    _ = released | f"{label} Write" >> WriteReleased(prefix, num_shards=2)


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    """The folder under which each case below wrote (``folder / case / ...``)."""
    folder = tmp_path_factory.mktemp("written")

    def prefix(case, name):
        return str(folder / case / name)

    def write_case(p, case, elements, name, **kwargs):
        _ = (p | f"Create {case}" >> beam.Create(elements)
             | f"Write {case}" >> WriteReleased(prefix(case, name), **kwargs))

    with TestPipeline() as p:
        for items, escaped in SORTED:
            write_case(p, f"sorted {escaped}", items, "items", num_shards=4)
        _ = (p | "Create empty" >> beam.Create(["a"]) | beam.Filter(lambda _: False)
             | "Write empty" >> WriteReleased(prefix("empty", "items"), num_shards=2))
        write_case(p, "shard a", [f"w{i}" for i in range(30)], "items", num_shards=3)
        write_case(p, "shard b", [f"w{i}" for i in range(0, 30, 2)], "items", num_shards=3)
        write_case(p, "pairs", [("b", 2), ("a", 5), ("c", 0)], "counts",
                   file_name_suffix=".tsv", sort_key=lambda kv: kv[0],
                   format_line=lambda kv: f"{kv[0]}\t{kv[1]}")
        for name, factory, data in PERMUTED:
            elements = data()
            shuffled = list(elements)
            random.Random(1).shuffle(shuffled)
            _write_release(p, factory, elements, prefix(f"permuted {name}", "a/items"),
                           splits=1, label=f"{name} a")
            _write_release(p, factory, shuffled, prefix(f"permuted {name}", "b/items"),
                           splits=3, label=f"{name} b")
        write_case(p, "no temporary files", ["a", "b"], "items", num_shards=2)
        write_case(p, "read ngrams", [("the", "c\u2028t"), ("a",)], "ngrams")
        write_case(p, "read raw", [b"\xff\x85", b"\xc2\x85"], "raw")
    return folder


@pytest.mark.parametrize("items,escaped", SORTED)
def test_lines_are_sorted_and_every_shard_is_written(written, items, escaped):
    folder = written / f"sorted {escaped}"
    files = read_files(str(folder / "items"))
    assert sorted(files) == [os.path.basename(shard_path(str(folder / "items"), i, 4, ".txt"))
                             for i in range(4)]
    item_of_line = {format_released(i): i for i in items}
    lines = []
    for content in files.values():
        shard_lines = content.decode("utf-8").splitlines()
        shard_items = [item_of_line[line] for line in shard_lines]
        assert shard_items == sorted(shard_items, key=release_order)
        lines += shard_lines
    assert sorted(lines) == sorted(format_released(i) for i in items)
    assert escaped in lines


@pytest.mark.parametrize("items,kwargs", [
    (["a", b"a"], {}),  # the same line twice
    ([f"w{i}" for i in range(40)] + [b"raw"], {"num_shards": 8}),  # in other shards
    ([("a", "b"), ("c", b"d")], {}),  # n-gram tokens
    ([("a", 1), (b"a", 2)], {"sort_key": lambda kv: kv[0],
                             "format_line": lambda kv: f"{kv[0]!r}"}),
    (["a", b"b"], {"format": "parquet"}),
])
def test_a_release_mixing_str_and_bytes_is_refused_before_any_file(tmp_path, items, kwargs):
    # "cat" and b"cat", both released, would be written as the same line. Which types
    # a set holds is a function of the set.
    with pytest.raises(ValueError, match=r"both str and bytes items.*one type per set"):
        write(items, str(tmp_path / "items"), **kwargs)
    assert not glob.glob(str(tmp_path / "items*"))


# An item no step label or message template contains, so that an error echoing it is
# caught (words such as "indicate" contain "cat").
ITEM = "okapi"


def _select_and_write_mixed_types(tmp_path):
    """50 users hold the str item, 50 others the bytes item with the same text; seeded,
    with a budget large enough that both clear the threshold if they are two items."""
    records = ([(f"s{i}", ITEM) for i in range(50)]
               + [(f"b{i}", ITEM.encode()) for i in range(50)])
    prefix = str(tmp_path / "items")
    with TestPipeline() as p:
        released = (p | beam.Create(records)
                    | SelectItems(mechanisms.WeightedGaussian(max_items_per_user=1),
                                  Budget(10, 1e-5), seed=1))
        _ = released | WriteReleased(prefix)
    return prefix


def test_a_selection_of_str_and_bytes_items_is_refused_before_any_file(tmp_path):
    # Released and written, the str and the bytes item would be one line twice in the
    # items file, and read_released would give [ITEM, ITEM].
    with pytest.raises((InvalidRecordError, ValueError)) as info:
        _select_and_write_mixed_types(tmp_path)
    message = str(info.value).split("[while running")[0]
    assert re.search(r"\bstr\b", message) and re.search(r"\bbytes\b", message), message
    assert ITEM not in message  # names the problem, never the item
    assert not any(name.startswith("items") for name in os.listdir(tmp_path))


def test_empty_release_writes_empty_shards(written):
    assert list(read_files(str(written / "empty" / "items")).values()) == [b"", b""]


def test_shard_of_an_item_does_not_depend_on_the_other_items(written):
    a = read_files(str(written / "shard a" / "items"))
    b = read_files(str(written / "shard b" / "items"))
    for name in a:
        even = [x for x in a[name].decode().splitlines() if int(x[1:]) % 2 == 0]
        assert even == b[name].decode().splitlines()


def test_pairs_sort_by_key_with_a_format(written):
    files = read_files(str(written / "pairs" / "counts"))
    assert list(files.values()) == [b"a\t5\nb\t2\nc\t0\n"]


def test_release_order_is_total_over_mixed_types():
    values = [("b", "a"), b"x", "y", ("a",), "a"]
    assert sorted(values, key=release_order) == ["a", "y", b"x", ("a",), ("b", "a")]


def test_num_shards_is_validated():
    with pytest.raises(ValueError, match="num_shards must be an int >= 1"):
        WriteReleased("x", num_shards=0)


# --- the same seeded release on permuted, re-split input → identical files ---------

@pytest.mark.parametrize("name,factory,data", PERMUTED)
def test_permuted_and_resplit_input_gives_identical_files(written, name, factory, data):
    # The fixture ran ``factory()`` on ``data()`` in one Create, and on it shuffled in
    # three (each seeded transform on its own branch: seeds are per transform).
    first = read_files(str(written / f"permuted {name}" / "a" / "items"))
    second = read_files(str(written / f"permuted {name}" / "b" / "items"))
    assert first == second
    assert sum(len(c) for c in first.values()) > 0, "nothing released: the test proves nothing"


def test_distinct_items_give_distinct_lines():
    # "a\nb" and "a\\nb", b"\xff" and b"\\xff" must not write the same line.
    items = ["a\nb", "a\\nb", "a\\b", "x\ud800"]
    lines = [format_released(i) for i in items]
    assert len(set(lines)) == len(lines)
    raw = [b"\xff", b"\\xff", b"a\nb", b"a\\nb"]
    assert len({format_released(i) for i in raw}) == len(raw)


def test_unorderable_items_are_refused():
    with pytest.raises(TypeError, match="released items must be str, bytes or tuples"):
        release_order(1.5)


def test_write_leaves_no_temporary_files(written):
    folder = written / "no temporary files"
    assert sorted(os.listdir(folder)) == ["items-00000-of-00002.txt", "items-00001-of-00002.txt"]


# --- lines are items: every line boundary str.splitlines() knows is escaped (invariant 6) ---
#
# Escaping \\, \n and \r only is not enough: an item holding \x0b, \x0c, \x1c-\x1e,
# \x85, \u2028 or \u2029 is one line for `for line in f` but several for
# str.splitlines(), and the counts TSV misaligns.

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from beam_dpsu.beam.output import (format_count_line, parse_count_line, read_counts,  # noqa: E402
                              read_released, unescape)

# Every character that breaks a str line somewhere, found by asking splitlines itself.
LINE_BREAKS = [chr(c) for c in range(0x110000) if len(f"a{chr(c)}b".splitlines()) > 1]

# Any code point, lone surrogates included (Beam's str coder refuses those, the
# formatting does not).
any_text = st.text(st.characters(codec=None, categories=None))


def test_splitlines_breaks_at_the_characters_named_above():
    assert set(LINE_BREAKS) == set("\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029")


@pytest.mark.parametrize("char", LINE_BREAKS + ["\t", "\\"], ids=lambda c: f"U+{ord(c):04X}")
def test_every_line_break_is_escaped_in_items_and_counts(char):
    item = f"a{char}b"
    for line in (format_released(item), format_count_line((item, 3)),
                 format_released(item.encode("utf-8"))):
        assert line.splitlines() == [line] and "\n" not in line
    assert unescape(format_released(item)) == item
    assert unescape(format_released(item.encode("utf-8")), as_bytes=True) == item.encode("utf-8")
    assert parse_count_line(format_count_line((item, 3))) == (item, 3)
    assert format_count_line((item, 3)).count("\t") == 1


def test_ordinary_items_are_written_as_before():
    # Byte-identical to the lines of earlier releases: only \\, \n and \r (and, in
    # the TSV, tab) were escaped there, and items without them are their own text.
    assert format_released("caf\u00e9 \x1f\x00 \u00a0") == "caf\u00e9 \x1f\x00 \u00a0"
    assert format_released("a\\b\nc\rd") == "a\\\\b\\nc\\rd"
    assert format_released(b"raw\xff\\\n") == "raw\\xff\\\\\\n"
    assert format_count_line(("a\tb", 7)) == "a\\tb\t7"
    assert format_released(("the", "cat")) == "the cat"


@settings(max_examples=examples(2000), deadline=None)
@given(any_text)
def test_any_str_item_round_trips_as_one_line(item):
    line = format_released(item)
    assert line.splitlines() in ([line], []) and "\n" not in line
    line.encode("utf-8")  # a line is always valid UTF-8: surrogates are escaped too
    assert unescape(line) == item
    assert parse_count_line(format_count_line((item, 5))) == (item, 5)


@settings(max_examples=examples(2000), deadline=None)
@given(st.binary())
def test_any_bytes_item_round_trips_as_one_line(item):
    line = format_released(item)
    assert line.splitlines() in ([line], []) and "\n" not in line
    assert unescape(line, as_bytes=True) == item
    assert parse_count_line(format_count_line((item, 5)), as_bytes=True) == (item, 5)


@settings(max_examples=examples(300), deadline=None)
@given(st.lists(any_text, unique=True), st.lists(st.binary(), unique=True))
def test_distinct_items_of_one_type_give_distinct_lines(texts, raws):
    assert len({format_released(t) for t in texts}) == len(texts)
    assert len({format_released(r) for r in raws}) == len(raws)


@pytest.mark.parametrize("line", ["a\\", "a\\q", "a\\u12", "\\x4"])
def test_unescape_refuses_what_format_released_never_writes(line):
    with pytest.raises(ValueError, match="not a line written by format_released"):
        unescape(line)


def test_a_raw_byte_escape_needs_as_bytes():
    with pytest.raises(ValueError, match="as_bytes=True"):
        unescape(format_released(b"\xff"))


def read_back(prefix):
    """The lines of every shard, split both ways; both must agree."""
    by_iteration, by_splitlines = [], []
    for path in sorted(glob.glob(prefix + "*")):
        with open(path, encoding="utf-8") as f:
            by_iteration += [line.rstrip("\n") for line in f]
        with open(path, encoding="utf-8") as f:
            by_splitlines += f.read().splitlines()
    assert by_iteration == by_splitlines
    return by_iteration


# Beam's str coder refuses lone surrogates: the pipeline part draws text without them.
beam_text = st.text(st.characters(codec="utf-8"), max_size=6)


# A handful of pipelines (each a few seconds on the DirectRunner); the formatting
# itself is swept with thousands of examples above.
@settings(max_examples=examples(6), deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sets(beam_text | st.sampled_from(LINE_BREAKS).map(lambda c: f"x{c}y"),
               min_size=1, max_size=8),
       st.integers(min_value=1, max_value=3))
def test_released_items_and_counts_round_trip_through_the_writers(tmp_path_factory, items,
                                                                  num_shards):
    folder = tmp_path_factory.mktemp("release")
    counts = {item: i for i, item in enumerate(sorted(items))}
    with TestPipeline() as p:
        released = p | "Items" >> beam.Create(sorted(items))
        _ = released | "WriteItems" >> WriteReleased(str(folder / "items"), num_shards=num_shards)
        _ = (p | "Counts" >> beam.Create(sorted(counts.items()))
             | "WriteCounts" >> WriteReleased(str(folder / "counts"), file_name_suffix=".tsv",
                                              num_shards=num_shards, format_line=format_count_line,
                                              sort_key=lambda kv: kv[0]))
    item_lines = read_back(str(folder / "items"))
    assert len(item_lines) == len(items)
    assert {unescape(line) for line in item_lines} == items
    count_lines = read_back(str(folder / "counts"))
    assert dict(parse_count_line(line) for line in count_lines) == counts
    # The readers do the same from the files (and from lines).
    assert sorted(read_released(str(folder / "items-*"))) == sorted(items)
    assert dict(read_counts(str(folder / "counts-*"))) == counts
    assert sorted(read_released(item_lines)) == sorted(items)


def test_read_released_reads_ngrams_and_bytes(written):
    assert sorted(read_released(str(written / "read ngrams" / "ngrams-*"), ngrams=True)) == [
        ("a",), ("the", "c\u2028t")]
    assert sorted(read_released(str(written / "read raw" / "raw-*"), as_bytes=True)) == [
        b"\xc2\x85", b"\xff\x85"]
