"""Schema'd input: SelectItems, ExtractNgrams and CountReleased read named fields.

Rows, NamedTuples and dicts with ``user_field`` and ``item_field`` /
``item_list_field`` / ``tokens_field`` must give, under a seed, exactly the
release of the same data as tuples (every draw is derived from the seed and
the user or item, not from the input's form), bound a user spread over many
rows once, and fail with errors naming the field, never a value.
"""

import collections
import typing

import apache_beam as beam
import numpy as np
import pytest
from tests.support.one_pipeline import run_cases
from tests.support.runner import TestPipeline

from beam_dpsu import (Budget, CountReleased, ExtractNgrams, InvalidRecordError, SelectItems,
                       WeightedGaussian, WeightedLaplace, ZCDPBudget)
from beam_dpsu.beam.fields import _ReadFields, input_fields

pytestmark = pytest.mark.pipeline

SELECT = (WeightedGaussian(3), ZCDPBudget(0.5, 1e-3))  # threshold ≈ 4.09, σ = 1
EXACT = Budget(1e6)  # counts: P[any nonzero noise] < 1e-20 000 (tests/test_counts.py)
HUGE = Budget(epsilon=1e6, delta=0.4)  # selection noise ~1e-6: the threshold rule


class Review(typing.NamedTuple):
    author: str
    words: typing.List[str]


class Occurrence(typing.NamedTuple):
    author: str
    word: str


def pairs() -> list:
    """70 users with 2..6 distinct items each (Δ0 = 3 samples some), items held by
    8..11 users: near the threshold, so a seeded release is a mix that a different
    sample or noise draw would change."""
    return [(f"u{u}", f"w{(u + 3 * j) % 30}") for u in range(70) for j in range(u % 5 + 2)]


def records() -> list:
    """The same data as (user, items) records, each user split over rows of ≤ 2 items."""
    by_user: dict = {}
    for user, item in pairs():
        by_user.setdefault(user, []).append(item)
    return [(user, items[i:i + 2]) for user, items in by_user.items()
            for i in range(0, len(items), 2)]


def as_rows(elements, make) -> list:
    return [make(user, value) for user, value in elements]


def row(user, value, value_name="word"):
    return beam.Row(**{"author": user, value_name: value})


FORMS = {
    "row": lambda name: (lambda user, value: row(user, value, name)),
    "dict": lambda name: (lambda user, value: {"author": user, name: value, "stars": 5}),
    "namedtuple": lambda name: (Occurrence if name == "word" else Review),
}


SELECT_FORMS = [("row", "item_list_field"), ("dict", "item_field"),
                ("namedtuple", "item_list_field"), ("namedtuple", "item_field")]


def select_input(arg):
    """The data as (user, item) pairs for ``item_field``, else as (user, items) records."""
    return (pairs(), "word") if arg == "item_field" else (records(), "words")


def extract_documents():
    docs = [(f"u{i}", ["the", "cat", "sat"][: 2 + i % 2]) for i in range(30)]
    return docs + [(f"u{i}", ["a", "dog", "sat"]) for i in range(12)]  # near the thresholds


def spread_select():
    # Δ0 = 1, so a user weighs at most 1 anywhere.
    return SelectItems(WeightedLaplace(1), HUGE, seed=1, user_field="author", item_field="word")


def _select_cases(p):
    # The tuple forms' seeded releases, each shared by the tests that compare with it.
    tuples = {arg: (p | f"Tuples {arg}" >> beam.Create(select_input(arg)[0])
                    | f"SelectTuples {arg}" >> SelectItems(*SELECT, seed=5))
              for arg in ("item_field", "item_list_field")}
    cases = {}
    for form, arg in SELECT_FORMS:
        elements, name = select_input(arg)
        label = f"{form} {arg}"
        cases[f"select {label}"] = {
            "tuples": tuples[arg],
            "fields": (p | f"Fields {label}" >> beam.Create(as_rows(elements, FORMS[form](name)))
                       | f"SelectFields {label}" >> SelectItems(*SELECT, seed=5,
                                                                user_field="author",
                                                                **{arg: name}))}
    cases["seeds"] = {5: tuples["item_field"],
                      6: (p | "Create6" >> beam.Create(pairs())
                          | "Select6" >> SelectItems(*SELECT, seed=6))}
    return cases


def _count_case(p):
    # Seeded noise and samples (Δ0 = 2 < the users' released items): equal counts.
    items = p | "Released" >> beam.Create(["w1", "w2", "w3", "w4", "w5", "w6"])
    from_tuples = (p | "Count Tuples" >> beam.Create(records())
                   | "CountTuples" >> CountReleased(items, Budget(1.0), max_items_per_user=2,
                                                    seed=3))
    rows = as_rows(records(), FORMS["dict"]("words"))
    from_fields = (p | "Count Fields" >> beam.Create(rows)
                   | "CountFields" >> CountReleased(items, Budget(1.0), max_items_per_user=2,
                                                    seed=3,
                                                    user_field="author",
                                                    item_list_field="words"))
    return {"tuples": from_tuples, "fields": from_fields}


