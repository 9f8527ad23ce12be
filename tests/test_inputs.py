"""Unit tests of the tokeniser and the input parsers (no pipeline)."""

import io

import pytest

from beam_dpsu.text import Tokenizer, tokenize
from pipelines.inputs import (InputFormatError, parse_csv, parse_jsonl, parse_pairs,
                              parse_text)


def stream(text: str):
    return io.BytesIO(text.encode("utf-8"))


def test_tokenize_defaults():
    text = "Great movie!<br /><br />See https://imdb.com/x and www.foo.org, don't MISS it…"
    assert tokenize(text) == ["great", "movie", "see", "and", "don't", "miss", "it"]


def test_tokenize_options_and_unicode():
    assert Tokenizer(lowercase=False)("Café Über_cool 42") == ["Café", "Über", "cool", "42"]
    assert Tokenizer(strip_urls=False)("http://a.b") == ["http", "a", "b"]
    with pytest.raises(TypeError, match="text must be str, got int"):
        tokenize(3)


def test_parse_pairs():
    rows = list(parse_pairs("f", stream('u1,cat\n\n"u,2", dog \n')))
    assert rows == [("u1", "cat"), ("u,2", "dog")]
    with pytest.raises(InputFormatError, match="f:1: missing item"):
        list(parse_pairs("f", stream("u1,\n")))


def test_parse_csv_multiline_fields_and_row_users():
    body = 'user,text\nu1,"line one\nline two"\nu2,x\n'
    assert list(parse_csv("f", stream(body), "user", "text")) == [
        ("u1", "line one\nline two"), ("u2", "x")]
    assert [u for u, _ in parse_csv("f", stream(body), "@row", "text")] == ["f:1", "f:2"]


def test_parse_csv_reports_bad_utf8():
    with pytest.raises(InputFormatError, match="not valid UTF-8"):
        list(parse_csv("f", io.BytesIO(b"user,text\nu1,\xff\xfe\n"), "user", "text"))


def test_parse_jsonl_errors():
    assert list(parse_jsonl("f", stream('{"u": 7, "t": "hi"}\n'), "u", "t")) == [("7", "hi")]
    with pytest.raises(InputFormatError, match="f:1: not valid JSON"):
        list(parse_jsonl("f", stream("{oops\n"), "u", "t"))
    with pytest.raises(InputFormatError, match="f:1: text field 't' must be a string, got None"):
        list(parse_jsonl("f", stream('{"u": "a"}\n'), "u", "t"))
    with pytest.raises(InputFormatError, match="f:1: missing or non-scalar user id field 'u'"):
        list(parse_jsonl("f", stream('{"t": "x"}\n'), "u", "t"))


def test_parse_text_users_are_lines():
    assert list(parse_text("f", stream("a b\nc\n"), skip_header_lines=1)) == [("f:2", "c")]
