"""One person, one id: ``canonical_user_id`` makes ids of the same text one key.

The library groups, samples and orders users by the canonical id, so ``5``,
``"5"`` and ``b"5"`` must come out equal (one user, who can only contribute
less once merged), and an id that cannot be read as one text must be refused
naming its type, never its value.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beam_dpsu.core.user_records import (InvalidRecordError, canonical_user_id,
                                         plain_str_or_bytes)
from tests.support.hypothesis_profiles import examples
from tests.support.text_subclasses import EXAMPLES, OwnBytes, OwnStr


@pytest.mark.parametrize("spellings", [
    (5, "5", b"5", np.int64(5), np.uint8(5), np.str_("5")),
    (-12, "-12", b"-12"),
    (10 ** 30, str(10 ** 30)),
    ("u1", b"u1", np.bytes_(b"u1")),
    ("Zoë", "Zoë".encode("utf-8")),
    (("a", 1), ("a", "1"), (b"a", b"1")),
])
def test_ids_of_the_same_text_are_one_id(spellings):
    canonical = {canonical_user_id(s) for s in spellings}
    assert len(canonical) == 1
    (one,) = canonical
    assert type(one) in (str, tuple)


def test_a_str_id_is_itself():
    for user in ("u1", "", " x ", "\udcff", "05"):
        assert canonical_user_id(user) == user and type(canonical_user_id(user)) is str
    # Different texts stay different users: no stripping, no number parsing.
    assert len({canonical_user_id(u) for u in ("5", "05", " 5", "5.0", 5)}) == 4


def test_bytes_that_are_not_utf8_stay_bytes_no_str_spells_them():
    for raw in (b"\xff\xfe", b"\xed\xa0\x80", bytes(range(128, 144))):
        assert canonical_user_id(raw) == raw and type(canonical_user_id(raw)) is bytes
    # Not merged with the str a lenient decoding would give.
    assert canonical_user_id(b"\xff") != canonical_user_id(b"\xff".decode("utf-8",
                                                                           "surrogateescape"))


@pytest.mark.parametrize("user,kind", [
    (True, "a bool"), (np.bool_(False), "a bool"), (5.0, "a float"), (np.float64(1), "a float"),
    (None, "a NoneType"), ((), "a tuple"), (bytearray(b"u"), "a bytearray"), ([1], "a list"),
    (("a", 1.5), "a float"),
])
def test_ambiguous_ids_are_refused_naming_the_type(user, kind):
    with pytest.raises(InvalidRecordError, match=rf"user id \(field 0\) .* got {kind}"):
        canonical_user_id(user)


@settings(max_examples=examples(300), deadline=None)
@given(st.one_of(st.text(min_size=1), st.integers(), st.binary(min_size=1)))
def test_canonical_ids_are_idempotent_and_same_text_means_same_id(user):
    once = canonical_user_id(user)
    assert canonical_user_id(once) == once
    if isinstance(user, int):
        assert once == canonical_user_id(str(user)) == canonical_user_id(str(user).encode())
    if isinstance(user, str):
        try:
            encoded = user.encode("utf-8")
        except UnicodeEncodeError:
            return  # lone surrogates: no bytes spell it
        assert canonical_user_id(encoded) == once


@pytest.mark.parametrize("value,held", EXAMPLES)
def test_a_subclass_is_what_it_holds_not_its_own_str_or_bytes(value, held):
    # The one rule items are keyed by (bounding, KeepReleased, CountReleased): a
    # subclass's own __str__ / __bytes__ is never asked.
    plain = plain_str_or_bytes(value)
    assert plain == held and type(plain) is type(held)
    for value in ("a", b"a"):
        assert plain_str_or_bytes(value) is value


def test_a_user_id_of_a_subclass_is_the_id_its_text_is():
    for user, text in ((OwnStr("u1"), "u1"), (OwnBytes(b"u1"), "u1"),
                       (OwnBytes(b"\xff\x01"), b"\xff\x01"), ((OwnStr("a"), 1), ("a", "1"))):
        canonical = canonical_user_id(user)
        assert canonical == text and type(canonical) is type(text)
