"""``WriteReleased(format="parquet")`` and ``WriteReleasedCounts``: the text release's shards,
as Parquet.

Only the released set leaves (docs/privacy.md, invariant 6): a Parquet
release holds the same items in the same shard in the same order as the text
release, one file per shard (empty ones included), and the same set gives
byte-identical files whatever the input order or bundling.
"""

import glob
import os
import random

import apache_beam as beam
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tests.support.runner import TestPipeline

import beam_dpsu
from beam_dpsu import (CountReleased, ExtractNgrams, SelectItems, WeightedGaussian,
                       WriteReleased, WriteReleasedCounts, ZCDPBudget, read_counts,
                       read_released)
from beam_dpsu.beam.output import _parquet_value, format_count_line, parquet_schema, shard_path
from beam_dpsu.core.checks import ParameterError

pytestmark = pytest.mark.pipeline

SHARDS = 3


def corpus(seed=3):
    rng = random.Random(seed)
    # Pareto draws are >= 1: the escaped items are among the most common.
    vocab = ["w0", "tab\there", "line\nbreak", "back\\slash", "é"] + [f"w{i}" for i in range(1, 40)]
    return [(f"user{u}", vocab[min(int(rng.paretovariate(0.7)), len(vocab) - 1)])
            for u in range(400) for _ in range(rng.randint(1, 8))]


def documents():
    rng = random.Random(5)
    vocab = [f"t{i}" for i in range(12)]
    return [(f"user{u}", tuple(rng.choice(vocab[:3 + u % 9]) for _ in range(rng.randint(2, 6))))
            for u in range(400)]


def shard_names(prefix, suffix, num_shards=SHARDS):
    return [shard_path(prefix, i, num_shards, suffix) for i in range(num_shards)]


def written(prefix) -> list:
    return sorted(glob.glob(prefix + "-*"))


def parquet_rows(path) -> list:
    """The rows of one Parquet file, as tuples in file order."""
    table = pq.read_table(path)
    return list(zip(*(table.column(name).to_pylist() for name in table.column_names)))


def file_bytes(prefix) -> dict:
    out = {}
    for path in written(prefix):
        with open(path, "rb") as f:
            out[os.path.basename(path)] = f.read()
    return out


def without_metadata(schema):
    return schema.remove_metadata()


def order_items():
    """A set, and that set shuffled (test_the_same_set_in_another_order_gives_identical_files)."""
    items = sorted({item for _, item in corpus()}) + [f"x{i}" for i in range(200)]
    shuffled = list(items)
    random.Random(1).shuffle(shuffled)
    return items, shuffled


def write_parquet(p, elements, prefix, splits, label, **kwargs):
    chunks = [elements[i::splits] for i in range(splits)]
    parts = [p | f"{label} Part{i}" >> beam.Create(chunk) for i, chunk in enumerate(chunks)]
    _ = (parts | f"{label} Flatten" >> beam.Flatten() | f"{label} Reshuffle" >> beam.Reshuffle()
         | f"{label} Write" >> WriteReleased(prefix, num_shards=SHARDS, format="parquet",
                                             **kwargs))


@pytest.fixture(scope="module")
def writes(tmp_path_factory):
    """The writes the tests below read, in ONE pipeline (module fixture; a pipeline per
    test cost a run each), each case under its own folder; writes that must fail run
    their own."""
    root = tmp_path_factory.mktemp("written")
    with TestPipeline() as p:
        _seeded_release(p, root / "release")
        _ngrams(p, str(root / "ngrams" / "ngrams"))
        _ngram_counts_and_bytes(p, root / "small")
        _empty_release(p, root / "empty")
        items, shuffled = order_items()
        write_parquet(p, items, str(root / "order" / "a" / "items"), splits=1, label="In order")
        write_parquet(p, shuffled, str(root / "order" / "b" / "items"), splits=4,
                      label="Shuffled")
    return root


@pytest.fixture(scope="module")
def seeded_release(writes):
    """One seeded release of items and their counts, written as text and as Parquet."""
    return writes / "release"


def _seeded_release(p, folder):
    budget = ZCDPBudget(0.5, 1e-3)
    pairs = p | "Pairs" >> beam.Create(corpus())
    released = pairs | "Select" >> SelectItems(WeightedGaussian(3), budget, seed=7)
    counts = pairs | "Count" >> CountReleased(released, budget, max_items_per_user=3,
                                              seed=7)
    _ = released | "Text" >> WriteReleased(str(folder / "items"), num_shards=SHARDS)
    _ = released | "Parquet" >> WriteReleased(str(folder / "items"), num_shards=SHARDS,
                                              format="parquet")
    _ = counts | "CountsText" >> WriteReleasedCounts(str(folder / "counts"),
                                                     num_shards=SHARDS)
    _ = counts | "CountsParquet" >> WriteReleasedCounts(
        str(folder / "counts"), num_shards=SHARDS, format="parquet")
    # The jobs' counts writer today (pipelines/settings.py write_released).
    _ = counts | "JobCounts" >> WriteReleased(
        str(folder / "job-counts"), file_name_suffix=".tsv", num_shards=SHARDS,
        format_line=format_count_line, sort_key=lambda kv: kv[0])


