"""The wording of messages: a value's type with its article, a count with its noun.

Errors name a value's type, never the value (records are personal data):
``a_type`` gives "an int", "a str". Pure Python.
"""

from __future__ import annotations

__all__ = ["a_type", "plural"]


def a_type(value) -> str:
    """``value``'s type name with its article: "an int", "a str", "an ndarray"."""
    name = type(value).__name__
    # By sound: "an int", "an ndarray" (en-dee-array), "a uint8", "a str".
    return ("an " if name.lower().startswith(("a", "e", "i", "o", "nd")) else "a ") + name


def plural(n: int, noun: str) -> str:
    """``n`` and ``noun`` agreeing in number: "1 budget", "2 budgets", "1,200 n-grams"."""
    return f"{n:,} {noun}" + ("" if n == 1 else "s")
