"""Answers of pure functions kept between calls, keyed exactly (pure Python; no Beam).

A job calibrates the same parameters many times while it is built (its checks,
"auto"'s candidates, the tight budget split, the report), and each calibration
solves the same δ split, σ and thresholds again. ``kept`` keeps a bounded
number of answers of a pure function, keyed by ``exact_key`` of its arguments:
two calls share an answer only if their arguments are the same values of the
same types (1, 1.0 and True differ; so do 0.0 and −0.0, which compare equal),
so a kept answer is the float the function would compute again. Arguments
``exact_key`` cannot vouch for (closures, bound methods, mutable containers)
are not kept: the function runs. Exceptions are never kept: they are raised
again by the next call. Answers must be immutable (or copied by the caller).
"""

from __future__ import annotations

import dataclasses
import functools
import types
from collections.abc import Callable
from fractions import Fraction
from typing import Any, TypeVar

import numpy as np

__all__ = ["exact_key", "Keyed", "kept"]

F = TypeVar("F", bound=Callable[..., Any])

_PLAIN = (type(None), bool, int, str, bytes, Fraction)


def exact_key(*values) -> tuple:
    """A hashable key, equal for two argument lists only if every value is the same.

    Floats by their bits (with their type), numpy arrays by dtype, shape and
    bytes, tuples, frozen dataclasses and ``functools.partial`` by their parts,
    functions without a closure (or ``kept`` ones) by identity. Anything else
    raises TypeError: it may change between calls, or compare equal across values
    a computation tells apart.
    """
    return tuple(_exact(v) for v in values)


def _exact(value) -> Any:
    if isinstance(value, float):
        return (type(value), value.hex())
    if isinstance(value, _PLAIN):
        return (type(value), value)
    if isinstance(value, np.ndarray):
        return (np.ndarray, value.dtype.str, value.shape, value.tobytes())
    if isinstance(value, np.generic):
        return (type(value), value.tobytes())
    if isinstance(value, tuple):
        return (tuple,) + exact_key(*value)
    if isinstance(value, functools.partial):
        return (functools.partial, _exact(value.func), exact_key(*value.args),
                exact_key(*sorted(value.keywords.items())))
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType)) and (
            getattr(value, "__closure__", None) is None or getattr(value, "_kept", False)):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type) and \
            type(value).__dataclass_params__.frozen:  # type: ignore[attr-defined]
        return (type(value),) + exact_key(*(getattr(value, f.name)
                                            for f in dataclasses.fields(value)))
    raise TypeError(f"no exact key for a {type(value).__name__}")


class Keyed:
    """``value`` that compares and hashes by ``key`` alone (``key`` determines it)."""

    __slots__ = ("key", "value", "_hash")

    def __init__(self, key: tuple, value: Any):
        self.key, self.value, self._hash = key, value, hash(key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Keyed) and self.key == other.key

    def __hash__(self) -> int:
        return self._hash


def kept(maxsize: int) -> Callable[[F], F]:
    """Keeps up to ``maxsize`` answers of a pure function (least recently used go).

    The function stays reachable uncached as ``__wrapped__``; ``cache_info`` and
    ``cache_clear`` are ``functools.lru_cache``'s.
    """
    def decorate(function: F) -> F:
        @functools.lru_cache(maxsize=maxsize)
        def by_key(call: Keyed):
            args, kwargs = call.value
            return function(*args, **kwargs)

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            try:
                key = exact_key(args, tuple(sorted(kwargs.items())))
            except TypeError:  # an argument that may change: not kept
                return function(*args, **kwargs)
            return by_key(Keyed(key, (args, kwargs)))

        wrapper._kept = True  # type: ignore[attr-defined]
        wrapper.cache_info = by_key.cache_info  # type: ignore[attr-defined]
        wrapper.cache_clear = by_key.cache_clear  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]
    return decorate