def test_parquet_release_equals_the_text_release_shard_by_shard(seeded_release):
    prefix = str(seeded_release / "items")
    texts, parquets = shard_names(prefix, ".txt"), shard_names(prefix, ".parquet")
    assert written(prefix) == sorted(texts + parquets)
    released = []
    for text, parquet in zip(texts, parquets):
        assert pq.read_schema(parquet).remove_metadata() == parquet_schema()
        items = [row[0] for row in parquet_rows(parquet)]
        assert items == read_released(text)  # the same items, in the same order
        released += items
    assert len(released) > 5, "too little released: the test proves little"
    assert {"tab\there", "line\nbreak", "back\\slash"} <= set(released)
    # Parquet holds the items themselves, unescaped.
    assert len(released) == len(set(released))


def test_parquet_counts_equal_the_text_counts_shard_by_shard(seeded_release):
    prefix = str(seeded_release / "counts")
    texts, parquets = shard_names(prefix, ".tsv"), shard_names(prefix, ".parquet")
    assert written(prefix) == sorted(texts + parquets)
    items = str(seeded_release / "items")
    for text, parquet, items_text in zip(texts, parquets, shard_names(items, ".txt")):
        assert pq.read_schema(parquet).remove_metadata() == parquet_schema(counts=True)
        rows = parquet_rows(parquet)
        assert rows == read_counts(text)
        # In the items' shards and order.
        assert [item for item, _ in rows] == read_released(items_text)
    assert pq.read_schema(parquets[0]).field("count").type == pa.int64()


def test_counts_twin_writes_text_as_the_jobs_do(seeded_release):
    ours = file_bytes(str(seeded_release / "counts"))
    jobs = file_bytes(str(seeded_release / "job-counts"))
    assert {name.replace("job-", ""): content for name, content in jobs.items()} == {
        name: content for name, content in ours.items() if name.endswith(".tsv")}


def _ngrams(p, prefix):
    released = (p | "Documents" >> beam.Create(documents())
                | ExtractNgrams(3, ZCDPBudget(1.0, 1e-3), max_items_per_user=4, eta=0.5,
                                seed=11))
    _ = released | "NgramsText" >> WriteReleased(prefix, num_shards=2)
    _ = released | "NgramsParquet" >> WriteReleased(prefix, num_shards=2, format="parquet",
                                                    ngrams=True)


def test_ngrams_are_a_list_column_equal_to_the_text_release(writes):
    prefix = str(writes / "ngrams" / "ngrams")
    total = 0
    for text, parquet in zip(shard_names(prefix, ".txt", 2), shard_names(prefix, ".parquet", 2)):
        schema = pq.read_schema(parquet).remove_metadata()
        assert schema == parquet_schema(ngrams=True)
        assert schema.field("ngram").type == pa.list_(pa.field("element", pa.string(), False))
        ngrams = [tuple(row[0]) for row in parquet_rows(parquet)]
        assert ngrams == read_released(text, ngrams=True)
        total += len(ngrams)
    assert total > 0 and any(len(row) > 1 for row in ngrams)


def _ngram_counts_and_bytes(p, folder):
    _ = (p | "Counts" >> beam.Create([(("a", "b"), 5), (("a",), 9)])
         | "WriteCounts" >> WriteReleasedCounts(str(folder / "counts"), format="parquet",
                                                 ngrams=True))
    _ = (p | "Raw" >> beam.Create([b"\xff\x85", b"\xc2\x85", b"a\\b"])
         | "WriteRaw" >> WriteReleased(str(folder / "raw"), format="parquet",
                                       as_bytes=True))
    _ = (p | "RawText" >> beam.Create([b"\xff\x85", b"\xc2\x85", b"a\\b"])
         | "WriteRawText" >> WriteReleased(str(folder / "raw")))


def test_ngram_counts_and_bytes_items(writes):
    tmp_path = writes / "small"
    [counts] = written(str(tmp_path / "counts"))
    assert parquet_rows(counts) == [(["a"], 9), (["a", "b"], 5)]
    assert pq.read_schema(counts).remove_metadata() == parquet_schema(ngrams=True, counts=True)
    raw = shard_path(str(tmp_path / "raw"), 0, 1, ".parquet")
    assert pq.read_schema(raw).field("item").type == pa.binary()
    assert [row[0] for row in parquet_rows(raw)] == read_released(
        shard_path(str(tmp_path / "raw"), 0, 1, ".txt"), as_bytes=True)


