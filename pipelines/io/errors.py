"""The error every unreadable input raises, and how a caught exception is named in it."""

from __future__ import annotations

__all__ = ["InputFormatError", "error_kind"]


class InputFormatError(ValueError):
    """A record of an input file that cannot be read as (user, item/text)."""


def error_kind(exc: BaseException) -> str:
    """An exception's qualified type (``zlib.error``), never its text (it may quote the file)."""
    return f"{type(exc).__module__}.{type(exc).__name__}".replace("builtins.", "")
