"""Unit tests of the tokeniser and the input parsers (no pipeline)."""

import csv
import gzip
import io
import re
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beam_dpsu.core.tokenizer import (_MARKUP, _URL, _WORD, Tokenizer, Tokens, _ascii_words,
                                      _may_hold_url, tokenize)
from pipelines.io.errors import InputFormatError
from pipelines.io.parsers import parse_csv, parse_jsonl, parse_msnbc, parse_pairs, parse_text
from tests.support.examples import IMDB_2K
from tests.support.hypothesis_profiles import examples

pytestmark = pytest.mark.pipeline


def stream(text: str):
    return io.BytesIO(text.encode("utf-8"))


def test_tokenize_defaults():
    text = "Great movie!<br /><br />See https://imdb.com/x and www.foo.org, don't MISS it…"
    assert tokenize(text) == ["great", "movie", "see", "and", "don't", "miss", "it"]


def test_tokenize_options_and_unicode():
    assert Tokenizer(lowercase=False)("Café Über_cool 42") == ["Café", "Über", "cool", "42"]
    assert Tokenizer(strip_urls=False)("http://a.b") == ["http", "a", "b"]
    with pytest.raises(TypeError, match="^text must be str, got int$"):
        tokenize(3)


@settings(max_examples=examples(500), deadline=None)
@given(st.text(alphabet=st.sampled_from(list("abcXYZ09 _'’.,<>/:-İßΣé\n\t")), max_size=60))
def test_the_ascii_fast_path_gives_the_tokens_of_per_token_lower_casing(text):
    # Lower-casing a whole ASCII text before splitting is one C call; the
    # tokens must be those of splitting first and lower-casing each token
    # (on non-ASCII text the two differ, e.g. 'İ', so that keeps the slow path).
    assert tokenize(text) == reference_tokens(text)


def reference_tokens(text: str, lowercase: bool = True, strip_urls: bool = True,
                     strip_markup: bool = True) -> list:
    """The tokenizer's rule, step by step: URLs out, markup out, split, lower-case each."""
    if strip_urls:
        text = _URL.sub(" ", text)
    if strip_markup:
        text = _MARKUP.sub(" ", text)
    return [t.lower() if lowercase else t for t in _WORD.findall(text)]


def test_only_w_matches_the_url_patterns_letters_and_no_case_changes_its_punctuation():
    # The pre-check (_may_hold_url) looks for "://" and a lower-cased "www.": sound
    # only if a case-insensitive match of "w" is "w" or "W" (each lower-cases to
    # "w"), and ":", "/" and "." match only themselves, over every code point.
    for literal, allowed in (("w", {"w", "W"}), (":", {":"}), ("/", {"/"}), (".", {"."})):
        pattern = re.compile(re.escape(literal), re.IGNORECASE)
        matched = {chr(c) for c in range(sys.maxunicode + 1) if pattern.fullmatch(chr(c))}
        assert matched == allowed


def test_real_reviews_give_the_reference_tokens():
    # The 2,000 reviews of examples/ (markup on most, URLs on a few), every option.
    with gzip.open(IMDB_2K, "rt", encoding="utf-8", newline="") as f:
        reviews = [row["review"] for row in csv.DictReader(f)]
    assert sum(map(_may_hold_url, reviews)) >= 5  # the URL path runs too
    for options in ((True, True, True), (False, True, False), (True, False, True)):
        tokenizer = Tokenizer(*options)
        assert [tokenizer(text) for text in reviews] == [
            reference_tokens(text, *options) for text in reviews]


class OddStr(str):
    """A str whose own case methods lie."""

    def lower(self):
        return "zzz"

    def isascii(self):
        return False


@pytest.mark.parametrize("options", [(a, b, c) for a in (True, False) for b in (True, False)
                                     for c in (True, False)])
def test_a_str_subclass_gives_the_tokens_of_its_plain_text(options):
    # With no URL and no markup step too, the subclass is tokenised as its plain text
    # (it must not reach lower() as itself).
    text = "Hello World <b>x</b> www.a.b"
    for sample in (text, "Hello World"):
        assert Tokenizer(*options)(OddStr(sample)) == reference_tokens(sample, *options)


@settings(max_examples=examples(2000), deadline=None)
@given(st.lists(st.sampled_from(["'", "''", "a", "Z", "0", "don't", "o'neil", " ", "_", "-",
                                 ".", "\t", "\n", "\x1c", "\x00", "\x7f", "'s", "s'"]),
                max_size=16).map("".join))
