"""records: UserItemsCoder gives back every record it writes, whatever its ids and
items, and the SIPS rounds' records between stages are coded with it."""

import apache_beam as beam
import numpy as np
from tests.support.runner import TestPipeline
from apache_beam.testing.util import assert_that, equal_to
from hypothesis import given, settings
from hypothesis import strategies as st

from beam_dpsu.beam import records
from beam_dpsu.beam.records import UserItems, UserItemsCoder
from tests.support.hypothesis_profiles import examples

import pytest

pytestmark = pytest.mark.pipeline

TEXT = st.text(alphabet=st.characters(blacklist_categories=()), min_size=0, max_size=6)
USER_ID = st.one_of(st.integers(-2 ** 130, 2 ** 130), TEXT, st.binary(max_size=8),
                    st.tuples(TEXT, st.integers(0, 9)), st.booleans())
ITEMS = st.one_of(st.lists(TEXT, max_size=8, unique=True),  # NULs and lone surrogates
                  st.lists(st.one_of(TEXT, st.binary(max_size=5)), max_size=8, unique=True))


@settings(max_examples=examples(500), deadline=None)
@given(USER_ID, ITEMS)
def test_every_record_comes_back_equal_with_its_types(user_id, items):
    coder = UserItemsCoder()
    record = UserItems(user_id, tuple(items))
    back = coder.decode(coder.encode(record))
    assert isinstance(back, UserItems)
    assert back == record
    assert type(back[0]) is type(user_id)
    assert [type(i) for i in back[1]] == [type(i) for i in items]


def test_plain_str_items_are_one_joined_string_and_random_ids_16_bytes():
    coder = UserItemsCoder()
    data = coder.encode(UserItems((1 << 127) + 5, ("ab", "é", "\ud800")))
    assert data == b"\x00" + ((1 << 127) + 5).to_bytes(16, "big") + b"j" + \
        "ab\x00é\x00\ud800".encode("utf-8", "surrogatepass")
    # An item holding NUL, a bytes item, no items: pickled.
    for items in (("a\x00b", "c"), ("a", b"b"), ()):
        data = coder.encode(UserItems("u", items))
        assert data[:6] == b"\x01\x00\x00\x00\x01u"  # a str id: its length and UTF-8
        assert data[6:7] == b"p" and coder.decode(data) == ("u", items)


def test_numpy_str_items_come_back_as_plain_str():
    coder = UserItemsCoder()
    items = tuple(np.array(["x", "yz"]))
    back = coder.decode(coder.encode(UserItems(7, items)))
    assert back == (7, ("x", "yz")) and all(type(i) is str for i in back[1])


def test_the_registry_gives_pcollections_typed_user_items_this_coder():
    assert isinstance(beam.coders.registry.get_coder(UserItems), UserItemsCoder)
    assert UserItemsCoder() == UserItemsCoder()
    assert hash(UserItemsCoder()) == hash(UserItemsCoder())


def test_user_items_pickle_as_themselves():
    import pickle
    record = UserItems("u", ("a", "b"))
    back = pickle.loads(pickle.dumps(record))
    assert type(back) is UserItems and back == record


def test_records_written_between_stages_go_through_the_coder(monkeypatch):
    # A side input forces a stage boundary, as between SIPS rounds.
    coded = []
    encode = UserItemsCoder.encode
    monkeypatch.setattr(UserItemsCoder, "encode",
                        lambda self, r: coded.append(r) or encode(self, r))
    users = [UserItems(f"u{i}", tuple(f"w{j}" for j in range(i % 5))) for i in range(40)]
    with TestPipeline() as p:
        side = p | "Side" >> beam.Create(["w1"])
        kept = (p | beam.Create(users)
                | beam.Map(lambda r, drop: UserItems(r[0], tuple(i for i in r[1] if i not in drop)),
                           drop=beam.pvalue.AsList(side)).with_output_types(UserItems)
                | beam.Map(lambda r: (r[0], len(r[1]))))
        assert_that(kept, equal_to([(u, max(0, len(items) - ("w1" in items)))
                                    for u, items in users]))
    assert coded and all(isinstance(r, UserItems) for r in coded)
    assert records.UserItemsCoder is UserItemsCoder
