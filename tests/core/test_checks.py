"""ParameterError: a bad parameter is named apart from its problem, the message as before."""

import pickle

import pytest

from beam_dpsu.core import checks, mechanisms
from beam_dpsu.core.budgets import Budget, BudgetAccountant, ZCDPBudget
from beam_dpsu.core.checks import ParameterError, ParameterTypeError
from beam_dpsu.core.counts_budget import split_selection_and_counts
from beam_dpsu.core.max_items_choice import AutoMaxItems
from beam_dpsu.core.ngram_parameters import NgramParameters


@pytest.mark.parametrize("make, param, message", [
    (lambda: Budget(1.0, 2.0), "delta", "delta must satisfy 0 <= delta < 1, got 2.0"),
    (lambda: Budget(0, 1e-6), "epsilon", "epsilon must be a finite number > 0, got 0.0"),
    (lambda: ZCDPBudget(-1.0), "rho", "rho must be a finite number > 0, got -1.0"),
    (lambda: mechanisms.WeightedGaussian(0), "max_items_per_user",
     "max_items_per_user must be >= 1, got 0"),
    (lambda: split_selection_and_counts(Budget(1.0, 1e-6), 1.5), "counts_share",
     "counts_share must lie strictly between 0 and 1, got 1.5"),
    (lambda: mechanisms.PolicyLaplace(alpha=-1), "alpha",
     "alpha must be a finite number >= 0, got -1.0"),
    (lambda: mechanisms.SIPS(rounds=0), "rounds", "rounds must be an int >= 1, got 0"),
])
def test_errors_name_the_parameter(make, param, message):
    with pytest.raises(ParameterError) as raised:
        make()
    assert raised.value.param == param and str(raised.value) == message
    assert raised.value.leads_with_param
    assert raised.value.naming(f"--{param}") == f"--{param}" + message[len(param):]


@pytest.mark.parametrize("make", [
    lambda data: BudgetAccountant(data),
    lambda data: split_selection_and_counts(data, 0.5),
    lambda data: mechanisms.WeightedGaussian().calibrate(data),
])
def test_an_argument_of_the_wrong_kind_is_named_by_its_type_never_echoed(make):
    # Records passed where a budget goes (an easy slip) must not land in the error.
    records = [("alice@example.com", "a private diagnosis")]
    with pytest.raises(ParameterTypeError) as raised:
        make(records)
    assert str(raised.value).endswith("got a list") and "alice" not in str(raised.value)
    with pytest.raises(ParameterTypeError, match=r"got 0\.5$"):  # a number is shown
        make(0.5)


RECORDS = [("alice@example.com", "a private diagnosis")]


@pytest.mark.parametrize("make", [
    lambda: mechanisms.SIPS(rounds=RECORDS),
    lambda: mechanisms.SIPS(removal=RECORDS),
    lambda: mechanisms.SIPS(ratio="alice@example.com"),
    lambda: mechanisms.mechanism_from_name(tuple(RECORDS)),
    lambda: NgramParameters(max_n=RECORDS),
    lambda: NgramParameters(max_n=2, seed=RECORDS),
    lambda: NgramParameters(max_n=3, max_items_per_user=RECORDS * 2),
    lambda: NgramParameters(max_n=2, noise_schedule=RECORDS),
    lambda: NgramParameters(max_n=2, eta="alice@example.com"),
    lambda: NgramParameters(max_n=2, alpha="alice@example.com"),
    lambda: NgramParameters(max_n=2, pruning=RECORDS),
    lambda: NgramParameters(max_n=2, pre_threshold=RECORDS),
    lambda: checks.optional_integer("hot_key_fanout", RECORDS),
    lambda: checks.privacy_unit(RECORDS),
])
def test_no_parameter_error_echoes_a_value_that_may_be_data(make):
    # A value of the wrong type is shown by its type; only numbers, and names (str) where
    # a name goes, are shown as given.
    with pytest.raises(ValueError) as raised:
        make()
    assert isinstance(raised.value, ParameterError) and "alice" not in str(raised.value)