def test_the_ascii_word_split_is_the_word_pattern(text):
    # Apostrophes alone, in runs, at either end and beside every kind of
    # separator (\x1c is whitespace to str.split, \x00 and \x7f are not).
    assert _ascii_words(text) == _WORD.findall(text)


def test_the_ascii_word_split_on_every_ascii_character():
    for code in range(128):
        for text in (chr(code), f"a{chr(code)}b", f"a'{chr(code)}'b", f"{chr(code)}'x'"):
            assert _ascii_words(text) == _WORD.findall(text), repr(text)


# Pieces of URLs in every case, near misses, markup and non-ASCII letters (ſ and K
# are letters case-insensitive matching folds onto s and k).
URL_PIECES = ["www.", "WWW.", "wWw.", "Www", "http://", "HTTPS://", "hTtP:/", "ftp://",
              "httpſ://", "://", ":/", "w", "W", ".", ":", "/", " ", "\n", "x", "Y", "_",
              "<b>", "<", ">", "é", "İ", "ſ", "K", "don't", "’s"]


@settings(max_examples=examples(1000), deadline=None)
@given(st.lists(st.sampled_from(URL_PIECES), max_size=12).map("".join),
       st.booleans(), st.booleans(), st.booleans())
def test_the_url_pre_check_changes_no_token(text, lowercase, strip_urls, strip_markup):
    assert Tokenizer(lowercase, strip_urls, strip_markup)(text) == reference_tokens(
        text, lowercase, strip_urls, strip_markup)
    if _URL.search(text):
        assert _may_hold_url(text)


@pytest.mark.parametrize("text,holds_url", [
    ("see www.x.org", True), ("WwW.X.ORG now", True), ("HTTPS://a.b/c d", True),
    ("ftp://f/g h", True), ("httpſ://x y", True), ("w w w . no", False), ("http:/ /x", False)])
def test_urls_in_any_case_are_removed_and_near_misses_kept(text, holds_url):
    assert tokenize(text) == reference_tokens(text)
    assert _may_hold_url(text) is holds_url
    assert bool(_URL.search(text)) is holds_url


@settings(max_examples=examples(500), deadline=None)
@given(st.text(alphabet=st.sampled_from(list("abcXYZ09 _'’.,<>/:-İßΣé\n\t\u0130\ufb03")),
               max_size=60), st.booleans(), st.booleans())
def test_tokens_are_non_empty_plain_str_as_selection_trusts_them(text, lowercase, strip_urls):
    # SelectItems skips its per-item check for a Tokens list: whatever the
    # text and options, a Tokenizer must give only non-empty plain str.
    tokens = Tokenizer(lowercase=lowercase, strip_urls=strip_urls)(text)
    assert type(tokens) is Tokens
    assert all(type(t) is str and t for t in tokens)


def test_parse_pairs():
    # A CSV dialect: quoted fields may hold commas, quotes and line breaks; items keep
    # their whitespace (\x0b too), user ids are stripped as in --format csv.
    rows = list(parse_pairs("f", stream('u1,cat\r\n"u,2", dog \n u3 ,"two\nlines"\n'
                                        'u4,"say ""hi"""\nu5,\x0bvt\n')))
    assert rows == [("u1", "cat"), ("u,2", " dog "), ("u3", "two\nlines"), ("u4", 'say "hi"'),
                    ("u5", "\x0bvt")]
    with pytest.raises(InputFormatError, match=r"f:1: field 2 \(item\) is empty"):
        list(parse_pairs("f", stream("u1,\n")))


@pytest.mark.parametrize("body,message", [
    ("u1,cat\n\nu2,dog\n", r"^f:2: a blank line"),
    ("u1,cat\nu2,dog\n\n", r"^f:3: a blank line"),
    ('u1,cat\nu2,"dog\nu3,cat\n', r"^f:2: a quoted field .* never closed"),
    ('u1,"a\nb"\nu2,x,y\n', r"^f:3: expected 2 fields user,item, got 3$"),
    ('u1,"a\nb"\n,x\n', r"^f:3: field 1 \(user id\) is empty"),
])
def test_parse_pairs_refuses_naming_the_line(body, message):
    with pytest.raises(InputFormatError, match=message):
        list(parse_pairs("f", stream(body)))