def _empty_release(p, folder):
    prefix = str(folder / "items")
    nothing = p | "Something" >> beam.Create(["a"]) | "Nothing" >> beam.Filter(lambda _: False)
    _ = nothing | "EmptyText" >> WriteReleased(prefix, num_shards=SHARDS)
    _ = nothing | "EmptyParquet" >> WriteReleased(prefix, num_shards=SHARDS, format="parquet")
    _ = (nothing | "AsCounts" >> beam.Map(lambda item: (item, 1))
         | "EmptyCounts" >> WriteReleasedCounts(str(folder / "counts"), num_shards=SHARDS,
                                                format="parquet"))


def test_an_empty_release_writes_every_shard_with_its_schema(writes):
    tmp_path = writes / "empty"
    prefix = str(tmp_path / "items")
    assert written(prefix) == sorted(shard_names(prefix, ".txt") + shard_names(prefix, ".parquet"))
    assert written(str(tmp_path / "counts")) == shard_names(str(tmp_path / "counts"), ".parquet")
    contents = set()
    for path in shard_names(prefix, ".parquet"):
        table = pq.read_table(path)
        assert table.num_rows == 0 and table.schema.remove_metadata() == parquet_schema()
        with open(path, "rb") as f:
            contents.add(f.read())
    assert len(contents) == 1  # an empty shard says nothing but its schema
    for path in shard_names(str(tmp_path / "counts"), ".parquet"):
        assert pq.read_table(path).schema.remove_metadata() == parquet_schema(counts=True)


def test_the_same_set_in_another_order_gives_identical_files(writes):
    # The fixture wrote the set in one Create, and shuffled in four.
    first = file_bytes(str(writes / "order" / "a" / "items"))
    second = file_bytes(str(writes / "order" / "b" / "items"))
    assert first == second
    assert len(first) == SHARDS and all(first.values())


def test_a_bad_format_is_a_parameter_error():
    with pytest.raises(ParameterError, match=r"^format must be 'text' or 'parquet', "
                                             r"got 'csv'$") as error:
        WriteReleased("out/items", format="csv")
    assert error.value.param == "format"
    with pytest.raises(ParameterError, match="^format must be 'text' or 'parquet', got 'Parquet'"):
        WriteReleasedCounts("out/counts", format="Parquet")
    with pytest.raises(ParameterError, match="^format_line applies to format='text' only"):
        WriteReleased("out/items", format="parquet", format_line=str)


def test_default_suffixes():
    assert WriteReleased("o/items")._suffix == ".txt"
    assert WriteReleased("o/items", format="parquet")._suffix == ".parquet"
    assert WriteReleasedCounts("o/counts")._suffix == ".tsv"
    assert WriteReleasedCounts("o/counts", format="parquet")._suffix == ".parquet"
    assert WriteReleased("o/items", file_name_suffix=".txt.gz")._suffix == ".txt.gz"


@pytest.mark.parametrize("items,kwargs,message", [
    ([b"raw"], {}, "a Parquet release holds str items, got a bytes: pass as_bytes=True"),
    (["text"], {"as_bytes": True}, "with as_bytes=True holds bytes items, got a str"),
    ([("a", "b")], {}, "a Parquet release holds str items, got a tuple"),
    (["a"], {"ngrams": True}, r"an n-gram release \(ngrams=True\) holds tuples of tokens"),
])
def test_items_a_column_cannot_hold_are_refused(tmp_path, items, kwargs, message):
    # The shard writer WriteReleased builds, on one shard of the items, refuses them
    # before its file is written; that such a refusal fails the pipeline: the test
    # below (a pipeline per case would cost a run each).
    write = WriteReleased(str(tmp_path / "items"), format="parquet", **kwargs)
    with pytest.raises(Exception, match=message):
        list(write._writer.process((0, {"shard": [None], "elements": items})))
    assert not glob.glob(str(tmp_path / "items*"))


def test_an_item_a_column_cannot_hold_fails_the_pipeline(tmp_path):
    with pytest.raises(Exception, match="a Parquet release holds str items, got a bytes: "
                                        "pass as_bytes=True"):
        with TestPipeline() as p:
            _ = (p | beam.Create([b"raw"])
                 | WriteReleased(str(tmp_path / "items"), format="parquet"))


def test_a_lone_surrogate_is_refused():
    # Beam's str coder refuses them before any writer; the writer does too.
    with pytest.raises(ValueError, match="a str item holds a lone surrogate, which a Parquet "
                                         "string column"):
        _parquet_value("lone \ud800", as_bytes=False)


def test_the_writers_are_public():
    assert beam_dpsu.WriteReleased is WriteReleased
    assert beam_dpsu.WriteReleasedCounts is WriteReleasedCounts
    assert "WriteReleasedCounts" in beam_dpsu.__all__


def test_pandas_reads_the_release(seeded_release):
    pandas = pytest.importorskip("pandas")
    prefix = str(seeded_release / "counts")
    for text, parquet in zip(shard_names(prefix, ".tsv"), shard_names(prefix, ".parquet")):
        frame = pandas.read_parquet(parquet)
        assert list(frame.columns) == ["item", "count"]
        assert list(zip(frame["item"], frame["count"].astype(int))) == read_counts(text)
