"""The suite's tiers: which test files build pipelines, run jobs or start processes.

Each test file that does one of these says so with ``pytestmark`` (``pipeline``,
``job``, ``subprocess``); tests/conftest.py marks every test of those tiers ``slow``
too, so that ``pytest -m "not slow"`` is the quick loop of CONTRIBUTING.md. The
layout test (tests/project/test_tests_layout.py) checks each file's markers against
what its source does, with the patterns below, so a new pipeline test cannot land
in the quick loop unmarked.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

__all__ = ["TIERS", "SLOW", "tiers_used", "tiers_declared"]

SLOW = "slow"

# tier: what in a test file's code shows that it belongs to the tier, matched against
# the file's tokens joined by single spaces (``beam . Pipeline (``).
TIERS = {
    "pipeline": re.compile(r"\bTestPipeline\b|\brun_cases\b|\bbeam \. Pipeline \("),
    "job": re.compile(r"\b[a-z_]+ \. main \(|\brun_job \(|\bjob_calls\b|\bjob_args \("),
    "subprocess": re.compile(r"\bsubprocess \. (run|Popen) \(|\bjob_processes\b"
                             r"|\binterrupt_once_imported\b"),
}


def _code(source: str) -> str:
    """The file's tokens but its strings and comments (a test of these patterns quotes
    them), joined by single spaces."""
    return " ".join(text for kind, text, *_ in
                    tokenize.generate_tokens(io.StringIO(source).readline)
                    if kind not in _NOT_CODE)


# Strings (f-strings are tokens of their own from Python 3.12), comments, layout.
_NOT_CODE = {getattr(tokenize, name) for name in (
    "STRING", "FSTRING_START", "FSTRING_MIDDLE", "FSTRING_END", "COMMENT", "NL", "NEWLINE",
    "INDENT", "DEDENT") if hasattr(tokenize, name)}


def tiers_used(source: str) -> set[str]:
    """The tiers a test file's code (not its strings or comments) shows it uses."""
    code = _code(source)
    return {tier for tier, pattern in TIERS.items() if pattern.search(code)}


def tiers_declared(source: str) -> set[str]:
    """The tiers named by the file's module-level ``pytestmark``."""
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "pytestmark" for t in node.targets):
            return {n.attr for n in ast.walk(node.value)
                    if isinstance(n, ast.Attribute) and n.attr in TIERS}
    return set()