def _count_ngrams_case(p):
    released = p | "Released ngrams" >> beam.Create([("the", "cat"), ("cat",)])
    one = (p | "One" >> beam.Create([row(f"u{i}", ["the", "cat"], "ngram") for i in range(3)])
           | "CountOne" >> CountReleased(released, EXACT, max_items_per_user=5, ngrams=True,
                                         user_field="author", item_field="ngram"))
    # A list of n-grams per row, a user over two rows: counted once per n-gram.
    many = (p | "Many" >> beam.Create([{"a": "u0", "g": [["the", "cat"], ("cat",)]},
                                       {"a": "u0", "g": [("cat",)]},
                                       {"a": "u1", "g": [("cat",)]}])
            | "CountMany" >> CountReleased(released, EXACT, max_items_per_user=5, ngrams=True,
                                           user_field="a", item_list_field="g"))
    return {"one": one, "many": many}


def _extract_case(p, form):
    docs, budget = extract_documents(), ZCDPBudget(0.3, 1e-5)
    return {"tuples": (p | f"Documents {form}" >> beam.Create([(u, tuple(t)) for u, t in docs])
                       | f"ExtractTuples {form}" >> ExtractNgrams(2, budget, 4, seed=2)),
            "fields": (p | f"Document fields {form}" >> beam.Create(
                           as_rows(docs, FORMS[form]("words")))
                       | f"ExtractFields {form}" >> ExtractNgrams(2, budget, 4, seed=2,
                                                                  user_field="author",
                                                                  tokens_field="words"))}


def _element_case(p):
    people = [[f"w{(u + j) % 12}" for j in range(u % 4 + 1)] for u in range(80)]
    rows = [beam.Row(words=tuple(items), n=len(items)) for items in people]
    docs = [[t for t in ["the", "cat", "sat"][: 1 + u % 3]] for u in range(40)]
    from_lists = (p | "Lists" >> beam.Create(people)
                  | "SelectLists" >> SelectItems(*SELECT, seed=4, privacy_unit="element"))
    from_rows = (p | "Rows" >> beam.Create(rows)
                 | "SelectRows" >> SelectItems(*SELECT, seed=4, privacy_unit="element",
                                               item_list_field="words"))
    ngrams = (p | "Docs" >> beam.Create([{"tokens": np.array(d)} for d in docs])
              | ExtractNgrams(2, ZCDPBudget(5.0, 1e-5), 3, privacy_unit="element",
                              tokens_field="tokens", seed=1))
    return {"tuples": from_lists, "fields": from_rows, "ngrams": ngrams}


def _many_rows_case(p, form):
    make = FORMS[form]("word")
    # "spread": one user in 50 rows (50 ≫ the threshold if each row were a user);
    # "shared": 3 users.
    rows = [make("spreader", "spread") for _ in range(50)]
    rows += [make(f"u{i}", "shared") for i in range(3)]
    selected = p | f"Spread rows {form}" >> beam.Create(rows) | f"Spread {form}" >> spread_select()
    # The counts: the spreader's 10 rows × 4 released items count on Δ0 = 2 items once.
    many = [make("spreader", w) for _ in range(10) for w in "abcd"]
    counts = (p | f"Many rows {form}" >> beam.Create(many)
              | f"Count rows {form}" >> CountReleased(
                  p | f"Released abcd {form}" >> beam.Create(list("abcd")), EXACT,
                  max_items_per_user=2, user_field="author", item_field="word"))
    return {"selected": selected, "counts": counts}


@pytest.fixture(scope="module")
def released(tmp_path_factory):
    """Every release the tests below compare, built in ONE pipeline (module fixture; a
    TestPipeline per test cost a run each); each test reads its own case."""
    return run_cases(tmp_path_factory.mktemp("schema"), lambda p: {
        **_select_cases(p), "count": _count_case(p), "count ngrams": _count_ngrams_case(p),
        "extract row": _extract_case(p, "row"), "element": _element_case(p),
        "many rows row": _many_rows_case(p, "row")})


def assert_same_release(case, nonempty=True):
    """The case's two releases hold equal elements (a seeded release, byte for byte)."""
    left, right = sorted(case["tuples"]), sorted(case["fields"])
    assert left == right
    assert not nonempty or left  # an empty release would make this trivial


# --- the release is the tuple form's -----------------------------------------------------

@pytest.mark.parametrize("form,arg", SELECT_FORMS)
def test_select_items_from_fields_releases_what_tuples_release(released, form, arg):
    assert_same_release(released[f"select {form} {arg}"])


