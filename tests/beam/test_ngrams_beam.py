"""TestPipeline tests of ExtractNgrams and the DPSU baselines (the job: test_ngrams_job.py)."""

import logging
import pickle
import typing

import apache_beam as beam
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.runner import TestPipeline
from apache_beam.transforms.window import GlobalWindow
from apache_beam.typehints import typehints
from apache_beam.typehints.decorators import TypeCheckError

from beam_dpsu import Budget, InvalidRecordError, ZCDPBudget
from beam_dpsu.core.checks import ParameterError, ParameterTypeError
from beam_dpsu.core.kgrams import ValidKgramSampler
from beam_dpsu.core.tokenizer import Tokens, tokenize
from beam_dpsu.core.documents import check_document, element_tokens, plain_token
from beam_dpsu.beam.user_blocks import USERS_PER_BLOCK, PackUserBlocksFn
from beam_dpsu.extract_ngrams import ExtractNgrams
from beam_dpsu.ngram_baselines import NgramsByDPSU

from tests.support.hypothesis_profiles import examples
from tests.support.ngram_corpora import downward_closed, phrase_corpus
from tests.support.one_pipeline import run_cases

pytestmark = pytest.mark.pipeline

# The releases most tests below check, built in ONE pipeline (module fixture
# ``releases``; a TestPipeline per test cost seconds each); each test asserts on
# its own branch, and one on what the run logged. Tests that expect an error run
# their own.

ETAS = [0.01, 0.5]
BASELINES = [("dpsu-all", None), ("dpsu-even", None), ("dpsu-single", 2)]
LEVEL1S = ["weighted-gaussian", "policy-gaussian"]
SPURIOUS_DOCS = [(f"u{i}", (f"w{i % 8}",)) for i in range(800)]


def level_stats_extract():
    return ExtractNgrams(3, ZCDPBudget(1.0, 1e-5), max_items_per_user=[8, 6, 4],
                         noise_schedule=0.8, seed=4, non_private_stats=True)


def element_corpus():
    return [list(doc) for _, doc in phrase_corpus(n_users=120, seed=5)]


def seeded_element_extract(level1):
    return ExtractNgrams(3, Budget(2.0, 1e-5), max_items_per_user=2, seed=7, level1=level1,
                         privacy_unit="element")


def _pruning(p, eta):
    # At η = 0.5 many spurious k-grams are drawn.
    return (p | f"Create eta={eta}" >> beam.Create(phrase_corpus())
            | f"Extract eta={eta}" >> ExtractNgrams(4, Budget(3.0, 1e-5), max_items_per_user=6,
                                                    eta=eta))


def _level_stats(p):
    extract = level_stats_extract()
    released = p | "Create stats" >> beam.Create(phrase_corpus()) | "Extract stats" >> extract
    # Joined by k in the test.
    return {"dp": extract.level_stats, "raw": extract.non_private_level_stats,
            "released": released}


def _spurious(p):
    # pruning="single": V_2 = S_1 × S_1 under either rule; this case runs single
    # pruning's spurious draws.
    extract = ExtractNgrams(2, Budget(5.0, 1e-5), max_items_per_user=1, eta=0.9, seed=2,
                            non_private_stats=True, pruning="single")
    released = p | "Create spurious" >> beam.Create(SPURIOUS_DOCS) | "Extract spurious" >> extract
    return {"released": released, "raw": extract.non_private_level_stats,
            "dp": extract.level_stats}


def _baseline(p, variant, n):
    return (p | f"Create {variant}" >> beam.Create(phrase_corpus())
            | f"Select {variant}" >> NgramsByDPSU(variant, 3, Budget(3.0, 1e-5), 6, n=n))


def _timestamps(releases):
    # Held and spurious n-grams of two releases (see the test).
    return ((releases["spurious"]["released"], releases["eta=0.5"])
            | "Both stamped" >> beam.Flatten() | beam.ParDo(_Timestamp()) | beam.Distinct())


