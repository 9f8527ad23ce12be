"""The input is read whole or not at all (docs/privacy.md, invariant 10).

A truncated or corrupt compressed file, an unterminated CSV quote, a field
past the size limit, a byte that is not UTF-8, or a file of the wrong kind for
``--format`` is an ``InputFormatError`` naming the file and the true line,
never a release from the part that could be read.
"""

import bz2
import functools
import gzip
import io
import json
import lzma
import os
import random
import re
import zipfile
import zlib

import pytest
from apache_beam.io import fileio
from apache_beam.io.filesystems import FileSystems

from pipelines import ngrams, vocabulary
from pipelines.io import decompression, lines, parsers, read
from pipelines.io.checks import inspect_input
from pipelines.io.errors import InputFormatError
from pipelines.io.parsers import record_parser
from tests.support import job_calls
from tests.support.hypothesis_profiles import examples
from tests.support.input_files import csv_gzip_corrupted_mid_stream
from tests.support.job_checks import assert_ran, assert_refused
from tests.support.job_output import read_report
from tests.support.paths import ROOT
from tests.support.runner import job_args

pytestmark = [pytest.mark.job, pytest.mark.pipeline]

IMDB_2K = os.path.join(ROOT, "examples", "imdb_2k.csv.gz")
MSNBC_1K = os.path.join(ROOT, "examples", "msnbc_1k.seq")
SECRET = "alice@example.com"

try:
    import zstandard
except ImportError:  # pragma: no cover - zstandard comes with apache-beam
    zstandard = None


def read_file(path, fmt="text", user_field=None, text_field=None):
    """Every record of one file, read exactly as a pipeline worker reads it."""
    metadata = FileSystems.match([str(path)])[0].metadata_list[0]
    parse_file = read._ParseFileFn(record_parser(fmt, user_field, text_field), None, False)
    return list(parse_file.process(fileio.ReadableFile(metadata)))


COMPRESSORS = {
    ".gz": gzip.compress,
    ".bz2": bz2.compress,
    ".xz": lzma.compress,
    ".lzma": lambda data: lzma.compress(data, format=lzma.FORMAT_ALONE),
    ".deflate": zlib.compress,
}
if zstandard is not None:
    COMPRESSORS[".zst"] = lambda data: zstandard.ZstdCompressor().compress(data)
    COMPRESSORS[".zstd"] = lambda data: zstandard.ZstdCompressor(
        write_content_size=False).compress(data)

# Enough lines that a cut file still holds many whole lines (what a partial read
# that looks like a good one would release from).
BODY = "".join(f"user{i} read page {i * 7919 % 1000} of the site\n"
               for i in range(1, 20001)).encode()


@functools.cache
def compressed_body(suffix) -> bytes:
    """BODY compressed as ``suffix``, made once for the tests that read or cut it."""
    return COMPRESSORS[suffix](BODY)


# -- every compression is read to its end-of-stream marker --------------------


@pytest.mark.parametrize("suffix", sorted(COMPRESSORS))
def test_a_whole_compressed_file_is_read_whole(tmp_path, suffix):
    path = tmp_path / f"lines.txt{suffix}"
    path.write_bytes(compressed_body(suffix))
    records = read_file(path)
    assert len(records) == 20000
    assert records[-1] == (f"{path}:20000", f"user20000 read page {20000 * 7919 % 1000} of "
                                            "the site")


@pytest.mark.parametrize("suffix", sorted(COMPRESSORS))
@pytest.mark.parametrize("keep", [0.9, 0.5, "head"])
def test_a_truncated_compressed_file_is_an_error_naming_it(tmp_path, suffix, keep):
    whole = compressed_body(suffix)
    cut = whole[:200] if keep == "head" else whole[:int(len(whole) * keep)]
    path = tmp_path / f"lines.txt{suffix}"
    path.write_bytes(cut)
    with pytest.raises(InputFormatError) as err:
        read_file(path)
    message = str(err.value)
    assert message.startswith(f"{path}: ")
    assert "truncated" in message


@pytest.mark.parametrize("suffix", sorted(COMPRESSORS))
def test_a_corrupt_compressed_file_is_an_error_naming_it(tmp_path, suffix):
    whole = bytearray(compressed_body(suffix))
    middle = len(whole) // 2
    whole[middle:middle + 64] = bytes(64)  # 64 bytes zeroed in the middle
    path = tmp_path / f"lines.txt{suffix}"
    path.write_bytes(bytes(whole))
    with pytest.raises(InputFormatError) as err:
        read_file(path)
    assert str(err.value).startswith(f"{path}: ")


