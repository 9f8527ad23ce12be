"""The one set of parameter validators, and the error they raise.

A :class:`ParameterError` names the parameter apart from the problem, so a job can print
it with its flag's name. Errors show parameter values, never records (``a_type`` where a
value could be data). Docs: docs/explanation/bounding.md#parameter-checks.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction
from typing import Any, Collection

import numpy as np

__all__ = ["a_type", "shown", "plural", "ParameterError", "ParameterTypeError", "number",
           "loose_number", "positive", "non_negative", "probability", "probability_or_zero",
           "ratio", "integer", "optional_integer", "at_least", "max_items", "MAX_ITEMS_LIMIT",
           "seed", "user_size", "public_count", "one_of", "canonical_name", "one_name_of",
           "PRIVACY_UNITS", "privacy_unit", "instance", "field_name", "exact_positive",
           "exact_non_negative", "split_weights", "require_delta", "tight_part", "no_tight_part"]


def a_type(value) -> str:
    """``value``'s type name with its article: "an int", "a str", "an ndarray"."""
    name = type(value).__name__
    # By sound: "an int", "an ndarray" (en-dee-array), "a uint8", "a str".
    return ("an " if name.lower().startswith(("a", "e", "i", "o", "nd")) else "a ") + name


def plural(n: int, noun: str) -> str:
    """``n`` and ``noun`` agreeing in number: "1 budget", "2 budgets", "1,200 n-grams"."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


_REALS = (int, float, np.integer, np.floating)
_INTS = (int, np.integer)


def shown(value, *, names: bool = False) -> str:
    """``value`` as an error shows it: a number, bool or None (with ``names``, a str too)
    as it is, anything else by its type (a value in the wrong place may be data)."""
    if value is None or isinstance(value, _REALS) or (names and isinstance(value, str)):
        return repr(value)
    return a_type(value)


class ParameterError(ValueError):
    """A bad parameter: ``param`` names it, ``problem`` says what is wrong.

    ``str(error)`` is ``f"{param} {problem}"``, or the message given to :meth:`worded`.
    """

    def __init__(self, param: str, problem: str, message: str | None = None):
        super().__init__(f"{param} {problem}" if message is None else message)
        self.param = param
        self.problem = problem
        self.message = message

    @classmethod
    def worded(cls, param: str, message: str) -> "ParameterError":
        """An error about ``param`` whose message (its ``str()``) does not start with its name."""
        return cls(param, message, message)

    @property
    def leads_with_param(self) -> bool:
        """Whether the message is ``f"{param} {problem}"`` (not :meth:`worded`)."""
        return self.message is None

    def naming(self, name: str) -> str:
        """The message with the parameter called ``name`` (its flag); a worded one whole."""
        return f"{name} {self.problem}" if self.leads_with_param else str(self)

    def __reduce__(self):  # keeps param and problem through pickling (Beam workers)
        return (type(self), (self.param, self.problem, self.message))


class ParameterTypeError(ParameterError, TypeError):
    """A parameter of the wrong type (a TypeError too, as Python's own are)."""


def _error(param: str, label: str, problem: str, cls=ParameterError) -> ParameterError:
    """``label``: how the message names ``param`` ("each candidate max_items_per_user")."""
    if label == param:
        return cls(param, problem)
    return cls.worded(param, f"{label} {problem}")


def number(name: str, value: Any, types: tuple = _REALS) -> float:
    """A real number (not a bool; one of ``types``), as a float."""
    if isinstance(value, bool) or not isinstance(value, types):
        raise ParameterTypeError(name, f"must be a number, got {shown(value)}")
    return float(value)


def loose_number(name: str, value: Any) -> float:
    """``value`` as a float: anything ``float()`` reads (``"0.5"`` too)."""
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ParameterTypeError(name, f"must be a number, got {shown(value)}") from None


def _real(name: str, value: Any, strict: bool) -> float:
    return number(name, value) if strict else loose_number(name, value)


def positive(name: str, value: Any, *, strict: bool = True) -> float:
    """A finite number > 0."""
    value = _real(name, value, strict)
    if not math.isfinite(value) or value <= 0:
        raise ParameterError(name, f"must be a finite number > 0, got {value!r}")
    return value


def non_negative(name: str, value: Any, *, strict: bool = True) -> float:
    """A finite number >= 0."""
    value = _real(name, value, strict)
    if not math.isfinite(value) or value < 0:
        raise ParameterError(name, f"must be a finite number >= 0, got {value!r}")
    return value


def probability(name: str, value: Any, *, strict: bool = True, types: tuple = _REALS,
                show_given: bool = False) -> float:
    """A number strictly between 0 and 1; ``show_given``: the message shows it as given."""
    given = value
    value = number(name, value, types) if strict else loose_number(name, value)
    if not 0.0 < value < 1.0:
        raise ParameterError(name, "must lie strictly between 0 and 1, got "
                                   f"{shown(given if show_given else value)}")
    return value


def probability_or_zero(name: str, value: Any) -> float:
    """A number with 0 <= value < 1 (a budget's δ: 0 is a pure budget)."""
    value = number(name, value)
    if not 0.0 <= value < 1.0:
        raise ParameterError(name, f"must satisfy 0 <= {name} < 1, got {value!r}")
    return value


def ratio(name: str, value: Any) -> float:
    """A number with 0 < value <= 1, converted by ``float()``."""
    value = loose_number(name, value)
    if not 0.0 < value <= 1.0:
        raise ParameterError(name, f"must satisfy 0 < {name} <= 1, got {value!r}")
    return value


def exact_positive(name: str, value: Any) -> Fraction:
    """An int, Fraction or finite float > 0, as the exact Fraction it is."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Rational, float, np.floating)):
        raise ParameterTypeError(name, f"must be a number, got {shown(value)}")
    if isinstance(value, (float, np.floating)) and not math.isfinite(value):
        raise ParameterError(name, f"must be a finite number > 0, got {value!r}")
    exact = Fraction(value) if not isinstance(value, np.floating) else Fraction(float(value))
    if exact <= 0:
        raise ParameterError(name, f"must be a finite number > 0, got {value!r}")
    return exact


def exact_non_negative(name: str, value: Any) -> Fraction:
    """An int, Fraction or finite float >= 0, as the exact Fraction it is."""
    if isinstance(value, bool) or not isinstance(value, (numbers.Rational, float)):
        raise ParameterTypeError(name, f"must be a number, got {shown(value)}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ParameterError(name, f"must be a finite number >= 0, got {value!r}")
    exact = Fraction(value)
    if exact < 0:
        raise ParameterError(name, f"must be a finite number >= 0, got {exact!r}")
    return exact


def integer(name: str, value: Any, low: int = 1, types: tuple = _INTS) -> int:
    """An int (not a bool; one of ``types``) >= ``low``."""
    if isinstance(value, bool) or not isinstance(value, types) or value < low:
        raise ParameterError(name, f"must be an int >= {low}, got {shown(value)}")
    return int(value)


def optional_integer(name: str, value: Any) -> int | None:
    """None, or an int >= 1."""
    if value is not None and (not isinstance(value, int) or value < 1):
        raise ParameterError(name, f"must be None or an int >= 1, got {shown(value)}")
    return value


def at_least(name: str, value: Any, low: int) -> Any:
    """``value`` unchanged if it is >= ``low`` (no type check)."""
    if value < low:
        raise ParameterError(name, f"must be >= {low}, got {value!r}")
    return value


# The largest Δ0 accepted: a signed 64-bit int, as Beam's and numpy's int coders hold it.
MAX_ITEMS_LIMIT = 2 ** 63 - 1


def max_items(value: Any, label: str = "max_items_per_user", param: str | None = None) -> int:
    """Δ0: an int with 1 <= Δ0 <= 2**63 - 1, called ``label``, the error's ``param`` (default)."""
    param = label if param is None else param
    if isinstance(value, bool) or not isinstance(value, _INTS):
        raise _error(param, label, f"must be an int, got {shown(value)}", ParameterTypeError)
    if value < 1:
        raise _error(param, label, f"must be >= 1, got {value!r}")
    if value > MAX_ITEMS_LIMIT:
        raise _error(param, label, f"must be at most 2**63 - 1, got {value!r}")
    return int(value)


def seed(value: Any) -> int | None:
    """A test-only seed: None (OS entropy) or a non-negative int."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, _INTS) or value < 0:
        raise ParameterError("seed", f"must be None or a non-negative int, got {shown(value)}")
    return int(value)


def user_size(num_items: Any) -> Any:
    """The number of items of a contributing user: at least 1."""
    if num_items < 1:
        raise ParameterError.worded(
            "num_items", f"a contributing user holds at least 1 item, got {num_items!r}")
    return num_items


def public_count(count: Any) -> Any:
    """A finite number >= 0 (NaN would make GW-KT's top-Δ0 lists depend on processing order)."""
    if (isinstance(count, bool) or not isinstance(count, _REALS)
            or not math.isfinite(count) or count < 0):
        raise ParameterError.worded(
            "public_counts", "a public count (field 1 of an (item, count) pair) must be a finite "
            f"number >= 0, got {a_type(count)}"
            + (" that is NaN, infinite or below 0" if isinstance(count, (int, float)) else ""))
    return count


def canonical_name(value: Any) -> Any:
    """A name read case- and space-insensitively (library and flags alike); a non-str as is."""
    return value.strip().lower() if isinstance(value, str) else value


def one_of(name: str, value: Any, choices: Collection, described: str | None = None) -> Any:
    """``value`` if it is one of ``choices``; the message lists them, or says ``described``."""
    if value not in choices:
        wanted = described if described is not None else f"one of {choices}"
        raise ParameterError(name, f"must be {wanted}, got {shown(value, names=True)}")
    return value


def one_name_of(name: str, value: Any, choices: Collection, described: str | None = None) -> Any:
    """``canonical_name(value)`` if one of ``choices``; the message shows ``value`` as given."""
    read = canonical_name(value)
    if read not in choices:
        wanted = described if described is not None else f"one of {choices}"
        raise ParameterError(name, f"must be {wanted}, got {shown(value, names=True)}")
    return read


# The unit of privacy: a user id (its elements merged before bounding), or an element.
PRIVACY_UNITS = ("user_id", "element")


def privacy_unit(value: Any) -> str:
    """``privacy_unit``: one of ``PRIVACY_UNITS``; raises naming the choices."""
    return one_of("privacy_unit", value, list(PRIVACY_UNITS))


def instance(name: str, value: Any, types, described: str) -> Any:
    """``value`` if an instance of ``types``; else an error showing it (``shown``)."""
    if not isinstance(value, types):
        raise ParameterTypeError(name, f"must be {described}, got {shown(value)}")
    return value


def field_name(name: Any, arg: str) -> str:
    """A field name: a non-empty str (``arg`` is the argument that gave it)."""
    if not isinstance(name, str) or not name:
        raise ParameterTypeError(arg, f"must be a non-empty str naming a field, got {a_type(name)}")
    return name


def split_weights(weights) -> np.ndarray:
    """Split weights: at least one, each finite and > 0; returned normalised."""
    w = np.asarray(list(weights), dtype=float)
    if w.size == 0:
        raise ParameterError.worded("weights", "split needs at least one weight, got none")
    if not np.all(np.isfinite(w)) or np.any(w <= 0):
        raise ParameterError.worded(
            "weights", f"split weights must be finite and > 0, got {list(weights)!r}")
    return w / w.sum()


def require_delta(budget, what: str):
    """``budget`` if its δ > 0, else an error naming ``what`` (no set-union mechanism is pure)."""
    if budget.delta <= 0.0:
        raise ParameterError.worded(
            "delta", f"{what} needs delta > 0: selecting items is never pure differential "
            "privacy (an item held by one user must be released with probability at most "
            f"delta), got a pure budget {budget.to_dict()}")
    return budget


def tight_part(what: str, given, bound_to) -> None:
    """Refuses a tight split's part used with another mechanism or Δ0 than its own."""
    if bound_to is not None and given != bound_to:
        raise ParameterError.worded("budget", f"{_TIGHT_PART}{what} {bound_to!r}, not "
                                    f"{given!r}: {_AS_COMPUTED}; split again for this {what}, "
                                    "or use composition='basic'")


def no_tight_part(budget, transform: str) -> None:
    """Refuses any part of a tight split for ``transform`` (docs/privacy.md, "Selection plus
    counts")."""
    for attribute, what in (("for_mechanism", "mechanism"),
                            ("for_max_items_per_user", "max_items_per_user")):
        bound_to = getattr(budget, attribute, None)
        if bound_to is not None:
            raise ParameterError.worded(
                "budget", f"{_TIGHT_PART}{what} {bound_to!r}, not for {transform}: "
                          f"{_AS_COMPUTED}; split with composition='basic' for {transform}")


_TIGHT_PART = ("this budget is one part of a tight split (split_selection_and_counts("
               "composition='tight')) computed for ")
_AS_COMPUTED = "the two parts compose to the total only as computed"