def _element_mode(p):
    # Unseeded, as in production: no element id is drawn, nothing is grouped.
    extract = ExtractNgrams(3, Budget(3.0, 1e-5), max_items_per_user=6, eta=0.01,
                            privacy_unit="element")
    return (p | "Create element" >> beam.Create([list(doc) for _, doc in phrase_corpus()])
            | "Extract element" >> extract)


def _element_policy(p):
    # A policy level 1 orders elements by their (random) ids (a weighted level 1 is
    # order-free): its own case.
    return (p | "Create element pg" >> beam.Create([list(doc) for _, doc in phrase_corpus()])
            | "Extract element pg" >> ExtractNgrams(
                3, Budget(3.0, 1e-5), max_items_per_user=6, level1="policy-gaussian",
                privacy_unit="element"))


def reversed_elements(level1):
    """The elements of ``element_corpus()`` in reverse order; for the default level 1
    (weighted-gaussian) as the tokenizer's output, so that one release is checked
    against the lists in their order both for the order and for the Tokens."""
    elements = element_corpus()[::-1]
    if level1 == "weighted-gaussian":
        return [tokenize(" ".join(doc)) for doc in elements]
    return elements


def _seeded_element(p, level1, order):
    elements = element_corpus() if order == "given" else reversed_elements(level1)
    return (p | f"Create {level1} {order}" >> beam.Create(elements)
            | f"Extract {level1} {order}" >> seeded_element_extract(level1))


class _LogMessages(logging.Handler):
    """Keeps the message of every record logged at INFO or above."""

    def __init__(self):
        super().__init__(logging.INFO)
        self.messages: list = []

    def emit(self, record):
        self.messages.append(record.getMessage())


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    cases = {**{f"eta={eta}": lambda p, eta=eta: _pruning(p, eta) for eta in ETAS},
             "level stats": _level_stats, "spurious": _spurious,
             **{v: lambda p, v=v, n=n: _baseline(p, v, n) for v, n in BASELINES},
             "element": _element_mode,
             "element policy": _element_policy,
             **{f"{level1} {order}": lambda p, l1=level1, o=order: _seeded_element(p, l1, o)
                for level1 in LEVEL1S for order in ("given", "reversed")}}
    # What the run logs at INFO (runners' workers log at INFO), as caplog.at_level would.
    root, log = logging.getLogger(), _LogMessages()
    level = root.level
    root.setLevel(logging.INFO)
    root.addHandler(log)
    def build_all(p):
        built = {name: build(p) for name, build in cases.items()}
        return {**built, "timestamps": _timestamps(built)}

    try:
        released = run_cases(tmp_path_factory.mktemp("ngrams"), build_all)
    finally:
        root.removeHandler(log)
        root.setLevel(level)
    return {**released, "log messages": log.messages}


@pytest.mark.parametrize("eta", ETAS)
def test_output_is_downward_closed_with_both_pruning(releases, eta):
    # At η = 0.5 many spurious k-grams are drawn; they too must keep the output
    # closed under subgrams (dpne Proposition 2.1). Unseeded: fails by chance w.p. 1.3e-77
    # (the held 3-gram ('the', 'dog', 'sat') and its 5 subgrams are each missed at their
    # level, ρ_k ≤ σΦ⁻¹(1 − η/9) for k ≥ 2; both cases).
    ngrams = releases[f"eta={eta}"]
    assert len(ngrams) == len(set(ngrams)), "an n-gram was released twice"
    assert downward_closed(ngrams), sorted(ngrams)
    assert any(len(g) == 3 for g in ngrams)