def test_parse_pairs_numbers_lines_after_skipped_header_lines():
    body = 'user,item\nu1,"a\nb"\nu2,"open\n'
    with pytest.raises(InputFormatError, match=r"^f:4: a quoted field"):
        list(parse_pairs("f", stream(body), 1))


def test_parse_csv_multiline_fields_and_row_users():
    body = 'user,text\nu1,"line one\nline two"\nu2,x\n'
    assert list(parse_csv("f", stream(body), "user", "text")) == [
        ("u1", "line one\nline two"), ("u2", "x")]
    assert [u for u, _ in parse_csv("f", stream(body), "@row", "text")] == ["f:1", "f:2"]


def test_parse_csv_finds_the_header_after_leading_blank_lines():
    # As csv.DictReader, and as blank lines between records: skipped. Read as "no
    # header", the file's rows were dropped without an error.
    body = "\n\nuser,text\nu1,hi\n\nu2,x\n"
    assert list(parse_csv("f", stream(body), "user", "text")) == [("u1", "hi"), ("u2", "x")]
    assert [u for u, _ in parse_csv("f", stream(body), "@row", "text")] == ["f:1", "f:2"]
    # Errors name the true lines: the header's, and a record's.
    with pytest.raises(InputFormatError, match=r"^f: the header \(line 3, 2 fields\) has no "
                                               r"field 'body'"):
        list(parse_csv("f", stream(body), "user", "body"))
    with pytest.raises(InputFormatError, match=r"^f:2: the header names the field 'user' in "
                                               r"columns 1 and 3"):
        list(parse_csv("f", stream("\nuser,text,user\nu1,x,u2\n"), "user", "text"))
    with pytest.raises(InputFormatError, match=r"^f:3: record 1: user id field 'user'"):
        list(parse_csv("f", stream("\nuser,text\n,x\n"), "user", "text"))
    # Only blank lines: no header and no record, as an empty file.
    assert list(parse_csv("f", stream("\n\n"), "user", "text")) == []


def test_a_blank_first_line_in_the_other_text_formats_is_not_dropped_silently():
    # jsonl and pairs refuse a blank line wherever it is, the first too.
    with pytest.raises(InputFormatError, match=r"^f:1: a blank line; every line of a JSON "):
        list(parse_jsonl("f", stream('\n{"u": "a", "t": "x"}\n'), "u", "t"))
    with pytest.raises(InputFormatError, match=r"^f:1: a blank line; every line of a pairs "):
        list(parse_pairs("f", stream("\nu1,cat\n")))
    # text: a blank line, the first too, is a user with no words; the others are read.
    assert list(parse_text("f", stream("\nhello\n"))) == [("f:1", ""), ("f:2", "hello")]
    # msnbc: blank lines before the data are skipped (as after its header), not the data.
    assert list(parse_msnbc("f.seq", stream("\n\n1 2\n3\n"))) == [
        ("f.seq:3", ("1", "2")), ("f.seq:4", ("3",))]
    assert list(parse_msnbc("f.seq", stream("% Sequences:\n\n1 2\n"))) == [
        ("f.seq:3", ("1", "2"))]


def test_parse_csv_reports_bad_utf8():
    with pytest.raises(InputFormatError, match="is not UTF-8 text"):
        list(parse_csv("f", io.BytesIO(b"user,text\nu1,\xff\xfe\n"), "user", "text"))


def test_parse_jsonl_errors():
    assert list(parse_jsonl("f", stream('{"u": 7, "t": "hi"}\n'), "u", "t")) == [("7", "hi")]
    with pytest.raises(InputFormatError, match="f:1: not valid JSON"):
        list(parse_jsonl("f", stream("{oops\n"), "u", "t"))
    with pytest.raises(InputFormatError, match="f:1: text field .t. is missing"):
        list(parse_jsonl("f", stream('{"u": "a"}\n'), "u", "t"))
    with pytest.raises(InputFormatError, match="f:1: user id field .u. is missing or empty"):
        list(parse_jsonl("f", stream('{"t": "x"}\n'), "u", "t"))


def test_parse_text_users_are_lines():
    assert list(parse_text("f", stream("a b\nc\n"), skip_header_lines=1)) == [("f:2", "c")]


