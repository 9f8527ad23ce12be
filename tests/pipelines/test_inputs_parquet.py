"""Parquet input in every job, on small files written here with pyarrow.

The end-to-end runs are seeded (``--seed``): their releases are deterministic,
so these tests cannot fail by chance.
"""

import contextlib
import csv
import glob
import io
import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from tests.support.runner import TestPipeline
from apache_beam.testing.util import equal_to

from pipelines import ngrams, vocabulary
from pipelines.evaluation import evaluate
from pipelines.io.errors import InputFormatError
from pipelines.io.formats import infer_format
from pipelines.io.parquet import ParquetFields
from pipelines.io.read import ReadUserItems
from tests.support import job_calls
from tests.support.job_checks import assert_refused
from tests.support.job_output import read_report as report
from tests.support.one_pipeline import run_cases
from tests.support.runner import job_args

pytestmark = [pytest.mark.job, pytest.mark.pipeline]

BUDGET = ["--epsilon", "50", "--delta", "1e-6", "--max-items-per-user", "5", "--seed", "3"]
SECRET = "secret-value"  # in the files' data: never in an error line


def write_parquet(path, columns: dict, **options) -> str:
    pq.write_table(pa.table(columns), str(path), **options)
    return str(path)


def released(out, name: str = "items") -> list[str]:
    lines = []
    for path in sorted(glob.glob(os.path.join(out, f"{name}-*.txt"))):
        with open(path, encoding="utf-8") as f:
            lines += f.read().splitlines()
    return lines