def test_level_stats_and_report(releases):
    report = level_stats_extract().report
    assert [lvl["max_items_per_user"] for lvl in report["levels"]] == [8, 6, 4]
    sigmas = [lvl["sigma"] for lvl in report["levels"]]
    assert sigmas[1] == pytest.approx(0.8 * sigmas[0])
    assert 1 / np.sqrt(sum(1 / s ** 2 for s in sigmas)) == pytest.approx(1 / np.sqrt(2.0))
    joined: dict = {}
    for part in ("dp", "raw"):
        for s in releases["level stats"][part]:
            joined.setdefault(s["k"], {"dp": [], "raw": []})[part].append(s)
    by_k = {k: (g["dp"][0], g["raw"][0]) for k, g in joined.items()}
    assert sorted(by_k) == [2, 3]
    assert by_k[2][0]["valid_kgrams"] == by_k[2][0]["previous_released"] ** 2
    for s, r in by_k.values():
        # The DP-safe stats hold no raw figure; the raw ones are opt-in.
        assert not {"support", "spurious", "released_from_users",
                    "expected_spurious"} & set(s)
        assert r["expected_spurious"] <= s["spurious_bound"] + 1e-12
        assert s["released"] == r["released_from_users"] + r["spurious"]
        assert r["support"] <= s["valid_kgrams"]


def test_spurious_kgrams_when_no_user_holds_a_valid_kgram(releases):
    # Every document is a single token: no user holds any 2-gram, so whatever
    # level 2 releases is spurious: drawn from V_2 = S_1 × S_1, never held.
    ngrams = releases["spurious"]["released"]
    unigrams = {g for g in ngrams if len(g) == 1}
    bigrams = {g for g in ngrams if len(g) == 2}
    assert len(unigrams) == 8
    assert bigrams, "η = 0.9 of |S_1| = 8 expects ~7 spurious bigrams"
    assert bigrams <= set(ValidKgramSampler(unigrams, unigrams).all())
    (s,) = releases["spurious"]["raw"]
    assert s["support"] == 0 and s["released_from_users"] == 0
    assert s["spurious"] > 0


@pytest.mark.parametrize("variant,n", BASELINES)
def test_dpsu_baselines(releases, variant, n):
    held = {g for _, doc in phrase_corpus() for k in range(1, 4)
            for g in [tuple(doc[i:i + k]) for i in range(len(doc) - k + 1)]}
    ngrams = releases[variant]
    # Unseeded: fails by chance w.p. < 1e-269 (nothing released only if the most held
    # unigram, or bigram for dpsu-single, is missed; dpsu-even's is the largest).
    assert ngrams and set(ngrams) <= held
    if variant == "dpsu-single":
        assert {len(g) for g in ngrams} == {2}


def test_extract_ngrams_validation():
    with pytest.raises(ValueError, match="max_items_per_user needs one value per level"):
        ExtractNgrams(3, Budget(1, 1e-5), max_items_per_user=[5, 5])
    with pytest.raises(ValueError, match="pruning must be one of"):
        ExtractNgrams(3, Budget(1, 1e-5), pruning="left")
    with pytest.raises(ValueError, match="eta must lie strictly between 0 and 1"):
        ExtractNgrams(3, Budget(1, 1e-5), eta=0)
    with pytest.raises(ValueError, match="noise_schedule must be 'equal' or a decay factor"):
        ExtractNgrams(3, Budget(1, 1e-5), noise_schedule="fast")
    with pytest.raises(ValueError, match="decay must be a finite number > 0"):
        ExtractNgrams(3, Budget(1, 1e-5), noise_schedule=-0.5)
    equal = ExtractNgrams(3, Budget(1, 1e-5))
    assert equal.sigmas == pytest.approx([equal.sigma_total * 3 ** 0.5] * 3)
    with pytest.raises(ValueError, match="dpsu-single needs 1 <= n <= max_n"):
        NgramsByDPSU("dpsu-single", 3, Budget(1, 1e-5))
    with pytest.raises(InvalidRecordError, match=r"token 1 of a document \(field 1\) must be a "
                                                 r"non-empty str, got an int"):
        with TestPipeline() as p:
            _ = p | beam.Create([("u", ("a", 3))]) | ExtractNgrams(2, Budget(1, 1e-5))