def test_parse_text_refuses_a_csv_header_unless_skipped():
    for header in ("user,text", "User_ID, Review ,rating", "id,stars,body"):
        with pytest.raises(InputFormatError, match=r"^f:1 looks like a CSV header row.*"
                                                   r"--format csv.*--skip-header-lines 1"):
            list(parse_text("f", stream(f"{header}\nu1,the cat\n")))
    assert list(parse_text("f", stream("user,text\nu1,the cat\n"), 1)) == [("f:2", "u1,the cat")]
    # Texts with commas, and a header-like line after the first, are texts.
    for text in ("users, text and more", "user,stars", "cat,dog,user"):
        assert list(parse_text("f", stream(f"{text}\n"))) == [("f:1", text)]
    assert len(list(parse_text("f", stream("hello\nuser,text\n")))) == 2


def test_parse_text_refuses_a_csv_header_after_blank_lines_naming_its_line():
    # Blank lines before a header (as parse_csv skips them) must not hide it: the
    # header would be read as one user's text and each row as another's.
    with pytest.raises(InputFormatError, match=r"^f:3 looks like a CSV header row.*"
                                               r"--format csv.*--skip-header-lines 3"):
        list(parse_text("f", stream("\n\nuser,text\nu1,the cat\n")))
    # After a line of spaces (a text; csv would not skip it either) it is a text.
    assert len(list(parse_text("f", stream("  \nuser,text\n")))) == 2
    assert list(parse_text("f", stream("\nuser,text\nu1,x\n"), 2)) == [("f:3", "u1,x")]
    # A header-like line after a text is a text; blank lines are (empty) texts.
    assert len(list(parse_text("f", stream("\nhello\nuser,text\n")))) == 3


def test_parse_jsonl_refuses_a_blank_line_naming_it():
    with pytest.raises(InputFormatError, match=r"^f:2: a blank line"):
        list(parse_jsonl("f", stream('{"u": "a", "t": "x"}\n  \n{"u": "b", "t": "y"}\n'),
                         "u", "t"))


def test_parse_csv_refuses_a_row_with_more_fields_than_the_header():
    body = 'user,text\nu1,"a\nb"\nu2,hello,extra\n'
    with pytest.raises(InputFormatError, match=r"^f:4: record 2: the row has 3 fields, the "
                                               r"header 2"):
        list(parse_csv("f", stream(body), "user", "text"))


# -- errors name the file, line, record and field, never the record's text --------------

SECRET = "alice@example.com"


def test_parse_errors_never_quote_the_record():
    cases = [
        (lambda: list(parse_pairs("f", stream(f"{SECRET}\n"))), "f:1: expected 2 fields"),
        (lambda: list(parse_pairs("f", stream(f"{SECRET},\n"))), "f:1: field 2 (item) is empty"),
        (lambda: list(parse_jsonl("f", stream(f'{{"u": ["{SECRET}"], "t": "x"}}\n'), "u", "t")),
         "f:1: user id field 'u' must be a string or an integer, got a list"),
        (lambda: list(parse_jsonl("f", stream(f'{{"u": "a", "t": {{"x": "{SECRET}"}}}}\n'),
                                  "u", "t")),
         "f:1: text field 't' must be a string, got a dict"),
        (lambda: list(parse_jsonl("f", stream(f'["{SECRET}"]\n'), "u", "t")),
         "f:1: expected a JSON object, got a JSON list"),
        (lambda: list(parse_csv("f", stream(f"{SECRET},b\n1,2\n"), "user", "text")),
         "f: the header (line 1, 2 fields) has no field 'user'"),
    ]
    for run, message in cases:
        with pytest.raises(InputFormatError) as err:
            run()
        assert message in str(err.value)
        assert SECRET not in str(err.value)


def test_parse_pairs_refuses_a_header_row_unless_skipped():
    with pytest.raises(InputFormatError,
                       match=r"f:1 looks like a header row.*--skip-header-lines 1"):
        list(parse_pairs("f", stream("user_id,Item\nu1,cat\n")))
    assert list(parse_pairs("f", stream("user_id,item\nu1,cat\n"), 1)) == [("u1", "cat")]
    assert list(parse_pairs("f", stream("u1,item\n"))) == [("u1", "item")]  # data, not a header