@pytest.mark.parametrize("suffix", [".gz", ".bz2", ".xz"] + ([".zst"] if zstandard else []))
def test_concatenated_members_are_all_read_and_trailing_garbage_is_refused(tmp_path, suffix):
    compress = COMPRESSORS[suffix]
    half = len(BODY) // 2
    half = BODY.rindex(b"\n", 0, half) + 1
    path = tmp_path / f"lines.txt{suffix}"
    path.write_bytes(compress(BODY[:half]) + compress(BODY[half:]))
    assert len(read_file(path)) == 20000
    # A second member cut short is a truncated file too.
    second = compress(BODY[half:])
    path.write_bytes(compress(BODY[:half]) + second[:len(second) // 2])
    with pytest.raises(InputFormatError, match="truncated"):
        read_file(path)
    # Bytes after the last member that are no member: corrupt, not ignored.
    path.write_bytes(compress(BODY) + b"this is not compressed data")
    with pytest.raises(InputFormatError) as err:
        read_file(path)
    assert str(err.value).startswith(f"{path}: ")


def test_a_parse_error_in_a_corrupt_compressed_file_is_reported_as_corruption(tmp_path):
    # The garbage the damage decompresses into must not be reported as a missing CSV
    # field: the file is corrupt.
    path = csv_gzip_corrupted_mid_stream(tmp_path / "texts.csv.gz")
    parse = record_parser("csv", "user", "text")
    with pytest.raises(InputFormatError, match="field"):  # what the garbage makes
        list(parse(str(path), decompression.open_input(str(path))))
    for check in (lambda: inspect_input([str(path)], "csv", "user", "text", max_records=10**6),
                  lambda: read_file(path, "csv", "user", "text")):
        with pytest.raises(InputFormatError,
                           match=rf"^{path}: cannot be decompressed as gzip \(zlib.error\)"):
            check()
    # A whole file's bad record is still that record's error.
    path.write_bytes(gzip.compress(b"user,text\nu1,hello\n,hello\nu3,x\n"))
    with pytest.raises(InputFormatError, match=rf"^{path}:3: record 2: user id field"):
        read_file(path, "csv", "user", "text")


def test_an_empty_compressed_file_is_not_a_compressed_stream(tmp_path):
    path = tmp_path / "lines.txt.gz"
    path.write_bytes(b"")
    with pytest.raises(InputFormatError, match=r"lines.txt.gz: .*empty"):
        read_file(path)


def test_a_truncated_msnbc_zip_is_an_error(tmp_path):
    seq = open(MSNBC_1K, "rb").read()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("msnbc.seq", seq)
    whole = buffer.getvalue()
    path = tmp_path / "msnbc.zip"
    path.write_bytes(whole)
    assert len(read_file(path, "msnbc")) == 1001 - 7  # 7 header lines
    path.write_bytes(whole[:int(len(whole) * 0.9)])
    with pytest.raises(InputFormatError, match=r"msnbc.zip: "):
        read_file(path, "msnbc")
    corrupt = bytearray(whole)
    corrupt[len(whole) // 2] ^= 0xFF  # a flipped byte in the member: bad CRC or bad data
    path.write_bytes(bytes(corrupt))
    with pytest.raises(InputFormatError, match=r"msnbc.zip: "):
        read_file(path, "msnbc")


def test_the_read_is_checked_in_the_pipeline_too(tmp_path):
    import apache_beam as beam
    from tests.support.runner import TestPipeline
    path = tmp_path / "lines.txt.gz"
    whole = gzip.compress(BODY)
    path.write_bytes(whole[:int(len(whole) * 0.9)])
    with pytest.raises(Exception, match=r"lines.txt.gz: .*truncated"):
        with TestPipeline() as p:
            _ = p | read.ReadUserTexts(str(path), "text") | beam.Map(lambda r: r)


@functools.cache
def _whole_copy(suffix) -> bytes:
    """examples/imdb_2k.csv.gz compressed as ``suffix`` (made once: xz takes a second)."""
    data = gzip.decompress(open(IMDB_2K, "rb").read())
    return {".gz": lambda d: open(IMDB_2K, "rb").read(), ".bz2": bz2.compress,
            ".xz": lzma.compress}[suffix](data)


def _cut_copy(tmp_path, suffix, keep):
    whole = _whole_copy(suffix)
    cut = whole[:keep] if isinstance(keep, int) else whole[:int(len(whole) * keep)]
    path = tmp_path / f"imdb.csv{suffix}"
    path.write_bytes(cut)
    return path


def assert_one_error_line(err, *needles):
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize("suffix,keep", [(".gz", 0.9), (".gz", 5000), (".bz2", 0.9),
                                         (".xz", 0.9)])
def test_vocabulary_job_on_a_truncated_file_exits_2_and_releases_nothing(tmp_path, capsys,
                                                                         suffix, keep):
    path = _cut_copy(tmp_path, suffix, keep)
    out = tmp_path / "out"
    code = vocabulary.main(job_args(["--input", str(path), "--user-field", "user",
                            "--text-field",
                            "review", "--epsilon", "1", "--delta", "1e-5",
                            "--output", str(out)]))
    captured = capsys.readouterr()
    assert code == 2
    assert_one_error_line(captured.err, str(path), "truncated")
    assert not out.exists()
    assert "released" not in captured.out


# -- an unterminated quote, a field past the limit ----------------------------


def csv_rows(n, broken_row=None, broken='someuser,"text never closed'):
    rows = ["user,text"]
    for i in range(1, n + 1):
        rows.append(broken if i == broken_row else f"user{i},row {i} says hello")
    return "\r\n".join(rows) + "\r\n"


def test_an_unterminated_quote_is_an_error_naming_the_line_where_it_began():
    body = csv_rows(400, broken_row=301)
    with pytest.raises(InputFormatError) as err:
        list(parsers.parse_csv("f.csv", io.BytesIO(body.encode()), "user", "text"))
    message = str(err.value)
    assert message.startswith("f.csv:302: ")  # the header is line 1
    assert "quote" in message and "someuser" not in message


def test_an_unterminated_quote_on_the_last_line_and_across_lines():
    body = 'user,text\nu1,"a\nb"\nu2,"one\ntwo\nthree'
    with pytest.raises(InputFormatError, match=r"^f.csv:4: .*quote"):
        list(parsers.parse_csv("f.csv", io.BytesIO(body.encode()), "user", "text"))
    # The quoted field opens on line 3, after a field that spans lines 2-3.
    body = 'user,text,more\nu1,"a\nb","c\nd\n'
    with pytest.raises(InputFormatError, match=r"^f.csv:3: .*quote"):
        list(parsers.parse_csv("f.csv", io.BytesIO(body.encode()), "user", "text"))
    # Closed quotes, escaped quotes and quotes inside unquoted fields are fine.
    body = 'user,text\nu1,"say ""hi""\nto all"\nu2,it is 5" long\nu3,x\n'
    assert [u for u, _ in parsers.parse_csv("f.csv", io.BytesIO(body.encode()),
                                           "user", "text")] == ["u1", "u2", "u3"]


def test_a_field_past_the_size_limit_is_an_error_naming_the_line_where_it_began(monkeypatch):
    assert parsers.FIELD_SIZE_LIMIT == 16 * 1024 * 1024
    monkeypatch.setattr(parsers, "FIELD_SIZE_LIMIT", 1000)
    long_text = "word " * 300  # 1500 characters
    body = f'user,text\nu1,short\nu2,"{long_text}\n{long_text}"\nu3,x\n'
    with pytest.raises(InputFormatError) as err:
        list(parsers.parse_csv("f.csv", io.BytesIO(body.encode()), "user", "text"))
    assert str(err.value).startswith("f.csv:3: ")
    assert "1,000 characters" in str(err.value)
    body = f'user,text\nu1,{long_text}\n'  # an unquoted field on one line
    with pytest.raises(InputFormatError, match=r"^f.csv:2: .*1,000 characters"):
        list(parsers.parse_csv("f.csv", io.BytesIO(body.encode()), "user", "text"))
    body = f'u1,{long_text}\n'  # a pairs line
    with pytest.raises(InputFormatError, match=r"^f.csv:1: .*1,000 characters"):
        list(parsers.parse_pairs("f.csv", io.BytesIO(body.encode())))


def test_the_csv_job_with_an_unterminated_quote_exits_2(tmp_path, capsys):
    path = tmp_path / "users.csv"
    path.write_text(csv_rows(400, broken_row=301), encoding="utf-8")
    out = tmp_path / "out"
    code = vocabulary.main(job_args(["--input", str(path), "--user-field", "user",
                            "--text-field",
                            "text", "--epsilon", "1", "--delta", "1e-5", "--output", str(out)]))
    assert code == 2
    assert_one_error_line(capsys.readouterr().err, f"{path}:302:", "quote")
    assert not out.exists()


# -- decode errors name the true line, in every format -------------------------


def with_bad_byte(lines, bad_line):
    out = []
    for i, line in enumerate(lines, start=1):
        data = line.encode()
        out.append(data[:3] + b"\xff" + data[3:] if i == bad_line else data)
    return b"".join(out)


FORMAT_LINES = {
    "text": (lambda i: f"user{i} writes a line of text with some words {i}\n", {}),
    "pairs": (lambda i: f"user{i},item{i % 50} with words\n", {}),
    "jsonl": (lambda i: json.dumps({"u": f"user{i}", "t": f"words {i} here"}) + "\n",
              {"user_field": "u", "text_field": "t"}),
    "csv": (lambda i: "user,text\r\n" if i == 1 else f"user{i},\"words {i}\r\nmore\"\r\n",
            {"user_field": "user", "text_field": "text"}),
    "msnbc": (lambda i: f"{i % 17 + 1} {i % 5 + 1} 3 4 5 6 7 8 9 10 11 12 13 14 \r\n", {}),
}


@pytest.mark.parametrize("fmt", sorted(FORMAT_LINES))
@pytest.mark.parametrize("bad_line", [2, 302, 20002, 70001])
def test_a_decode_error_names_the_true_line(tmp_path, fmt, bad_line):
    line, fields = FORMAT_LINES[fmt]
    n = 80000  # well past the 1 MiB read buffer
    path = tmp_path / f"data.{fmt}"
    data = with_bad_byte([line(i) for i in range(1, n + 1)], bad_line)
    assert len(data) > 2 << 20
    path.write_bytes(data)
    # In csv each record after the header spans two lines (a quoted field
    # with a line break), so record i begins on line 2i - 2.
    true_line = 2 * bad_line - 2 if fmt == "csv" else bad_line
    with pytest.raises(InputFormatError) as err:
        read_file(path, fmt, **fields)
    assert str(err.value).startswith(f"{path}:{true_line}: "), str(err.value)
    assert "not UTF-8" in str(err.value)


def test_a_decode_error_in_a_compressed_file_names_the_true_line(tmp_path):
    path = tmp_path / "data.txt.gz"
    path.write_bytes(gzip.compress(with_bad_byte([f"line {i}\n" for i in range(1, 300001)],
                                                 250123)))
    with pytest.raises(InputFormatError, match=rf"^{path}:250123: .*not UTF-8"):
        read_file(path)


def test_lone_cr_and_crlf_line_ends_still_count_lines():
    data = b"a\rb\r\nc\nd\xff\n"
    with pytest.raises(InputFormatError, match=r"^f:4: "):
        list(parsers.parse_text("f", io.BytesIO(data)))
    assert [u for u, _ in parsers.parse_text("f", io.BytesIO(b"a\rb\r\nc\n"))] == [
        "f:1", "f:2", "f:3"]


# -- each --format checks its own shape ----------------------------------------


def test_msnbc_refuses_a_line_that_is_not_category_numbers():
    body = "% Sequences:\n\n1 2 3 \n4 x 5\n"
    with pytest.raises(InputFormatError) as err:
        list(parsers.parse_msnbc("f.seq", io.BytesIO(body.encode())))
    assert str(err.value).startswith("f.seq:4: ")
    body = f"1 2\n{SECRET} 3\n"
    with pytest.raises(InputFormatError) as err:
        list(parsers.parse_msnbc("f.seq", io.BytesIO(body.encode())))
    assert str(err.value).startswith("f.seq:2: ") and SECRET not in str(err.value)


def test_msnbc_inspection_refuses_a_csv_with_a_hint():
    with pytest.raises(InputFormatError) as err:
        inspect_input([IMDB_2K], "msnbc")
    message = str(err.value)
    assert message.startswith(f"{IMDB_2K}:1: ")
    assert "--format csv" in message


@pytest.mark.parametrize("fmt,content,hint", [
    ("jsonl", "user,text\nu1,hello\n", "--format csv"),
    ("csv", '{"user": "u1", "text": "hello"}\n', "--format jsonl"),
    ("pairs", '{"user": "u1", "text": "hello"}\n', "--format jsonl"),
    ("text", '{"user": "u1", "text": "hello"}\n{"user": "u2", "text": "hi"}\n',
     "--format jsonl"),
    ("msnbc", '{"user": "u1", "text": "hello"}\n', "--format jsonl"),
])
def test_each_format_refuses_the_wrong_kind_of_file_with_a_hint(tmp_path, fmt, content, hint):
    path = tmp_path / "data"
    path.write_text(content, encoding="utf-8")
    fields = ({"user_field": "user", "text_field": "text"} if fmt in ("csv", "jsonl") else {})
    with pytest.raises(InputFormatError) as err:
        inspect_input([str(path)], fmt, **fields)
    assert hint in str(err.value)
    assert "u1" not in str(err.value) and "hello" not in str(err.value)


def test_a_zip_given_to_a_text_format_gets_a_hint(tmp_path):
    path = tmp_path / "data.txt"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("a.seq", "1 2 3\n")
    path.write_bytes(buffer.getvalue())
    with pytest.raises(InputFormatError, match=r"zip archive.*--format msnbc"):
        inspect_input([str(path)], "text")


def test_legitimate_files_pass_inspection(tmp_path):
    inspect_input([IMDB_2K], "csv", "user", "review")
    inspect_input([MSNBC_1K], "msnbc")
    data = "/work/shared/data"
    if os.path.isdir(data):
        inspect_input([f"{data}/msnbc990928.zip"], "msnbc")
        inspect_input([f"{data}/imdb_50k_reviews.csv.gz"], "csv", "@row", "review")
        inspect_input([f"{data}/askreddit_bigrams_1pct.csv.gz"], "csv", "author", "ngram")
    # Text whose lines are not all JSON objects, pairs whose user ids hold braces.
    path = tmp_path / "notes.txt"
    path.write_text('{"a": 1}\nplain words\n', encoding="utf-8")
    inspect_input([str(path)], "text")
    path.write_text("{weird},item\n", encoding="utf-8")
    inspect_input([str(path)], "pairs")


def test_ngrams_job_refuses_a_csv_as_msnbc(tmp_path, capsys):
    out = tmp_path / "out"
    code = ngrams.main(job_args(["--input", IMDB_2K, "--format", "msnbc", "--epsilon", "4",
                        "--delta", "1e-5", "--output", str(out)]))
    assert code == 2
    assert_one_error_line(capsys.readouterr().err, f"{IMDB_2K}:1:", "--format csv")
    assert not out.exists()


# -- the line and field scanners agree with io and csv -----------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

LINE_BYTES = st.lists(st.sampled_from([b"a", b"b", b"\n", b"\r", b"\r\n", b",", b'"', b" ",
                                       "é".encode(), b"\x0b", "\u2028".encode()]),
                      max_size=60).map(b"".join)


class ShortReads(io.BytesIO):
    """A stream giving at most ``size`` bytes a read, as a network file may."""

    def __init__(self, data, size):
        super().__init__(data)
        self.size = size

    def read(self, n=-1):
        return super().read(self.size if n < 0 else min(n, self.size))


@settings(max_examples=examples(300), deadline=None)
@given(data=LINE_BYTES, read_size=st.integers(1, 8))
def test_lines_are_split_as_io_splits_them(data, read_size):
    # Whatever the reads (chunk boundaries anywhere, a \r\n cut in two), the
    # lines are those io.TextIOWrapper(newline="") gives, as the old reader's were.
    expected = list(io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", newline=""))
    got = list(lines.decoded_lines("f", ShortReads(data, read_size)))
    assert got == list(enumerate(expected, start=1))


CSV_FIELD = st.text(alphabet=st.sampled_from(list('ab ,"\n\r')), max_size=12)


def records_and_scans(text):
    """csv's records of ``text``, each with the scanner's fields of the lines it was read
    from; raises as a parser does."""
    records = parsers._CsvRecords("f", lines.decoded_lines("f", io.BytesIO(text.encode())))
    for start, row in records:
        yield row, parsers._field_starts(records._lines, start)


def never_closed(text):
    """Whether the records of ``text`` end in a quoted field never closed."""
    try:
        list(records_and_scans(text))
    except InputFormatError as exc:
        assert "never closed" in str(exc)
        return True
    return False


@settings(max_examples=examples(300), deadline=None)
@given(rows=st.lists(st.lists(CSV_FIELD, min_size=1, max_size=4), min_size=1, max_size=4),
       cut=st.integers(0, 200))
def test_the_field_scanner_agrees_with_the_csv_module(rows, cut):
    import csv
    out = io.StringIO()
    csv.writer(out).writerows(rows)
    text = out.getvalue()
    # Written records: as many fields as csv reads, none left open.
    for row, fields in records_and_scans(text):
        assert len(fields) == len(row)
    assert not never_closed(text)
    # Cut anywhere: the file ends inside a quoted field exactly when the csv
    # module (strict) finds an unexpected end of data.
    cut_text = text[:cut]
    try:
        list(csv.reader(io.StringIO(cut_text, newline=""), strict=True))
        ends_in_quote = False
    except csv.Error as exc:
        ends_in_quote = "unexpected end of data" in str(exc)
    assert never_closed(cut_text) == ends_in_quote


def test_csv_errors_name_the_line_a_record_begins_on_after_blank_lines():
    body = 'user,text\n\nu1,"a\nb"\n\n\n,"c\nd"\n'
    with pytest.raises(InputFormatError, match=r"^f.csv:7: record 2: user id field"):
        list(parsers.parse_csv("f.csv", io.BytesIO(body.encode()), "user", "text"))
    body = 'user,text\n\n\nu1,"never closed\n\n'
    with pytest.raises(InputFormatError, match=r"^f.csv:4: a quoted field .* never closed"):
        list(parsers.parse_csv("f.csv", io.BytesIO(body.encode()), "user", "text"))


def test_zstd_without_its_module_is_refused_not_misread(tmp_path, monkeypatch):
    from apache_beam.io.filesystem import CompressionTypes
    monkeypatch.delitem(decompression._DECOMPRESSORS, CompressionTypes.ZSTD)
    path = tmp_path / "lines.txt.zst"
    path.write_bytes(b"\x28\xb5\x2f\xfd anything")
    with pytest.raises(InputFormatError, match=r"lines.txt.zst: reading zstd files needs the "
                                               r"zstandard module"):
        inspect_input([str(path)], "text")


def test_the_text_job_names_the_line_of_a_bad_byte(tmp_path, capsys):
    path = tmp_path / "lines.txt"
    path.write_bytes(with_bad_byte([f"user {i} writes words\n" for i in range(1, 60001)],
                                   50002))
    out = tmp_path / "out"
    code = vocabulary.main(job_args(["--input", str(path), "--epsilon", "1", "--delta", "1e-5",
                            "--output", str(out)]))
    assert code == 2
    assert_one_error_line(capsys.readouterr().err, f"{path}:50002: the line is not UTF-8")
    assert not out.exists()


# -- inputs that are not plain files, and names that are globs ---------------------------

from pipelines.io.checks import check_input_exists  # noqa: E402


def test_a_named_pipe_is_refused_before_it_is_opened(tmp_path):
    # Opened twice (the check, then the pipeline), a FIFO's second open waits forever.
    fifo = tmp_path / "in.csv"
    os.mkfifo(fifo)
    for pattern in (str(fifo), str(tmp_path / "*.csv")):
        with pytest.raises(InputFormatError, match=rf"^the input {fifo} is a named pipe \(FIFO\), "
                                                   "not a regular file: .*save"):
            check_input_exists(pattern)


def test_a_symlink_loop_and_a_dangling_symlink_are_named(tmp_path):
    loop = tmp_path / "loop.csv"
    os.symlink(loop, loop)
    with pytest.raises(InputFormatError, match=rf"^the input {loop} is a symbolic link that "
                                               "loops"):
        check_input_exists(str(loop))
    dangling = tmp_path / "gone.csv"
    os.symlink(tmp_path / "nowhere.csv", dangling)
    with pytest.raises(InputFormatError, match=rf"^the input {dangling} is a symbolic link to "
                                               "a file that does not exist"):
        check_input_exists(str(dangling))
    # A glob over them must not skip them silently (Beam's listing drops what it cannot
    # stat): the input would be read in part.
    (tmp_path / "ok.csv").write_text("user,text\nu,x\n")
    with pytest.raises(InputFormatError, match=r"^the input .*(loop|gone)\.csv is a symbolic"):
        check_input_exists(str(tmp_path / "*.csv"))



def test_a_glob_reaching_under_a_folder_link_is_refused_naming_it(tmp_path):
    # Beam's listing does not follow a link to a folder below the pattern's folder: the
    # files under it would be left out of the input, silently.
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "b.csv").write_text("user,text\nu,x\n")
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("user,text\nu,x\n")
    link = tmp_path / "in" / "more"
    os.symlink(tmp_path / "real", link)
    for pattern in ("in/**.csv", "in/*/*.csv", "in/m?re/b.csv", "in/**"):
        with pytest.raises(InputFormatError, match=rf"^the input {re.escape(str(link))} is a "
                                                   "symbolic link to a folder"):
            check_input_exists(str(tmp_path / pattern))
    # A link deeper down, under a folder that is not one, is found too.
    (tmp_path / "in" / "sub").mkdir()
    os.symlink(tmp_path / "real", tmp_path / "in" / "sub" / "deep")
    os.remove(link)
    with pytest.raises(InputFormatError, match=r"^the input .*/in/sub/deep is a symbolic link "
                                               "to a folder"):
        check_input_exists(str(tmp_path / "in" / "**.csv"))
    # A pattern that cannot reach below the link reads what it matches; one whose
    # folder is the link reads under it (the listing starts there).
    assert check_input_exists(str(tmp_path / "in" / "*.csv")) == [str(tmp_path / "in" / "a.csv")]
    assert check_input_exists(str(tmp_path / "in" / "sub" / "deep" / "*.csv")) == [
        str(tmp_path / "in" / "sub" / "deep" / "b.csv")]


def test_a_folder_link_that_loops_is_refused_once(tmp_path):
    # A link to a folder above it: following links while looking must end.
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.csv").write_text("user,text\nu,x\n")
    os.symlink(tmp_path / "in", tmp_path / "in" / "again")
    with pytest.raises(InputFormatError, match=r"^the input .*/in/again is a symbolic link "
                                               "to a folder"):
        check_input_exists(str(tmp_path / "in" / "**.csv"))

def test_a_glob_without_a_folder_reads_the_working_directory(tmp_path, monkeypatch):
    # Beam's listing searches no folder for a glob with no folder part ("*.csv"): the
    # check and the read both take it relative to the working directory.
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a.csv").write_text("user,text\nu,x\n")
    (tmp_path / "b.csv").write_text("user,text\nv,y\n")
    assert check_input_exists("*.csv") == ["./a.csv", "./b.csv"]
    assert check_input_exists("[a]*.csv") == ["./a.csv"]
    with pytest.raises(InputFormatError, match=r"^no input file matches '\*\.tsv'$"):
        check_input_exists("*.tsv")
    from apache_beam.testing.util import assert_that, equal_to
    from tests.support.runner import TestPipeline
    with TestPipeline() as p:
        assert_that(p | read.ReadUserTexts("*.csv", "csv", "user", "text"),
                    equal_to([("u", "x"), ("v", "y")]))
    # A file whose name is a glob is named as given, with the escape to give.
    (tmp_path / "br[1].csv").write_text("user,text\nu,x\n")
    with pytest.raises(InputFormatError, match=r"^no input file matches 'br\[1\]\.csv', but "
                                               r".*give --input 'br\[\[\]1\]\.csv'"):
        check_input_exists("br[1].csv")
    assert check_input_exists("br[[]1].csv") == ["./br[1].csv"]
    (tmp_path / "c*.csv").write_text("user,text\nw,z\n")
    assert check_input_exists("c*.csv") == ["./c*.csv"]


def test_a_file_name_with_brackets_says_they_are_a_glob_and_how_to_escape_them(tmp_path):
    path = tmp_path / "br[1].csv"
    path.write_text("user,text\nu,x\n")
    escaped = str(tmp_path / "br[[]1].csv")
    with pytest.raises(InputFormatError, match=r"^no input file matches '.*br\[1\]\.csv', but a "
                                               r"file of that name exists: \[…\] in a pattern "
                                               r"is a glob .*br\[\[\]1\]\.csv") as err:
        check_input_exists(str(path))
    assert escaped in str(err.value)
    assert check_input_exists(escaped) == [str(path)]
    # A glob that matches another file than the one of that very name is refused too.
    (tmp_path / "br1.csv").write_text("user,text\nu,x\n")
    with pytest.raises(InputFormatError, match=r"but a file of that name exists"):
        check_input_exists(str(path))


def test_the_job_names_a_symlink_loop_in_one_error_line(tmp_path, capsys):
    loop = tmp_path / "loop.csv"
    os.symlink(loop, loop)
    code = vocabulary.main(job_args(["--input", str(loop), "--user-field", "user",
                            "--text-field",
                            "text", "--epsilon", "1", "--delta", "1e-5",
                            "--output", str(tmp_path / "out")]))
    assert code == 2
    assert_one_error_line(capsys.readouterr().err, "is a symbolic link that loops")


# -- the job refuses what it cannot read whole, in one line naming file and line ----------
# Each test runs the job's command line in this process (tests/support/job_calls.py); a
# refused run prints one line starting ``error:``, exits with 2, writes nothing and shows
# no traceback (``assert_refused``).

FIXED = ["--delta", "1e-5", "--max-items-per-user", "2"]


@pytest.fixture
def job_folder(tmp_path_factory):
    """A fresh folder whose path names no test: pytest's own ``tmp_path`` holds the test's
    name, whose words ("directory", "corrupt", "empty", "blank") would satisfy the
    checks on messages."""
    return tmp_path_factory.mktemp("job")


@pytest.fixture
def folder_input(job_folder) -> str:
    folder = job_folder / "data"
    folder.mkdir()
    (folder / "a.csv").write_text("user,text\nu1,hello\n", encoding="utf-8")
    return str(folder)


def test_directory_input_with_format_is_refused_as_a_directory(job_folder, folder_input):
    out = job_folder / "out"
    proc = job_calls.vocabulary(["--input", folder_input, "--format", "csv", "--user-field",
                                 "user", "--text-field", "text", "--epsilon", "1", *FIXED,
                                 "--output", out])
    line = assert_refused(proc, out)
    assert "directory" in line or "folder" in line


def test_directory_input_without_format_is_refused_as_a_directory(job_folder, folder_input):
    out = job_folder / "out"
    proc = job_calls.vocabulary(["--input", folder_input, "--user-field", "user",
                                 "--text-field", "text", "--epsilon", "1", *FIXED,
                                 "--output", out])
    line = assert_refused(proc, out)
    assert "directory" in line or "folder" in line
    assert "cannot tell the format" not in line


def test_deeply_nested_json_line_is_refused_naming_the_line(job_folder):
    path = job_folder / "deep.jsonl"
    path.write_text('{"user": "a", "text": "hello"}\n'
                    + '{"user": "a", "text": ' + "[" * 100000 + "]" * 100000 + "}\n",
                    encoding="utf-8")
    out = job_folder / "out"
    proc = job_calls.vocabulary(["--input", path, "--format", "jsonl", "--user-field", "user",
                                 "--text-field", "text", "--epsilon", "1", *FIXED,
                                 "--output", out])
    assert f"{path}:2" in assert_refused(proc, out)


def test_pairs_unterminated_quote_is_refused_naming_the_line(job_folder):
    path = job_folder / "pairs.csv"
    path.write_text('u1,cat\nu2,"dog\nu3,cat\n', encoding="utf-8")
    out = job_folder / "out"
    proc = job_calls.vocabulary(["--input", path, "--format", "pairs", "--epsilon", "1", *FIXED,
                                 "--output", out])
    assert f"{path}:2" in assert_refused(proc, out)


def test_csv_row_with_an_extra_field_is_refused_naming_the_line(job_folder):
    path = job_folder / "texts.csv"
    path.write_text("user,text\nu1,hello world\nu2,hello,extra\nu3,hello\n",
                    encoding="utf-8")
    out = job_folder / "out"
    proc = job_calls.vocabulary(["--input", path, "--user-field", "user", "--text-field",
                                 "text", "--epsilon", "1", *FIXED, "--output", out])
    assert f"{path}:3" in assert_refused(proc, out)


def assert_blank_line_refused_or_reported(proc, path, out) -> None:
    """Refused naming the blank line (2), or run with the summary saying blank lines
    were skipped."""
    if proc.returncode == 0:
        assert "blank" in proc.stdout, proc.stdout
    else:
        assert f"{path}:2" in assert_refused(proc, out)


def test_blank_line_in_pairs_is_refused_or_reported(job_folder):
    path = job_folder / "pairs.csv"
    path.write_text("u1,cat\n\nu2,cat\n", encoding="utf-8")
    out = job_folder / "out"
    proc = job_calls.vocabulary(["--input", path, "--format", "pairs", "--epsilon", "1", *FIXED,
                                 "--output", out])
    assert "Traceback" not in proc.stderr
    assert_blank_line_refused_or_reported(proc, path, out)


def test_blank_line_in_jsonl_is_refused_or_reported(job_folder):
    path = job_folder / "texts.jsonl"
    path.write_text('{"user": "u1", "text": "cat"}\n\n{"user": "u2", "text": "cat"}\n',
                    encoding="utf-8")
    out = job_folder / "out"
    proc = job_calls.vocabulary(["--input", path, "--format", "jsonl", "--user-field", "user",
                                 "--text-field", "text", "--epsilon", "1", *FIXED,
                                 "--output", out])
    assert "Traceback" not in proc.stderr
    assert_blank_line_refused_or_reported(proc, path, out)


def test_csv_with_blank_lines_before_its_header_is_read_whole(job_folder):
    # Read as "no header", a blank first line dropped that file's rows, with no error.
    (job_folder / "a.csv").write_text("user,text\nu1,cat\nu2,cat\n", encoding="utf-8")
    (job_folder / "b.csv").write_text("\n\nuser,text\nu3,cat\nu4,cat\nu5,cat\n",
                                      encoding="utf-8")
    out = job_folder / "out"
    proc = job_calls.vocabulary(["--input", job_folder / "*.csv", "--user-field", "user",
                                 "--text-field", "text", "--epsilon", "1", *FIXED,
                                 "--non-private-stats", "--output", out])
    assert_ran(proc)
    assert read_report(out)["non_private_counts"]["users"] == 5


def test_headed_csv_read_as_text_is_refused_with_a_hint(job_folder):
    # As --format pairs refuses a first line of column names (pipelines/io/parsers.py,
    # parse_pairs), --format text refuses a first line that is a CSV header.
    path = job_folder / "texts.txt"
    path.write_text("user,text\nu1,the cat sat\nu2,the dog ran\n", encoding="utf-8")
    out = job_folder / "out"
    proc = job_calls.vocabulary(["--input", path, "--format", "text", "--epsilon", "1", *FIXED,
                                 "--output", out])
    line = assert_refused(proc, out)
    assert f"{path}:1" in line and "header" in line
    assert "--skip-header-lines 1" in line or "--format csv" in line


def test_utf16_file_is_named_as_such(job_folder):
    path = job_folder / "texts.csv"
    path.write_bytes("user,text\nu1,the cat\n".encode("utf-16"))
    out = job_folder / "out"
    proc = job_calls.vocabulary(["--input", path, "--user-field", "user", "--text-field",
                                 "text", "--epsilon", "1", *FIXED, "--output", out])
    line = assert_refused(proc, out)
    assert "UTF-16" in line or "not UTF-8" in line


def corrupt_gzip_csv(path) -> str:
    """A .csv.gz of 30,000 rows (1.4 MB of text, more than one decompressed read)
    with 16 bytes flipped in the middle of its compressed stream."""
    rng = random.Random(0)
    words = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota",
             "kappa", "cat", "dog", "mouse", "horse"]
    text = "user,text\n" + "".join(f"u{i},{' '.join(rng.choice(words) for _ in range(8))}\n"
                                   for i in range(30000))
    data = bytearray(gzip.compress(text.encode("utf-8"), mtime=0))
    middle = len(data) // 2
    data[middle:middle + 16] = bytes(b ^ 0xFF for b in data[middle:middle + 16])
    with pytest.raises(zlib.error):  # the file is corrupt indeed
        zlib.decompress(bytes(data), zlib.MAX_WBITS | 16)
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def test_gzip_corrupted_mid_stream_is_reported_as_corrupt(job_folder):
    path = corrupt_gzip_csv(job_folder / "texts.csv.gz")
    out = job_folder / "out"
    proc = job_calls.vocabulary(["--input", path, "--user-field", "user", "--text-field",
                                 "text", "--epsilon", "1", *FIXED, "--output", out])
    line = assert_refused(proc, out)
    assert path in line
    assert re.search(r"corrupt|cannot be decompressed|invalid compressed", line), line
    assert "field" not in line


def test_pairs_header_uid_tag_is_detected(job_folder):
    path = job_folder / "pairs.csv"
    path.write_text("uid,tag\n" + "".join(f"u{i},cat\n" for i in range(30)), encoding="utf-8")
    out = job_folder / "out"
    proc = job_calls.vocabulary(["--input", path, "--format", "pairs", "--epsilon", "1", *FIXED,
                                 "--output", out])
    line = assert_refused(proc, out)
    assert f"{path}:1" in line and "--skip-header-lines 1" in line


def test_json_error_does_not_say_at_at(job_folder):
    path = job_folder / "texts.jsonl"
    path.write_text('{"user": "u1", "text": "cat"}\n{"user": "u2", "text": "cat\n',
                    encoding="utf-8")
    out = job_folder / "out"
    proc = job_calls.vocabulary(["--input", path, "--format", "jsonl", "--user-field", "user",
                                 "--text-field", "text", "--epsilon", "1", *FIXED,
                                 "--output", out])
    line = assert_refused(proc, out)
    assert f"{path}:2" in line
    assert "at at" not in line


def test_empty_jsonl_error_does_not_mention_a_header(job_folder):
    path = job_folder / "texts.jsonl"
    path.write_text("", encoding="utf-8")
    out = job_folder / "out"
    proc = job_calls.vocabulary(["--input", path, "--user-field", "user", "--text-field",
                                 "text", "--epsilon", "1", *FIXED, "--output", out])
    line = assert_refused(proc, out)
    assert "empty" in line and "header" not in line