def test_the_release_checked_above_is_a_mix_that_a_seed_fixes(released):
    # Teeth for the equality above: the data's release is neither empty nor
    # everything, and another seed gives another set (seeded: deterministic).
    a, b = sorted(released["seeds"][5]), sorted(released["seeds"][6])
    assert 0 < len(a) < 30 and 0 < len(b) < 30 and a != b


def test_count_released_from_fields_counts_what_tuples_count(released):
    # Seeded noise and samples (Δ0 = 2 < the users' released items): equal counts.
    assert_same_release(released["count"])


def test_count_released_ngrams_from_fields(released):
    case = released["count ngrams"]
    assert sorted(case["one"]) == sorted([(("the", "cat"), 3), (("cat",), 0)])
    assert sorted(case["many"]) == sorted([(("the", "cat"), 1), (("cat",), 2)])


@pytest.mark.parametrize("form", ["row"])
def test_extract_ngrams_from_fields_releases_what_documents_release(released, form):
    assert_same_release(released[f"extract {form}"])


def test_element_privacy_unit_reads_the_item_list_field_alone(released):
    assert_same_release(released["element"])
    assert {("the",), ("the", "cat")} <= set(released["element"]["ngrams"])


# --- privacy: a user over many rows is one user -----------------------------------------

@pytest.mark.parametrize("form", ["row"])
def test_a_user_over_many_rows_is_merged_and_bounded_once(released, form):
    assert 1.0 < spread_select().calibration.release_threshold < 3.0
    case = released[f"many rows {form}"]
    assert sorted(case["selected"]) == ["shared"]
    # The counts: the spreader's 10 rows × 4 released items count on Δ0 = 2 items once.
    assert sum(count for _, count in case["counts"]) == 2


# --- errors --------------------------------------------------------------------------------

TRANSFORMS = {
    "SelectItems": lambda **kw: SelectItems(*SELECT, **kw),
    "CountReleased": lambda **kw: CountReleased(TestPipeline() | beam.Create(["a"]), EXACT,
                                                **kw),
    "ExtractNgrams": lambda **kw: ExtractNgrams(2, ZCDPBudget(1.0, 1e-5),
                                                **{("tokens_field" if k == "item_list_field"
                                                    else k): v for k, v in kw.items()}),
}


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
@pytest.mark.parametrize("kwargs,error,message", [
    ({"user_field": "a"}, ValueError, r"user_field needs .*field too"),
    ({"item_list_field": "w"}, ValueError, "needs user_field too"),
    ({"user_field": "a", "item_list_field": "w", "privacy_unit": "element"}, ValueError,
     "privacy_unit='element' .* has no user id: drop user_field"),
    ({"user_field": "a", "item_list_field": "a"}, ValueError, "name the same field 'a'"),
    ({"user_field": "", "item_list_field": "w"}, TypeError, "user_field must be a non-empty str"),
    ({"user_field": "a", "item_list_field": 3}, TypeError, "_field must be a non-empty str"),
])
def test_wrong_field_arguments_are_refused_at_construction(name, kwargs, error, message):
    with pytest.raises(error, match=message):
        TRANSFORMS[name](**kwargs)


def test_one_item_and_a_list_of_items_are_exclusive():
    with pytest.raises(ValueError, match="give one of item_field or item_list_field, not "
                                         "item_field and item_list_field"):
        SelectItems(*SELECT, user_field="a", item_field="w", item_list_field="ws")
    with pytest.raises(ValueError, match="all of one person's items: give them as a list "
                                         "with item_list_field"):
        SelectItems(*SELECT, item_field="w", privacy_unit="element")
    assert input_fields("user_id") is None  # no fields: tuple input, as before


@pytest.mark.parametrize("elements", [[("u", "a")], [["a", "b"]]])
def test_fields_with_tuple_or_list_input_are_refused_when_built(elements):
    with pytest.raises(TypeError, match=r"given named fields \(user_field='author', "
                                        r"item_list_field='words'\), but its input's elements "
                                        r"are (Tuple|List)\["):
        _ = (TestPipeline() | beam.Create(elements)
             | SelectItems(*SELECT, user_field="author", item_list_field="words"))


@pytest.mark.parametrize("elements,kind", [
    ([beam.Row(author="u", word="a", stars=5)], r"beam\.Row"),
    ([Occurrence("u", "a")], r"Occurrence \(NamedTuple\)"),
])
def test_a_schema_without_the_field_fails_when_built(elements, kind):
    # Before anything runs: the pipeline is only being built.
    with pytest.raises(InvalidRecordError,
                       match=rf"SelectItems: the input's elements \({kind}\) have no field "
                             rf"'wrod' \(item_field\); their fields: 'author', 'word'"):
        _ = (TestPipeline() | beam.Create(elements)
             | SelectItems(*SELECT, user_field="author", item_field="wrod"))


