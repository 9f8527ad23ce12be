"""Tokenisation of free text into items (pure Python).

Follows the preprocessing of the papers' corpora (dpsu §6, dp-sips §5.1):
URLs and markup removed, symbols dropped, words lower-cased. Words are runs of
Unicode letters and digits, with inner apostrophes kept ("don't", "o'neil").
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable

__all__ = ["Tokens", "Tokenizer", "tokenize"]

_URL = re.compile(r"(?:https?://|ftp://|www\.)\S+", re.IGNORECASE)
_MARKUP = re.compile(r"<[^<>]{0,200}>")
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")


def _may_hold_url(text: str) -> bool:
    """Whether ``_URL`` can match (it needs "://" or "www."): faster than its search."""
    return "://" in text or "www." in text.lower()


# ASCII letters, digits and the apostrophe kept; every other ASCII character a space.
_ASCII_SPACES = str.maketrans({chr(c): " " for c in range(128)
                               if not (chr(c).isalnum() or chr(c) == "'")})


def _ascii_words(text: str) -> list:
    """``_WORD.findall(text)`` for an ASCII ``text``, in C-level string calls: every other
    character, then every apostrophe not between two word characters, becomes a space."""
    spaced = text.translate(_ASCII_SPACES)
    if "'" in spaced:
        spaced = " " + spaced.replace("''", "  ") + " "
        spaced = spaced.replace(" '", "  ").replace("' ", "  ")
    return spaced.split()


class Tokens(list):
    """What a ``Tokenizer`` returns: a list of non-empty plain ``str`` tokens.

    ``SelectItems`` checks one element's distinct items in one C-level pass
    (``bounding.element_distinct_items``), or item by item if that pass fails.
    """

    __slots__ = ()


@dataclasses.dataclass(frozen=True)
class Tokenizer:
    """Splits text into word tokens.

    Attributes:
      lowercase: lower-case every token (default True).
      strip_urls: drop http(s)://, ftp:// and www. URLs before splitting.
      strip_markup: drop HTML-like tags such as ``<br />`` before splitting.
    """

    lowercase: bool = True
    strip_urls: bool = True
    strip_markup: bool = True

    def __call__(self, text: str) -> Tokens:
        if not isinstance(text, str):
            raise TypeError(f"text must be str, got {type(text).__name__}")
        if type(text) is not str:
            # A plain copy: a subclass's own methods must not change the tokens.
            text = str.__str__(text)
        if self.strip_urls and _may_hold_url(text):
            text = _URL.sub(" ", text)
        if self.strip_markup:
            text = _MARKUP.sub(" ", text)
        if self.lowercase and text.isascii():
            # One C call, not one per token: on ASCII lower-casing keeps the tokens.
            return Tokens(_ascii_words(text.lower()))
        tokens: Iterable[str] = _WORD.findall(text)
        if self.lowercase:
            tokens = map(str.lower, tokens)
        # Every match is non-empty, and so is its lower case.
        return Tokens(tokens)


tokenize = Tokenizer()