def test_parameter_errors_name_the_argument():
    # A job maps ``param`` to its flag; the message is the library's, unchanged.
    cases = [({"max_n": 0}, "max_n", "max_n must be an int >= 1, got 0"),
             ({"max_n": 101}, "max_n", "max_n must be at most 40 (each length is a stage of "
                                       "the pipeline), got 101"),
             ({"eta": 0}, "eta", "eta must lie strictly between 0 and 1, got 0"),
             ({"pruning": "left"}, "pruning",
              "pruning must be one of ('both', 'single'), got 'left'"),
             ({"level1": "sips"}, "level1", "level1 must be one of ('weighted-gaussian', "
                                            "'policy-gaussian'), got 'sips'"),
             ({"max_items_per_user": [5, 5]}, "max_items_per_user",
              "max_items_per_user needs one value per level (max_n = 3), got 2: [5, 5]"),
             ({"noise_schedule": "fast"}, "noise_schedule",
              "noise_schedule must be 'equal' or a decay factor c > 0, got 'fast'")]
    for kwargs, param, message in cases:
        with pytest.raises(ParameterError) as raised:
            ExtractNgrams(**{"max_n": 3, "budget": Budget(1, 1e-5), **kwargs})
        assert (raised.value.param, str(raised.value)) == (param, message)
    with pytest.raises(ParameterTypeError, match=r"^budget must be a Budget or ZCDPBudget"):
        ExtractNgrams(2, "1.0")
    with pytest.raises(ParameterError, match=r"^variant must be one of") as raised:
        NgramsByDPSU("dpsu-some", 3, Budget(1, 1e-5))
    assert raised.value.param == "variant"
    with pytest.raises(ParameterError) as raised:
        NgramsByDPSU("dpsu-single", 3, Budget(1, 1e-5), n=4)
    assert (raised.value.param, str(raised.value)) == (
        "n", "dpsu-single needs 1 <= n <= max_n, got n=4")


@pytest.mark.parametrize("make", [lambda: ExtractNgrams(2, Budget(1, 1e-5)),
                                  lambda: ExtractNgrams(2, Budget(1, 1e-5),
                                                        privacy_unit="element"),
                                  lambda: NgramsByDPSU("dpsu-even", 2, Budget(1, 1e-5))],
                         ids=["ExtractNgrams", "ExtractNgrams-element", "NgramsByDPSU"])
@pytest.mark.parametrize("elements", [[1, 2], [0.5], [None]], ids=["int", "float", "None"])
def test_a_wrongly_typed_input_fails_when_the_pipeline_is_built(make, elements):
    # Nothing runs: the input type hint refuses a PCollection of numbers (or None).
    p = beam.Pipeline()
    with pytest.raises(TypeCheckError, match="Input type hint violation"):
        _ = p | beam.Create(elements) | make()


class _Document(typing.NamedTuple):
    author: str
    words: typing.List[str]


@pytest.mark.parametrize("elements,kwargs", [
    ([("u", ("a", "b"))], {}),
    ([("u", ["a", "b"]), (7, np.array(["a"]))], {}),
    ([["a", "b"]], {"privacy_unit": "element"}),
    ([Tokens(["a", "b"])], {"privacy_unit": "element"}),
    ([("u", ("a",))], {"privacy_unit": "element"}),  # refused when run, naming the tuple
    (["the cat"], {"privacy_unit": "element"}),  # refused when run: tokenise first
    ([{"a", "b"}], {"privacy_unit": "element"}),  # refused when run: not a list
    ([beam.Row(author="u", words=["a"])], {"user_field": "author", "tokens_field": "words"}),
    ([_Document("u", ["a"])], {"user_field": "author", "tokens_field": "words"}),
    ([{"author": "u", "words": ["a"]}], {"user_field": "author", "tokens_field": "words"}),
    ([{"words": ["a"]}], {"privacy_unit": "element", "tokens_field": "words"}),
], ids=["documents", "lists-arrays-int-ids", "elements", "tokens", "element-tuple",
        "element-str", "element-set", "rows", "namedtuples", "dicts", "element-dicts"])
def test_every_input_form_passes_the_type_hint(elements, kwargs):
    # Built only: each form's elements are checked when they are read.
    p = beam.Pipeline()
    released = p | beam.Create(elements) | ExtractNgrams(2, Budget(1, 1e-5), **kwargs)
    assert released.element_type == typehints.Tuple[str, ...]