def test_binary_and_corrupt_files_are_named(tmp_path):
    from apache_beam.io.filesystems import FileSystems
    from pipelines.io.checks import inspect_input

    random_gz = tmp_path / "random.csv.gz"
    random_gz.write_bytes(bytes(range(256)) * 20)
    with pytest.raises(InputFormatError,
                       match=r"random.csv.gz: cannot be decompressed as gzip \(zlib.error\)"):
        inspect_input([str(random_gz)], "csv", "u", "t")
    binary = tmp_path / "data.txt"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00\x01")
    with pytest.raises(InputFormatError, match=r"data.txt:1: the line is not UTF-8 text"):
        inspect_input([str(binary)], "text")
    nul = tmp_path / "nul.csv"
    nul.write_bytes(b"u1\x00,cat\n")
    with pytest.raises(InputFormatError, match=r"nul.csv:1: the line holds a NUL byte"):
        list(parse_pairs(str(nul), FileSystems.open(str(nul))))


def test_empty_input_and_header_only_input(tmp_path):
    from pipelines.io.checks import inspect_input

    empty, header = tmp_path / "a.csv", tmp_path / "b.csv"
    empty.write_text("")
    header.write_text("user,text\n")
    with pytest.raises(InputFormatError, match=r"no records in the input: all 2 files .* are "
                                               r"empty or only a header"):
        inspect_input([str(empty), str(header)], "csv", "user", "text")
    header.write_text("user,text\nu1,hi\n")
    inspect_input([str(empty), str(header)], "csv", "user", "text")  # one file has a record


@pytest.mark.parametrize("names,formats,expected", [
    (["a.csv", "b.CSV.gz"], ("pairs", "csv"), "csv"),
    (["a.jsonl.bz2"], ("csv", "jsonl"), "jsonl"),
    (["a.txt.zst", "b.txt"], ("text",), "text"),
    (["msnbc990928.zip"], ("text", "msnbc"), "msnbc"),
    (["msnbc.seq.gz"], ("text", "msnbc"), "msnbc"),
])
def test_infer_format(names, formats, expected):
    from pipelines.io.formats import infer_format
    assert infer_format(names, formats) == expected


@pytest.mark.parametrize("names,formats,message", [
    (["a.parquet"], ("csv",), "cannot tell the format of a.parquet from its name; give --format"),
    (["a.zip"], ("pairs", "csv", "jsonl", "text"), "cannot tell the format of a.zip"),
    (["a.csv", "b.txt"], ("csv", "text"), "different formats (a.csv → csv, b.txt → text)"),
])
def test_infer_format_errors(names, formats, message):
    from pipelines.io.formats import infer_format
    with pytest.raises(InputFormatError) as err:
        infer_format(names, formats)
    assert message in str(err.value)


def test_documents_read_as_elements_are_the_token_lists_without_ids(tmp_path):
    # What ExtractNgrams(privacy_unit="element") takes: each record's tokens as
    # a list, in place of the (path:line, tokens) documents, for every format.
    import apache_beam as beam
    from tests.support.runner import TestPipeline
    from apache_beam.testing.util import assert_that, equal_to
    from pipelines.io.read import ReadDocuments
    seq = tmp_path / "msnbc.seq"
    seq.write_text("% Different categories:\n% Sequences:\n\n1 1 2\n3\n", encoding="utf-8")
    text = tmp_path / "lines.txt"
    text.write_text("The cat sat.\nA dog!\n", encoding="utf-8")
    with TestPipeline() as p:  # both formats on branches of one pipeline
        for path, fmt, expected in ((seq, "msnbc", [["1", "1", "2"], ["3"]]),
                                    (text, "text", [["the", "cat", "sat"], ["a", "dog"]])):
            both = [p | f"Read{fmt}{a}" >> ReadDocuments(str(path), fmt, as_elements=a)
                    for a in (True, False)]
            # A list (the tokenizer's is a Tokens, a list it vouches for).
            assert_that(both[0] | f"Types{fmt}" >> beam.Map(lambda e: (isinstance(e, list), e)),
                        equal_to([(True, e) for e in expected]), label=f"Elements{fmt}")
            assert_that(both[1], equal_to([(f"{path}:{i}", tuple(e)) for i, e in
                                           zip((4, 5) if fmt == "msnbc" else (1, 2), expected)]),
                        label=f"Documents{fmt}")


# -- a field named twice is refused, never one of the two picked -------------------------

