"""Comma-separated flag values of the evaluation jobs (``--epsilons 1,2,4``): every entry
given, and each once (why: docs/explanation/reading.md#the-evaluation-job).
"""

from __future__ import annotations

from typing import Any, Callable

from pipelines.errors import UsageError

__all__ = ["comma_list"]

def comma_list(text: str, flag: str, parse: Callable[[str], Any] = str,
               what: str = "values") -> list[Any]:
    """The entries of a comma-separated flag value, parsed, in order.

    Args:
      text: the flag's value, e.g. ``"1,2,4"``.
      flag: the flag, for the error message (``"--epsilons"``).
      parse: turns one stripped entry into its value; ``ValueError`` means a bad entry.
      what: what the entries are, for the error message (``"numbers"``).

    Returns:
      The parsed entries, at least one.

    Raises:
      UsageError: an entry is empty, does not parse, or equals an earlier one once parsed.
    """
    values: list[Any] = []
    for i, entry in enumerate((entry.strip() for entry in text.split(",")), 1):
        if not entry:
            raise UsageError(f"{flag} has an empty entry (entry {i} of {text!r}); give "
                             f"comma-separated {what}, each once")
        try:
            value = parse(entry)
        except ValueError:
            raise UsageError(f"{flag}: expected comma-separated {what}, got {text!r}") from None
        if value in values:
            shown = f"{value:g}" if isinstance(value, float) else str(value)
            raise UsageError(f"{flag} gives {shown} twice ({text!r}); give each once")
        values.append(value)
    return values