def test_type_errors_stay_type_errors():
    with pytest.raises(ParameterTypeError) as raised:
        Budget("1", 1e-6)
    assert isinstance(raised.value, TypeError) and raised.value.param == "epsilon"
    assert str(raised.value) == "epsilon must be a number, got a str"


def test_worded_messages_keep_their_text_and_name_the_parameter():
    with pytest.raises(ParameterError) as raised:
        Budget(1.0, 1e-6).split([])
    assert str(raised.value) == "split needs at least one weight, got none"
    assert raised.value.param == "weights" and not raised.value.leads_with_param
    assert raised.value.naming("--weights") == "split needs at least one weight, got none"
    with pytest.raises(ParameterError) as raised:
        AutoMaxItems(candidates=(0,))
    assert raised.value.param == "candidates"
    assert str(raised.value) == "each candidate max_items_per_user must be >= 1, got 0"


def test_errors_survive_pickling():
    for error in (ParameterError("delta", "must lie strictly between 0 and 1, got 2.0"),
                  ParameterTypeError("epsilon", "must be a number, got a str"),
                  ParameterError.worded("weights", "split needs at least one weight, got none")):
        copy = pickle.loads(pickle.dumps(error))
        assert (type(copy), copy.param, copy.problem, str(copy)) == (
            type(error), error.param, error.problem, str(error))


def test_strict_and_loose_numbers():
    with pytest.raises(ParameterTypeError):
        checks.positive("sigma", True)
    assert checks.positive("sigma", True, strict=False) == 1.0  # float() takes a bool


@pytest.mark.parametrize("name,auto,not_private", [
    ("weighted-gaussian", "auto", "policy-gaussian-l1"),
    ("Weighted-Gaussian", "Auto", "Policy-Gaussian-L1"),
    (" WEIGHTED-GAUSSIAN ", " AUTO ", " POLICY-GAUSSIAN-L1 ")])
def test_names_are_read_ignoring_case_and_surrounding_spaces(name, auto, not_private):
    # One rule for every name a user gives, as "auto" already was: case and spaces ignored.
    from beam_dpsu.core.max_items_choice import check_max_items_or_auto
    assert mechanisms.mechanism_from_name(name) == mechanisms.WeightedGaussian()
    assert isinstance(check_max_items_or_auto(auto), AutoMaxItems)
    with pytest.raises(ParameterError, match="not differentially private"):
        mechanisms.mechanism_from_name(not_private)


@pytest.mark.parametrize("spell", [str.title, lambda name: f" {name.upper()} "],
                         ids=["title", "upper-spaced"])
def test_algorithm_names_of_the_library_are_read_as_mechanism_names_are(spell):
    # pruning, level1 and SIPS's removal name algorithms: read as mechanism names are.
    from beam_dpsu.core import kgrams
    from beam_dpsu.core.ngram_parameters import NgramParameters
    params = NgramParameters(3, pruning=spell("single"), level1=spell("policy-gaussian"))
    assert (params.pruning, params.level1) == ("single", "policy-gaussian")
    assert params == NgramParameters(3, pruning="single", level1="policy-gaussian")
    sips = mechanisms.SIPS(removal=spell("join"))
    assert sips.removal == "join" and sips == mechanisms.SIPS(removal="join")
    previous, unigrams = [("a", "b"), ("b", "c")], [("a",), ("b",), ("c",)]
    assert kgrams.valid_kgram_count(previous, unigrams, spell("single")) == 6
    sampler = kgrams.ValidKgramSampler(previous, unigrams, spell("single"))
    assert sampler.size == 6
    # An unknown name is refused as it was given.
    with pytest.raises(ParameterError, match="pruning must be one of .*got 'Sometimes'"):
        NgramParameters(3, pruning="Sometimes")
    with pytest.raises(ParameterError, match="removal must be 'side_input' or 'join', "
                                             "got 'Joins'"):
        mechanisms.SIPS(removal="Joins")