def run(main, argv) -> tuple[int, str]:
    """(exit code, the lines on stderr other than progress), the job run on the suite's
    runner (tests/support/runner.py)."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(job_args(argv))
    return code, "\n".join(line for line in err.getvalue().splitlines()
                           if not line.startswith("["))


# -- end to end ------------------------------------------------------------------------


def test_vocabulary_reads_a_text_column_of_several_files_inferred_from_parquet(tmp_path):
    # Two files (the glob), integer user ids: user u's rows in both files are one
    # user. Small row groups, so each file is read as several tables.
    for part in range(2):
        write_parquet(tmp_path / f"part-{part}.parquet",
                      {"author": list(range(60)), "body": ["Hello WORLD, the cat"] * 60,
                       "unused": [SECRET] * 60}, row_group_size=16)
    out = str(tmp_path / "out")
    code, err = run(vocabulary.main, ["--input", str(tmp_path / "part-*.parquet"),
                                      "--user-field", "author", "--text-field", "body",
                                      *BUDGET, "--non-private-stats", "--output", out])
    assert code == 0, err
    assert released(out) == ["cat", "hello", "the", "world"]  # tokenised as CSV text is
    counts = report(out)["non_private_counts"]
    assert (counts["users"], counts["pairs"]) == (60, 2 * 60 * 4)
    assert report(out)["privacy_unit"] == "user_id"


def test_vocabulary_reads_an_items_column_as_is_with_row_users(tmp_path):
    # Items are not tokenised: "New York" stays one item, with its case.
    path = write_parquet(tmp_path / "tags.parquet",
                         {"tags": [["New York", "b"], ["New York"], []] * 30})
    out = str(tmp_path / "out")
    code, err = run(vocabulary.main, ["--input", path, "--user-field", "@row",
                                      "--items-field", "tags", *BUDGET, "--with-counts",
                                      "--non-private-stats", "--output", out])
    assert code == 0, err
    assert released(out) == ["New York", "b"]
    rep = report(out)
    assert rep["privacy_unit"] == "element"
    # Every row is its own user: the ids @row makes are distinct.
    assert rep["non_private_counts"]["users"] == 60 and rep["non_private_counts"]["pairs"] == 90


def test_ngrams_take_an_items_column_as_the_token_sequence(tmp_path):
    path = write_parquet(tmp_path / "seq.parquet",
                         {"user": [f"u{i}" for i in range(60)],
                          "pages": [["home", "news", "sport"]] * 60})
    out = str(tmp_path / "out")
    code, err = run(ngrams.main, ["--input", path, "--user-field", "user",
                                  "--items-field", "pages", "--max-n", "3", *BUDGET,
                                  "--output", out])
    assert code == 0, err
    assert released(out, "ngrams") == ["home", "home news", "home news sport", "news",
                                       "news sport", "sport"]


def test_evaluation_reads_parquet(tmp_path):
    path = write_parquet(tmp_path / "in.parquet",
                         {"user": [f"u{i}" for i in range(60)], "tags": [["a", "b"]] * 60})
    out = tmp_path / "eval"
    code, err = run(evaluate.main, ["--input", path, "--user-field", "user",
                                    "--items-field", "tags", "--mechanisms", "weighted-gaussian",
                                    "--epsilons", "50", "--delta", "1e-6",
                                    "--max-items-per-user", "5", "--no-plot",
                                    "--output", str(out)])
    assert code == 0, err
    with open(out / "results.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    # Unseeded: 60 users each holding both items (weight 60/√2 = 42 each), against a
    # threshold of 1.8 with σ = 0.16 at ε = 50 (Δ0 = 5): one is missed w.p. < 1e-300.
    assert [r["released"] for r in rows] == ["2"]


def test_peer_benchmark_reads_parquet(tmp_path, capsys):
    pytest.importorskip("pipeline_dp")
    from pipelines.evaluation import peers as benchmark_peers
    path = write_parquet(tmp_path / "in.parquet",
                         {"user": [f"u{i}" for i in range(60)], "text": ["a b"] * 60})
    code = benchmark_peers.main(job_args(["--input", path, "--user-field", "user",
                                 "--text-field",
                                 "text", "--epsilon", "50", "--delta", "1e-6",
                                 "--peer-strategies", "TRUNCATED_GEOMETRIC",
                                 "--mechanisms", "weighted-gaussian",
                                 "--workdir", str(tmp_path / "w")]))
    out = capsys.readouterr().out
    assert code == 0
    # Same failure bound as above: both items are released by both selections.
    assert [line.split("|")[2].strip() for line in out.splitlines()[2:]] == ["2", "2"]


@pytest.fixture(scope="module")
def reads(tmp_path_factory):
    """What ReadUserItems reads from the files of the two tests below, each file on its own
    branch of one pipeline: {case: the elements read}. The files read across (a glob) are
    checked with inspect_parquet first, as a job checks them."""
    from beam_dpsu.beam.bounding import ItemCountsPerUser
    from pipelines.io.parquet import inspect_parquet
    base = tmp_path_factory.mktemp("reads")
    users = pa.array([f"u{i % 7}" for i in range(40)]).dictionary_encode()
    texts = pa.array([f"w{i}" for i in range(40)], type=pa.large_string())
    text_path = write_parquet(base / "d.parquet", {"user": users, "text": texts},
                              row_group_size=6)
    items = pa.array([["x", "y"], []], type=pa.large_list(pa.string()))
    binary_path = write_parquet(base / "b.parquet",
                                {"user": pa.array([b"\xc3\xa9", b"k"]), "items": items})
    int_path = write_parquet(base / "i.parquet",
                             {"user": pa.array([7], pa.int32()), "items": [["z"]]})
    os.makedirs(base / "in")
    write_parquet(base / "in" / "a.parquet",
                  {"user": pa.array([b"alice", b"bob "], pa.binary()), "text": ["x", "z"]})
    write_parquet(base / "in" / "b.parquet",
                  {"user": pa.array([" alice", "\tbob"]).dictionary_encode(),
                   "text": ["y", "w"]})
    files = sorted(glob.glob(str(base / "in" / "*.parquet")))
    inspect_parquet(files, ParquetFields("user", "text"))
    return run_cases(base, lambda p: {
        "texts": p | "Texts" >> ReadUserItems(text_path, "parquet", "user", "text"),
        "binary": p | "Binary" >> ReadUserItems(binary_path, "parquet", "user",
                                                items_field="items"),
        "int": p | "Int" >> ReadUserItems(int_path, "parquet", "user", items_field="items"),
        "across files": (p | "AcrossFiles" >> ReadUserItems(
            str(base / "in" / "*.parquet"), "parquet", "user", "text", files=files)
            | ItemCountsPerUser()),
    })


def test_row_groups_dictionary_large_string_and_binary_columns(reads):
    # pandas categoricals are dictionary-encoded; large_string is what some
    # writers use. Every row of every row group is read, none twice. Binary
    # user ids are read as their UTF-8 text, as the library keys them; integer ids
    # become text, as in jsonl.
    # (Beam's matcher, as assert_that applied it in the pipeline: any order.)
    equal_to([(f"u{i % 7}", [f"w{i}"]) for i in range(40)])(reads["texts"])
    equal_to([("\xe9", ["x", "y"]), ("k", [])])(reads["binary"])
    equal_to([("7", ["z"])])(reads["int"])


# -- errors ------------------------------------------------------------------------------


@pytest.fixture
def good(tmp_path):
    return write_parquet(tmp_path / "good.parquet",
                         {"user": [SECRET, "b", "c"], "text": [SECRET, "y", "z"],
                          "tags": [[SECRET], ["b"], []], "score": [0.5, 1.5, 2.5],
                          "codes": [[1], [2], [3]]})


@pytest.mark.parametrize("fields,message", [
    (["--user-field", "usr", "--text-field", "text"],
     "good.parquet: no column 'usr' (--user-field), expected a string, integer or binary "
     "column; did you mean 'user'?"),
    (["--user-field", "score", "--text-field", "text"],
     "good.parquet: column 'score' (--user-field) is of type double, expected a string, "
     "integer or binary column"),
    (["--user-field", "user", "--text-field", "tags"],
     "good.parquet: column 'tags' (--text-field) is of type list<element: string>, expected "
     "a string column"),
    (["--user-field", "user", "--items-field", "codes"],
     "good.parquet: column 'codes' (--items-field) is of type list<element: int64>, "
     "expected a list of strings"),
    (["--user-field", "user", "--items-field", "text"],
     "good.parquet: column 'text' (--items-field) is of type string, expected a list of "
     "strings"),
    (["--user-field", "user", "--text-field", "text", "--items-field", "tags"],
     "--text-field and --items-field exclude each other"),
    (["--user-field", "user"],
     "--format parquet (inferred from the file name) needs --user-field and --text-field (a "
     "text column) or --items-field (a list-of-strings column)"),
    (["--format", "csv", "--user-field", "user", "--items-field", "tags"],
     "--items-field applies to --format parquet, not csv"),
    (["--format", "csv", "--user-field", "user", "--text-field", "text"],
     "good.parquet:1: the line holds a NUL byte (a binary file?); it is a Parquet file: give "
     "--format parquet"),
])
def test_bad_fields_fail_before_the_pipeline(good, tmp_path, fields, message):
    code, err = run(vocabulary.main, ["--input", good, *fields, *BUDGET,
                                      "--output", str(tmp_path / "o")])
    assert code == 2 and err == f"error: {err[len('error: '):]}" and message in err, err
    assert SECRET not in err and len(err.splitlines()) == 1
    assert not os.path.exists(tmp_path / "o")


def test_a_truncated_file_fails_before_the_pipeline(good, tmp_path):
    # One good file and one cut short (its footer lost): nothing is released.
    with open(good, "rb") as f:
        data = f.read()
    cut = tmp_path / "cut.parquet"
    cut.write_bytes(data[:len(data) // 2])
    code, err = run(vocabulary.main, ["--input", str(tmp_path / "*.parquet"),
                                      "--user-field", "user", "--text-field", "text", *BUDGET,
                                      "--output", str(tmp_path / "o")])
    assert code == 2
    assert err == (f"error: {cut}: not a readable Parquet file (pyarrow.lib.ArrowInvalid): is "
                   "it cut short, corrupt, or not Parquet?")
    assert not os.path.exists(tmp_path / "o")


@pytest.mark.parametrize("columns,fields,message", [
    # The footer's statistics count the null: found before the pipeline, with its rows.
    ({"user": ["a", None, SECRET], "text": ["x", "y", SECRET]}, ["--text-field", "text"],
     "x.parquet: rows 1–3 (row group 1): column 'user' (--user-field) holds a null (missing) "
     "value; every row needs a user id"),
    ({"user": ["a", "b"], "text": [SECRET, None]}, ["--text-field", "text"],
     "column 'text' (--text-field) holds a null (missing) value; every row needs a text"),
    ({"user": pa.array([], pa.string()), "text": pa.array([], pa.string())},
     ["--text-field", "text"], "no records in the input: "),
])
def test_footer_checks(tmp_path, columns, fields, message):
    path = write_parquet(tmp_path / "x.parquet", columns)
    code, err = run(vocabulary.main, ["--input", path, "--user-field", "user", *fields,
                                      *BUDGET, "--output", str(tmp_path / "o")])
    assert code == 2 and message in err and SECRET not in err, err


def test_two_columns_of_one_name_are_refused(tmp_path):
    table = pa.Table.from_arrays([pa.array(["a"]), pa.array(["b"]), pa.array(["x"])],
                                 names=["user", "user", "text"])
    with pytest.raises(InputFormatError, match="x.parquet: more than one column is named "
                                               "'user' \\(--user-field\\)"):
        ParquetFields("user", text="text").check_schema("x.parquet", table.schema)


def test_a_compressed_parquet_file_name_is_refused(good, tmp_path):
    path = tmp_path / "x.parquet.gz"
    os.rename(good, path)
    code, err = run(vocabulary.main, ["--input", str(path), "--user-field", "user",
                                      "--text-field", "text", *BUDGET,
                                      "--output", str(tmp_path / "o")])
    assert code == 2 and "x.parquet.gz: a Parquet file is read as it is" in err, err


def test_a_null_without_statistics_fails_the_pipeline(tmp_path):
    # Written without statistics: found as the rows are read, naming file and column.
    path = write_parquet(tmp_path / "x.parquet", {"user": ["a", None, SECRET],
                                                  "text": ["x", "y", SECRET]},
                         write_statistics=False)
    code, err = run(vocabulary.main, ["--input", path, "--user-field", "user",
                                      "--text-field", "text", *BUDGET,
                                      "--output", str(tmp_path / "o")])
    assert code == 2 and err == (f"error: {path}: column 'user' (--user-field) holds a null "
                                 "(missing) value; every row needs a user id"), err
    assert not os.path.exists(tmp_path / "o")


@pytest.mark.parametrize("columns,fields,message", [
    ({"user": ["a", "", SECRET], "text": ["x", "y", SECRET]}, dict(text="text"),
     "column 'user' (--user-field) holds an empty user id"),
    # Blank, as a CSV or pairs file's user id is refused once stripped.
    ({"user": ["a", " \t", SECRET], "text": ["x", "y", SECRET]}, dict(text="text"),
     "column 'user' (--user-field) holds a user id that is only whitespace"),
    ({"user": ["a", "\u3000"], "text": ["x", SECRET]}, dict(text="text"),
     "column 'user' (--user-field) holds a user id that is only whitespace"),
    ({"user": pa.array([b"a", b"\xe3\x80\x80 "]), "text": ["x", SECRET]}, dict(text="text"),
     "column 'user' (--user-field) holds a user id that is only whitespace"),
    # Bytes that are not UTF-8 would be an id no other file or format spells: the
    # same person's id as text elsewhere would be a second user.
    ({"user": pa.array([b"a", b"\xffSECRET"]), "text": ["x", SECRET]}, dict(text="text"),
     "column 'user' (--user-field) holds a binary user id that is not UTF-8"),
    ({"user": pa.array([b"\xe9t\xe9"]).dictionary_encode(), "text": [SECRET]},
     dict(text="text"), "column 'user' (--user-field) holds a binary user id that is not "
                        "UTF-8"),
    ({"user": ["a", "b"], "tags": [[SECRET], ["b", None]]}, dict(items="tags"),
     "column 'tags' (--items-field) holds a list with a null item"),
    ({"user": ["a", "b"], "tags": [[SECRET], ["b", ""]]}, dict(items="tags"),
     "column 'tags' (--items-field) holds an empty item"),
    ({"user": [1, 2], "tags": [[SECRET], None]}, dict(items="tags"),
     "column 'tags' (--items-field) holds a null (missing) value"),
    # NUL, refused as in text files.
    ({"user": [1, 2], "tags": [[SECRET], ["b", "c\x00d"]]}, dict(items="tags"),
     "column 'tags' (--items-field) holds text with a NUL character"),
    ({"user": ["a", "b"], "text": [SECRET, "\x00"]}, dict(text="text"),
     "column 'text' (--text-field) holds text with a NUL character"),
    ({"user": ["a", "b\x00"], "text": [SECRET, "x"]}, dict(text="text"),
     "column 'user' (--user-field) holds text with a NUL character"),
    # A binary id is read as its text, so it is held to the rule text is.
    ({"user": pa.array([b"a", b"SECRET\x00"]), "text": ["x", SECRET]}, dict(text="text"),
     "column 'user' (--user-field) holds a binary user id with a NUL character"),
    ({"user": pa.array([b"\x00", b"a"]).dictionary_encode(), "tags": [[SECRET], []]},
     dict(items="tags"), "column 'user' (--user-field) holds a binary user id with a NUL "
                         "character"),
    ({"user": pa.array([b"a", b"b\x00"], pa.large_binary()), "text": ["x", SECRET]},
     dict(text="text"), "column 'user' (--user-field) holds a binary user id with a NUL "
                        "character"),
])
def test_bad_values_of_a_row_group(columns, fields, message):
    # What the pipeline's step checks on each row group read (see the test above).
    with pytest.raises(InputFormatError) as raised:
        ParquetFields("user", **fields).check_values("x.parquet", pa.table(columns))
    assert str(raised.value).startswith(f"x.parquet: {message}")
    assert SECRET not in str(raised.value)


def test_nul_in_parquet_item_is_refused_naming_the_column(tmp_path):
    # The job's refusal of a NUL item: one error line naming the file and the column.
    path = tmp_path / "items.parquet"
    users = [f"u{i}" for i in range(40)]
    items = [["cat", "do\x00g"] for _ in users]
    pq.write_table(pa.table({"user": users, "things": items}), str(path))
    out = tmp_path / "out"
    proc = job_calls.vocabulary(["--input", path, "--user-field", "user", "--items-field",
                                 "things", "--epsilon", "1", "--delta", "1e-5",
                                 "--max-items-per-user", "2", "--output", out])
    line = assert_refused(proc, out)
    assert "NUL" in line and "things" in line and str(path) in line


def test_a_corrupt_data_page_fails_the_job_with_one_error_line(tmp_path):
    # The footer is intact, so the file passes the checks before the run; its
    # second row group's data cannot be decoded. The job must fail as a whole
    # (the first row group was read fine): no output, one line, no traceback.
    path = write_parquet(tmp_path / "x.parquet",
                         {"user": [f"u{i}" for i in range(300)],
                          "text": [f"{SECRET} {i}" for i in range(300)]},
                         row_group_size=100, compression="snappy")
    data = bytearray(open(path, "rb").read())
    start = pq.read_metadata(path).row_group(1).column(1).data_page_offset
    for i in range(start + 5, start + 60):
        data[i] ^= 0x5A
    with open(path, "wb") as f:
        f.write(bytes(data))
    out = tmp_path / "o"
    # In this process, its stderr as a process prints it (tests/support/job_calls.py).
    proc = job_calls.vocabulary(["--input", path, "--user-field", "user", "--text-field", "text",
                                 *BUDGET[:-2], "--output", str(out)])  # unseeded: no warning
    lines = [line for line in proc.stderr.splitlines() if not line.startswith("[vocabulary")]
    assert proc.returncode == 2
    assert lines == ["error: a Parquet input file cannot be read (OSError in Beam's Parquet "
                     "reader, which does not name the file): is one corrupt, or was it "
                     "changed since the job checked its footer?"], proc.stderr
    assert not out.exists() and proc.stdout == ""


# -- pieces ------------------------------------------------------------------------------


def test_parquet_fields_need_one_of_text_and_items():
    assert ParquetFields("u", text="t").columns == ["u", "t"]
    assert ParquetFields("@row", items="i").columns == ["i"]
    for bad in (dict(user="u"), dict(user="u", text="t", items="i"), dict(user="", text="t")):
        with pytest.raises(ValueError):
            ParquetFields(**bad)


def test_format_inferred_from_parquet_suffix():
    assert infer_format(["a/x.parquet", "a/y.PARQUET"], ("csv", "parquet")) == "parquet"


@pytest.mark.parametrize("job", [vocabulary, ngrams, evaluate])
def test_help_lists_parquet_and_the_items_field(job):
    text = " ".join(job.build_parser().format_help().split())
    assert ("parquet: Parquet files, read with --user-field and --text-field or "
            "--items-field") in text
    assert ".parquet → parquet" in text and "--items-field FIELD" in text


# -- one user, one-line refusals, whole reads (docs/privacy.md, invariants 1, 5 and 10) ----


def test_binary_and_text_user_ids_across_files_are_one_user(reads):
    # One user id as UTF-8 bytes in one file and as text in another is one user (the
    # library keys ids by their text), bounded once; so is one with surrounding
    # whitespace, stripped as in every format.
    equal_to([("alice", {"x": 1, "y": 1}), ("bob", {"z": 1, "w": 1})])(reads["across files"])


def test_a_binary_user_id_that_is_not_utf8_fails_the_job_naming_file_and_column(tmp_path):
    # Next to text ids in another file, bytes no text spells would be a second user for
    # one person: the job fails instead, naming the file and the column, never the id.
    os.makedirs(tmp_path / "in")
    write_parquet(tmp_path / "in" / "a.parquet", {"user": ["alice"], "text": ["x"]})
    bad = write_parquet(tmp_path / "in" / "b.parquet",
                        {"user": pa.array([b"alic\xe9"], pa.binary()), "text": [SECRET]})
    out = tmp_path / "o"
    code, err = run(vocabulary.main, ["--input", str(tmp_path / "in" / "*.parquet"),
                                      "--user-field", "user", "--text-field", "text", *BUDGET,
                                      "--output", str(out)])
    assert code == 2 and err.startswith(f"error: {bad}: column 'user' (--user-field) holds a "
                                        "binary user id that is not UTF-8"), err
    assert "alic" not in err and SECRET not in err and "xe9" not in err
    assert not out.exists()


def test_a_file_gone_after_the_checks_fails_the_run(tmp_path):
    # The run reads the files that were checked, not the pattern again: a file
    # removed in between fails the job instead of leaving its users out.
    os.makedirs(tmp_path / "in")
    a = write_parquet(tmp_path / "in" / "a.parquet", {"user": ["u1"], "text": ["x"]})
    b = write_parquet(tmp_path / "in" / "b.parquet", {"user": ["u2"], "text": ["y"]})
    fields = ParquetFields("user", text="text")
    from pipelines.io.parquet import ReadParquetRecords, inspect_parquet
    inspect_parquet([a, b], fields)
    read = ReadParquetRecords(str(tmp_path / "in" / "*.parquet"), fields, files=[a, b])
    os.remove(b)
    with pytest.raises(Exception, match="b.parquet"):
        with TestPipeline() as p:
            _ = p | read


def test_text_that_is_not_utf8_is_an_error_naming_the_column_never_a_byte(tmp_path):
    offsets = pa.py_buffer(pa.array([0, 2, 10], pa.int32()).buffers()[1])
    bad = pa.Array.from_buffers(pa.string(), 2, [None, offsets,
                                                 pa.py_buffer(b"ok\xff\xfeSECRETX")])
    with pytest.raises(InputFormatError) as raised:
        ParquetFields("user", text="text").check_values(
            "x.parquet", pa.table({"user": ["a", "b"], "text": bad}))
    message = str(raised.value)
    assert message.startswith("x.parquet: column 'text' (--text-field) holds text that is "
                              "not valid UTF-8"), message
    assert "SECRET" not in message and "xff" not in message
