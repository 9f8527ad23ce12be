"""The one set of parameter validators, and the error they raise.

Every check of a parameter of beam_dpsu is written once, here, and raises a
:class:`ParameterError` that names the parameter it concerns (``param``) apart
from what is wrong with it (``problem``). A library user reads
``"delta must lie strictly between 0 and 1, got 2.0"``; a job maps ``param``
to its flag and prints ``"--delta must lie strictly between 0 and 1, got 2.0"``
without rewording the message.

Errors never echo personal data: they show parameter values, which are the
caller's, never records.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

_REALS = (int, float, np.integer, np.floating)
_INTS = (int, np.integer)


class ParameterError(ValueError):
    """A bad parameter: ``param`` names it, ``problem`` says what is wrong.

    ``str(error)`` is ``f"{param} {problem}"``.
    """

    def __init__(self, param: str, problem: str):
        super().__init__(f"{param} {problem}")
        self.param = param
        self.problem = problem

    def __reduce__(self):  # keeps param and problem through pickling (Beam workers)
        return (type(self), (self.param, self.problem))


class ParameterTypeError(ParameterError, TypeError):
    """A parameter of the wrong type (a TypeError too, as Python's own are)."""


def number(name: str, value: Any) -> float:
    """A real number (not a bool), as a float."""
    if isinstance(value, bool) or not isinstance(value, _REALS):
        raise ParameterTypeError(name, f"must be a number, got {value!r}")
    return float(value)


def positive(name: str, value: Any) -> float:
    """A finite number > 0."""
    value = number(name, value)
    if not math.isfinite(value) or value <= 0:
        raise ParameterError(name, f"must be a finite number > 0, got {value!r}")
    return value


def non_negative(name: str, value: Any) -> float:
    """A finite number >= 0."""
    value = number(name, value)
    if not math.isfinite(value) or value < 0:
        raise ParameterError(name, f"must be a finite number >= 0, got {value!r}")
    return value


def probability(name: str, value: Any) -> float:
    """A number strictly between 0 and 1 (a δ, a share)."""
    value = number(name, value)
    if not 0.0 < value < 1.0:
        raise ParameterError(name, f"must lie strictly between 0 and 1, got {value!r}")
    return value


def integer(name: str, value: Any, low: int = 1) -> int:
    """An int (not a bool) >= ``low``."""
    if isinstance(value, bool) or not isinstance(value, _INTS) or value < low:
        raise ParameterError(name, f"must be an int >= {low}, got {value!r}")
    return int(value)


class _WordedParameterError(ParameterError):
    """A ``ParameterError`` whose message is given whole (``worded_error``)."""

    def __init__(self, param: str, message: str):
        super().__init__(param, message)
        self.args = (message,)


def worded_error(param: str, message: str) -> ParameterError:
    """An error about ``param`` whose message does not start with its name
    (``"dpsu-single needs 1 <= n <= max_n, got n=0"``): ``str()`` is ``message``,
    ``problem`` the whole message too."""
    return _WordedParameterError(param, message)