@settings(max_examples=examples(400), deadline=None)
@given(st.lists(st.one_of(st.sampled_from(["a", "b", "", " ", "a b", "c\t", "\u2003", "é"]),
                          st.integers(0, 3), st.sampled_from([np.str_("a"), b"a"])),
                max_size=6).map(tuple))
def test_check_document_accepts_exactly_non_empty_str_tokens_without_whitespace(tokens):
    # The fast path (one join and split) must agree with the per-token rule.
    ok = all(isinstance(t, str) and t and not any(c.isspace() for c in t) for t in tokens)
    if ok:
        user, checked = check_document(("u", tokens))
        assert checked == tuple(str(t) for t in tokens)
        assert all(type(t) is str for t in checked)
    else:
        with pytest.raises(InvalidRecordError, match=r"^token \d+ of a document \(field 1\)"):
            check_document(("u", tokens))


def test_a_token_of_a_str_subclass_is_the_text_it_holds():
    # Checked as the text it holds, so it is kept as that text, not as its own __str__
    # (which may hold whitespace, and so be two tokens once written).
    class Spaced(str):
        def __str__(self):
            return "two words"

    assert check_document(("u", (Spaced("one"), "b"))) == ("u", ("one", "b"))
    assert all(type(t) is str for t in check_document(("u", [Spaced("one")]))[1])


@pytest.mark.parametrize("tokens, position", [(("ok", "a\udc80b"), 1), (["\ud800"], 0)])
def test_tokens_holding_a_lone_surrogate_are_refused_naming_the_position(tokens, position):
    # UTF-8, which the writers use, cannot hold one: refused before anything is
    # noised (it passed selection and failed both writers after the release).
    with pytest.raises(InvalidRecordError, match=rf"^token {position} of a document \(field 1\) "
                                                 r"holds a lone surrogate") as raised:
        check_document(("u", tokens))
    assert "\udc80" not in str(raised.value) and "\ud800" not in str(raised.value)
    assert check_document(("u", ("é", "😀"))) == ("u", ("é", "😀"))
    assert not plain_token("a\udc80b") and plain_token("é")
    with pytest.raises(InvalidRecordError, match=r"^token 1 of an element holds a lone surrogate"):
        element_tokens(["ok", "a\udc80b"])


class _Timestamp(beam.DoFn):
    def process(self, gram, timestamp=beam.DoFn.TimestampParam):
        yield timestamp.micros // 1000  # runners carry timestamps in milliseconds