@pytest.mark.parametrize("header,field,columns", [
    ("user,text,user", "user", "columns 1 and 3"),
    ("text,user,text", "text", "columns 1 and 3"),
    ("user,user,text,user", "user", "columns 1, 2 and 4"),
])
def test_parse_csv_refuses_a_header_naming_a_field_read_twice(header, field, columns):
    # Read as the last column of that name, 300 rows of one person (alice,secret,rowN)
    # would be 300 users, each releasing the secret.
    body = header + "\n" + "".join(f"alice,{SECRET},row{i}\n" for i in range(300))
    with pytest.raises(InputFormatError, match=rf"^f:1: the header names the field "
                                               rf"'{field}' in {columns}") as err:
        list(parse_csv("f", stream(body), "user", "text"))
    assert SECRET not in str(err.value) and "alice" not in str(err.value)
    # Each row its own user: the text column is still read, so it is refused too.
    if field == "text":
        with pytest.raises(InputFormatError, match=r"^f:1: the header names the field 'text'"):
            list(parse_csv("f", stream(body), "@row", "text"))


def test_parse_csv_keeps_a_repeated_column_that_is_not_read():
    body = "user,x,text,x,,\nu1,a,hi,b,,\n"
    assert list(parse_csv("f", stream(body), "user", "text")) == [("u1", "hi")]


@pytest.mark.parametrize("line,field", [
    ('{"user": "alice", "text": "s", "user": "row7"}', "user"),
    ('{"text": "s", "user": "alice", "text": "t"}', "text"),
    # The same key spelt with an escape is the same key once decoded.
    ('{"user": "alice", "text": "s", "\\u0075ser": "row7"}', "user"),
])
def test_parse_jsonl_refuses_a_key_read_twice_in_an_object(line, field):
    body = '{"user": "bob", "text": "x"}\n' + line + "\n"
    with pytest.raises(InputFormatError, match=rf"^f:2: the object has the key '{field}' "
                                               "2 times") as err:
        list(parse_jsonl("f", stream(body), "user", "text"))
    assert "alice" not in str(err.value) and "row7" not in str(err.value)


def test_parse_jsonl_keeps_repeated_keys_it_does_not_read():
    body = '{"user": "u1", "x": 1, "text": "hi", "x": 2, "meta": {"a": 1, "a": 2}}\n'
    assert list(parse_jsonl("f", stream(body), "user", "text")) == [("u1", "hi")]


# -- a blank user id is refused in every format ------------------------------------------

@pytest.mark.parametrize("blank", [" ", "\t \u3000"])
def test_a_blank_user_id_is_refused_in_every_text_format(blank):
    import json
    with pytest.raises(InputFormatError, match=r"^f:1: user id field 'u' is missing or empty "
                                               r"\(it is only whitespace\)$"):
        list(parse_jsonl("f", stream(json.dumps({"u": blank, "t": "x"}) + "\n"), "u", "t"))
    with pytest.raises(InputFormatError, match=r"^f:2: record 1: user id field 'u' is missing "
                                               r"or empty \(it is only whitespace\)$"):
        list(parse_csv("f", stream(f"u,t\n{blank},x\n"), "u", "t"))
    with pytest.raises(InputFormatError, match=r"^f:1: field 1 \(user id\) is empty \(it is "
                                               r"only whitespace\)$"):
        list(parse_pairs("f", stream(f"{blank},x\n")))


@pytest.mark.parametrize("spaced", [" u1", "u1 ", "\t u1\u3000"])
def test_a_user_id_is_stripped_in_every_text_format(spaced):
    # One rule for every format: the same id with surrounding whitespace in one file
    # and without it in another is one user, never two.
    import json
    assert list(parse_jsonl("f", stream(json.dumps({"u": spaced, "t": "x"}) + "\n"), "u",
                            "t")) == [("u1", "x")]
    assert list(parse_csv("f", stream(f"u,t\n{spaced},x\n"), "u", "t")) == [("u1", "x")]
    assert list(parse_pairs("f", stream(f"{spaced},x\n"))) == [("u1", "x")]


# -- a JSON escape that is no Unicode character ------------------------------------------

@pytest.mark.parametrize("line,field", [
    ('{"u": "\\udc80", "t": "x"}', "user id field 'u'"),
    ('{"u": "a\\ud800b", "t": "x"}', "user id field 'u'"),
    ('{"u": "a", "t": "secret \\udfff word"}', "text field 't'"),
])
def test_parse_jsonl_refuses_a_lone_surrogate_naming_file_line_and_field(line, field):
    # json reads the escape of half a surrogate pair as a str no UTF-8 spells: it would
    # fail later (Beam encodes the record) with a traceback, as no bad record may.
    body = '{"u": "b", "t": "y"}\n' + line + "\n"
    with pytest.raises(InputFormatError, match=rf"^f:2: {field} holds a lone surrogate "
                                               r"\\u escape") as err:
        list(parse_jsonl("f", stream(body), "u", "t"))
    assert "secret" not in str(err.value) and "dc80" not in str(err.value)


