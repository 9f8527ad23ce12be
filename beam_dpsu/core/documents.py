"""The checks of n-gram input: a (user_id, tokens) document, an element's tokens.

Errors name the field, the token's position and the type, never a user id or a token
(runner logs keep them). Tokens come back as plain ``str`` (so Beam keys n-grams
deterministically) without whitespace (released n-grams are space-joined tokens).
"""

from __future__ import annotations

from typing import Sequence

from beam_dpsu.core import hashing
from beam_dpsu.core.checks import a_type
from beam_dpsu.core.user_records import InvalidRecordError, canonical_user_id, plain_str_or_bytes

__all__ = ["check_document", "element_document", "element_tokens", "plain_token",
           "checked_tokens", "encodes_as_utf8"]


def plain_tokens(tokens) -> bool:
    """Plain non-empty str tokens without whitespace, all UTF-8 (no lone surrogate),
    checked by splitting their space-joined text (C calls, the common case)."""
    if not set(map(type, tokens)) <= {str}:
        return False
    joined = " ".join(tokens)
    return joined.split() == list(tokens) and (joined.isascii() or encodes_as_utf8(joined))


def encodes_as_utf8(text: str) -> bool:
    """Whether ``text`` encodes as UTF-8: false exactly when it holds a lone surrogate."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def plain_token(token) -> bool:
    """One token as ``plain_tokens`` wants it."""
    return plain_tokens((token,))


def checked_tokens(tokens, where: str) -> tuple:
    """``tokens`` as a tuple of plain str; raises naming the position and type, never a value."""
    if plain_tokens(tokens):
        return tuple(tokens)
    held = []
    for position, t in enumerate(tokens):
        if isinstance(t, str):  # checked as the plain text it holds, not a subclass's
            t = plain_str_or_bytes(t)
        if not isinstance(t, str) or not t:
            raise InvalidRecordError(f"token {position} of {where} must be a non-empty str, got "
                                     + ("an empty str" if isinstance(t, str) else f"{a_type(t)}"))
        # Released n-grams are written as tokens joined by a space: a token
        # with whitespace would make ("new york",) and ("new", "york") one line.
        if any(c.isspace() for c in t):
            raise InvalidRecordError(f"token {position} of {where} contains whitespace; tokens are "
                                     "written space-separated, so split them first")
        if not (t.isascii() or encodes_as_utf8(t)):
            raise InvalidRecordError(f"token {position} of {where} holds a lone surrogate (not "
                                     "UTF-8; decode the input strictly)")
        held.append(t)
    return tuple(held)


def check_document(record):
    """Returns a (user_id, tuple of tokens) document; raises naming what is wrong."""
    if type(record) is tuple and len(record) == 2:  # the common case first
        user_id, tokens = record
        if type(user_id) is str and user_id and type(tokens) is tuple and plain_tokens(tokens):
            return record
    if not isinstance(record, tuple) or len(record) != 2:
        shape = (f"a tuple of {len(record)} fields" if isinstance(record, tuple)
                 else f"{a_type(record)}")
        raise InvalidRecordError(f"expected a (user_id, tokens) document, got {shape}")
    user_id, tokens = record
    if user_id is None or (isinstance(user_id, (str, bytes)) and not user_id):
        raise InvalidRecordError("a (user_id, tokens) document has a missing user id "
                                 "(None or empty) in field 0")
    user_id = canonical_user_id(user_id, "(user_id, tokens) document")
    if isinstance(tokens, (str, bytes)) or not isinstance(tokens, Sequence):
        raise InvalidRecordError(
            f"tokens (field 1) must be a sequence of str, got {a_type(tokens)}")
    return user_id, checked_tokens(tokens, "a document (field 1)")


def element_document(element, seed: int | None = None) -> tuple:
    """One element of ``privacy_unit="element"`` input (a list of one person's str tokens)
    → (element id, tuple of tokens). The id, never written, only orders the element and
    seeds its samples: 128 bits of OS randomness, or with a test-only ``seed`` a hash."""
    tokens = element_tokens(element)
    return (hashing.random_id128() if seed is None
            else hashing.stable_hash64(("document", tokens))), tokens


def element_tokens(element) -> tuple:
    """``element_document`` without the id: the checked tokens, as a tuple of str."""
    if not isinstance(element, list):  # a Tokenizer's Tokens too
        hint = ""
        if isinstance(element, tuple):
            hint = ("; a tuple could be a (user_id, tokens) document: give each person's "
                    "tokens as a list, or use privacy_unit='user_id' for keyed documents")
        elif isinstance(element, (str, bytes)):
            hint = "; tokenise the text into a list of tokens first"
        raise InvalidRecordError("with privacy_unit='element' each element must be a list of "
                                 f"one person's tokens, got {a_type(element)}{hint}")
    return checked_tokens(element, "an element")