def test_held_and_spurious_ngrams_carry_one_timestamp(releases):
    # Spurious k-grams kept the timestamp of the Create they
    # are drawn from, held ones the end of the window: a consumer could tell
    # which were spurious. Two releases: "spurious" (seeded, so always the same: its 8
    # held unigrams and spurious bigrams of single pruning, nobody holding a bigram,
    # test_spurious_kgrams_when_no_user_holds_a_valid_kgram) and "eta=0.5" (held
    # n-grams up to 3-grams and spurious ones of both pruning; unseeded, its held
    # 3-gram is missed w.p. 1.3e-77, test_output_is_downward_closed_with_both_pruning).
    assert releases["timestamps"] == [GlobalWindow().max_timestamp().micros // 1000]


def test_blocking_users_logs_no_count_of_users(releases):
    # Beam.BatchElements logged "element_count=<users>" at
    # INFO after each bundle (runners' workers log at INFO). The levels'
    # blocks must not log anything that counts users: nothing the fixture's run
    # logged at INFO (every case blocks users, or elements) may.
    messages = releases["log messages"]
    assert messages, "nothing logged at INFO: the capture proves nothing"
    assert not any("element_count" in m or "BatchElements" in m for m in messages), messages


def test_users_are_blocked_once_each():
    from beam_dpsu.beam.user_blocks import PackUserBlocksFn
    fn = PackUserBlocksFn(3, keep_ids=True)
    fn.start_bundle()
    users = [(f"u{j}", (("a",) * (j % 4), ("b", "c"))) for j in range(7)]
    blocks = [b for u in users for b in fn.process(u)] + list(fn.finish_bundle())
    values = [pickle.loads(wv.value) for wv in blocks]
    assert [len(b.user_ids) for b in values] == [3, 3, 1]
    assert [u for b in values for u in b.user_ids] == [u for u, _ in users]
    # Each block holds its users' documents, in order.
    for block, first in zip(values, (0, 3, 6)):
        docs = np.split(np.array(block.vocab, dtype=object)[block.tokens],
                        np.cumsum(block.doc_lengths)[:-1])
        assert [tuple(d) for d in docs] == [doc for _, ds in users[first:first + 3]
                                            for doc in ds]
        assert block.doc_users.tolist() == [i for i in range(len(block.user_ids))
                                            for _ in range(2)]


# -- privacy_unit="element": each element is one person's only document -------------------


def test_element_mode_output_is_downward_closed_and_held(releases):
    # Unseeded, as in production: no element id is drawn, nothing is grouped.
    extract = ExtractNgrams(3, Budget(3.0, 1e-5), max_items_per_user=6, eta=0.01,
                            privacy_unit="element")  # the fixture's "element" case
    assert extract.report["privacy_unit"] == "element"
    assert extract.report["guarantee"].startswith("element-level")
    elements = [list(doc) for _, doc in phrase_corpus()]
    held = {tuple(doc[i:i + k]) for doc in elements for k in (1, 2)
            for i in range(len(doc) - k + 1)}
    ngrams = releases["element"]
    assert len(ngrams) == len(set(ngrams))
    assert downward_closed(ngrams)
    # Unseeded: fails by chance w.p. 3.4e-220 (the held ('the', 'dog', 'sat') and its
    # subgrams, each missed at its level; ρ_k ≤ σΦ⁻¹(1 − η/9) for k ≥ 2).
    assert any(len(g) == 3 for g in ngrams)
    # η = 0.01 of |S_1| ≤ 11 expects ≤ 0.11 spurious bigrams: some held one is there.
    assert {g for g in ngrams if len(g) == 1} <= held


@pytest.mark.parametrize("level1", LEVEL1S)
def test_seeded_element_mode_is_independent_of_input_order(releases, level1):
    first, second = releases[f"{level1} given"], releases[f"{level1} reversed"]
    assert first and sorted(first) == sorted(second)


def test_element_mode_takes_the_tokenizers_output_as_the_same_lists(releases):
    # Found when the Tokenizer began returning Tokens (a list subclass): the
    # element check took only exact lists and refused every tokenised text.
    elements = element_corpus()
    tokens = reversed_elements("weighted-gaussian")
    assert all(type(t) is Tokens for t in tokens) and tokens == elements[::-1]
    # The same seeded extraction (default level 1) on the lists and on the Tokens
    # (in reverse order: the release is independent of it, the test above).
    assert seeded_element_extract("weighted-gaussian").report == ExtractNgrams(
        3, Budget(2.0, 1e-5), max_items_per_user=2, seed=7, privacy_unit="element").report
    first, second = releases["weighted-gaussian given"], releases["weighted-gaussian reversed"]
    assert first and sorted(first) == sorted(second)


@pytest.mark.parametrize("element, message", [
    (("alice", ("a", "b")), r"got a tuple; a tuple could be a \(user_id, tokens\) document"),
    ("the cat sat", r"got a str; tokenise the text into a list of tokens first"),
    ({"a", "b"}, r"must be a list of one person's tokens, got a set"),
    (["a", 3], r"token 1 of an element must be a non-empty str, got an int"),
    (["secret token"], r"token 0 of an element contains whitespace"),
])
def test_element_mode_refuses_what_is_not_one_persons_tokens(element, message):
    # Unseeded, the step that reads each element is the blocking step, built as
    # ExtractNgrams builds it; its error reaching the pipeline's caller whole:
    # the test below (a run per element would cost a pipeline each).
    fn = PackUserBlocksFn(USERS_PER_BLOCK, keep_ids=False, elements=True)
    fn.start_bundle()
    with pytest.raises(InvalidRecordError, match=message) as raised:
        list(fn.process(element))
    assert "secret" not in str(raised.value) and "alice" not in str(raised.value)


def test_an_element_refused_when_run_fails_the_pipeline_with_that_error():
    with pytest.raises(InvalidRecordError, match=r"got a tuple; a tuple could be a "
                                                 r"\(user_id, tokens\) document") as raised:
        with TestPipeline() as p:
            _ = p | beam.Create([("alice", ("a", "b"))]) | ExtractNgrams(
                2, Budget(1, 1e-5), privacy_unit="element")
    assert "alice" not in str(raised.value)


def test_privacy_unit_is_validated():
    with pytest.raises(ValueError, match=r"privacy_unit must be one of \['user_id', 'element'\]"):
        ExtractNgrams(2, Budget(1, 1e-5), privacy_unit="row")


def test_unseeded_blocks_hold_no_user_id():
    # Only a seeded sample reads a user id: unseeded, the blocks every level
    # re-reads carry none.
    from beam_dpsu.beam.user_blocks import PackUserBlocksFn
    fn = PackUserBlocksFn(4, keep_ids=False)
    fn.start_bundle()
    users = [(f"user{j}", (("a", "b"),)) for j in range(3)]
    blocks = [b for u in users for b in fn.process(u)] + list(fn.finish_bundle())
    (block,) = [pickle.loads(wv.value) for wv in blocks]
    assert block.user_ids is None and block.vocab == ["a", "b"]
    # (each id whole: the block's class path, beam_dpsu.core.user_blocks…, holds "user")
    assert not any(user.encode() in blocks[0].value for user, _ in users)


def test_unseeded_element_mode_with_a_policy_gaussian_level1(releases):
    # A policy level 1 orders elements by their (random) ids (a weighted level 1 is
    # order-free): its own case.
    # Unseeded at α = 3: every unigram (≥ 108 of the 459 elements) stops at the
    # cutoff Γ = ρ_1 + 3σ and is missed with probability Φ(−3) = 1.3e-3; each held
    # bigram (≥ 105 holders, weight ≥ 50 against ρ_2 < 10, σ = 2.5) is missed but
    # with probability < 1e-50. No bigram is released only if a unigram of each of
    # the disjoint held pairs (a, dog), (ran, home), (the, cat), (sat, down) is
    # missed: (2Φ(−3))^4 = 5.3e-11, far below 1e-6.
    ngrams = releases["element policy"]
    assert len(ngrams) == len(set(ngrams)) and downward_closed(ngrams)
    assert any(len(g) == 2 for g in ngrams)


def test_element_blocks_end_at_the_token_cap_and_make_tokens_plain_str():
    from beam_dpsu.beam.user_blocks import PackUserBlocksFn
    fn = PackUserBlocksFn(100, keep_ids=False, max_tokens=5, elements=True)
    fn.start_bundle()
    elements = [["a", "b", "c"], [np.str_("b"), "d"], ["e"], ["a"]]
    blocks = [b for e in elements for b in fn.process(e)] + list(fn.finish_bundle())
    values = [pickle.loads(wv.value) for wv in blocks]
    assert [b.doc_lengths.tolist() for b in values] == [[3, 2], [1, 1]]
    assert all(type(t) is str for b in values for t in b.vocab)
    assert values[0].vocab == ["a", "b", "c", "d"] and values[0].user_ids is None


@pytest.mark.parametrize("element, message", [
    (["a", ["b"]], r"token 1 of an element must be a non-empty str, got a list"),
    (["a", ""], r"token 1 of an element must be a non-empty str, got an empty str"),
    (("a", "b"), r"got a tuple"),
])
def test_element_blocks_refuse_a_bad_element_by_position_and_type(element, message):
    from beam_dpsu.beam.user_blocks import PackUserBlocksFn
    fn = PackUserBlocksFn(100, keep_ids=False, elements=True)
    fn.start_bundle()
    list(fn.process(["a", "b"]))
    with pytest.raises(InvalidRecordError, match=message):
        list(fn.process(element))