@pytest.mark.parametrize("line,field", [
    ('{"u": "\\u0000", "t": "x"}', "user id field 'u'"),
    ('{"u": "secret\\u0000", "t": "x"}', "user id field 'u'"),
    ('{"u": "a", "t": "secret \\u0000 word"}', "text field 't'"),
])
def test_parse_jsonl_refuses_a_nul_escape_naming_file_line_and_field(line, field):
    # A NUL byte in a line is refused in every text format (and in Parquet text): the
    # \u0000 escape spells the same character, so it is refused as well.
    body = '{"u": "b", "t": "y"}\n' + line + "\n"
    with pytest.raises(InputFormatError, match=rf"^f:2: {field} holds a NUL character "
                                               r"\(a \\u0000 escape\)") as err:
        list(parse_jsonl("f", stream(body), "u", "t"))
    assert "secret" not in str(err.value)


@pytest.mark.parametrize("where", ["user", "text", "other"])
def test_parse_jsonl_refuses_an_integer_too_long_to_read_naming_file_and_line(where):
    # Python refuses to read an integer of more than sys.get_int_max_str_digits() digits
    # (4300 by default) with a ValueError stating the integer's length: it is refused as
    # any unreadable JSON is, naming the file and line, never the length or the digits.
    limit = getattr(sys, "get_int_max_str_digits", lambda: 0)()
    if not limit:
        pytest.skip("this Python reads integers of any length")
    digits = "7" * (limit + 100)
    record = {"user": '"u1"', "text": '"x"', "other": "1"}
    record[where] = digits
    line = "{" + ", ".join(f'"{k}": {v}' for k, v in record.items()) + "}"
    body = '{"user": "u0", "text": "y"}\n' + line + "\n"
    with pytest.raises(InputFormatError, match=r"^f:2: the JSON holds an integer longer than "
                                               rf"Python reads \(over {limit} digits;") as err:
        list(parse_jsonl("f", stream(body), "user", "text"))
    message = str(err.value)
    assert str(len(digits)) not in message and "7777" not in message, message


# -- flags that do not fit the format are named with the right one ------------------------

def _args(**given):
    import argparse
    base = dict(input=None, format=None, user_field=None, text_field=None, items_field=None,
                skip_header_lines=0, public_input=None, public_format="text",
                public_text_field=None)
    return argparse.Namespace(**{**base, **given})


def test_row_as_user_with_jsonl_says_it_is_for_csv_and_parquet(tmp_path):
    from pipelines.errors import UsageError
    from pipelines.settings import resolve_input
    path = tmp_path / "in.jsonl"
    path.write_text('{"user": "a", "text": "x"}\n')
    for fmt in ("jsonl", None):
        with pytest.raises(UsageError, match=r"^--user-field @row \(each row its own user\) "
                                             r"applies to --format csv or parquet, not jsonl"):
            resolve_input(_args(input=str(path), format=fmt, user_field="@row",
                                text_field="text"), ("pairs", "csv", "jsonl", "text"))


def test_a_public_input_of_another_format_names_public_format(tmp_path):
    from pipelines.settings import check_public_input
    parquet = tmp_path / "x.parquet"
    parquet.write_bytes(b"PAR1\x15\x00\x15\x8c\x01\xff\xfe" + b"\x00" * 20)
    jsonl = tmp_path / "p.txt"
    jsonl.write_text('{"text": "a"}\n' * 3)
    headed = tmp_path / "h.txt"
    headed.write_text("user,text\nu,a b\n")
    for path, fmt in ((parquet, "parquet"), (jsonl, "jsonl"), (headed, "csv")):
        with pytest.raises(InputFormatError) as err:
            check_public_input(_args(public_input=str(path)))
        message = str(err.value)
        assert "--format" not in message, message
        assert "--public-format" in message and "text or csv" in message, message
        if fmt == "csv":
            assert "give --public-format csv --public-text-field T" in message, message
        else:
            assert f"not {fmt}" in message, message