@pytest.mark.parametrize("element,kwargs,message", [
    ({"author": "secret-user", "text": "secret-item"}, {"item_field": "word"},
     r"^a dict has no key 'word' \(item_field\)( \[|$)"),
    ({"name": "secret-user", "word": "secret-item"}, {"item_field": "word"},
     r"^a dict has no key 'author' \(user_field\)( \[|$)"),
    # A dict keyed by data ({user_id: items}): its keys are user ids, never shown.
    ({"secret-user": ["secret-item"]}, {"item_field": "word"},
     r"^a dict has no key 'word' \(item_field\)( \[|$)"),
    # A defaultdict would make up an empty value for the missing key.
    (collections.defaultdict(list, author="secret-user"), {"item_list_field": "words"},
     r"^a defaultdict has no key 'words' \(item_list_field\)( \[|$)"),
    ({"author": None, "word": "secret-item"}, {"item_field": "word"},
     r"^field 'author' \(user_field\) of a dict is a missing user id \(None or empty\)"),
    ({"author": 1.5, "word": "secret-item"}, {"item_field": "word"},
     r"^field 'author' \(user_field\) of a dict must be a str, bytes, int or tuple of "
     r"these, got a float"),
    ({"author": "secret-user", "word": ["secret-item"]}, {"item_field": "word"},
     r"^field 'word' \(item_field\) of a dict must be one item \(str or bytes\), got a list; "
     "a list of items is read with item_list_field"),
    ({"author": "secret-user", "words": "secret item"}, {"item_list_field": "words"},
     r"^field 'words' \(item_list_field\) of a dict must be a list, tuple, set or array of "
     r"items, got a str; tokenise the text"),
    (("secret-user", "secret-item"), {"item_field": "word"},
     r"^with named fields each element must be a beam.Row, a NamedTuple or a dict, got a "
     r"tuple; a plain tuple or list is read without fields"),
])
def test_a_bad_element_fails_naming_the_field_never_a_value(element, kwargs, message):
    # Each element is checked as it is read, by the step SelectItems builds for its
    # fields (``_ReadFields``), here on its own; that its error reaches the pipeline's
    # caller whole, its text ending in the step's label: the test below (a pipeline
    # per element would cost a run each).
    select = SelectItems(*SELECT, user_field="author", **kwargs)
    with pytest.raises(InvalidRecordError, match=message) as raised:
        _ReadFields(select.fields)(element)
    assert "secret" not in str(raised.value)


def test_a_bad_element_fails_the_pipeline_naming_the_field_never_a_value():
    # A mix of types: Beam infers no schema, so each element is checked as it is read;
    # the runner raises the error itself, its text ending in the step's label. A dict
    # keyed by data ({user_id: items}): its keys are user ids, never shown.
    good = {"author": "u0", "word": "dog", "words": ["dog"]}
    with pytest.raises(InvalidRecordError,
                       match=r"^a dict has no key 'word' \(item_field\)( \[|$)") as raised:
        with TestPipeline() as p:
            _ = (p | beam.Create([good, {"secret-user": ["secret-item"]}],
                                 reshuffle=False).with_output_types(typing.Any)
                 | SelectItems(*SELECT, user_field="author", item_field="word"))
    assert "secret" not in str(raised.value)


def test_a_bad_row_names_beam_row_and_its_fields():
    rows = [beam.Row(author="u0", words=["secret-item"]),
            beam.Row(author="u1", words="secret text")]
    with pytest.raises(InvalidRecordError, match=r"^field 'words' \(tokens_field\) of a "
                                                 r"beam\.Row must be a list or tuple of str "
                                                 r"tokens \(in order\), got a str"):
        with TestPipeline() as p:
            _ = (p | beam.Create(rows).with_output_types(typing.Any)
                 | ExtractNgrams(2, ZCDPBudget(1.0, 1e-5), user_field="author",
                                 tokens_field="words"))


def test_a_user_field_is_keyed_by_its_text_as_tuple_input_is():
    # 5, "5" and b"5" in the user field are one person, as in (user_id, item) pairs.
    read = _ReadFields(input_fields("user_id", "user", item_list_field="items"))
    Review = collections.namedtuple("Review", ["user", "items"])
    ids = {read(element)[0] for element in (
        {"user": 5, "items": ["a"]}, {"user": "5", "items": ["b"]},
        Review(b"5", ["c"]), beam.Row(user=np.int64(5), items=["d"]))}
    assert ids == {"5"}
    with pytest.raises(InvalidRecordError, match=r"field 'user' \(user_field\) of a dict must "
                                                 r"be a str, bytes, int or tuple of these, got "
                                                 r"a float"):
        read({"user": 5.0, "items": ["a"]})
