"""The test suite's own layout: a test file imports no other test file (nor a
conftest.py); what several files share lives in tests/support/."""

import ast
import glob
import os
import re

import pytest

from tests.support import hypothesis_profiles, tiers
from tests.support.paths import ROOT


def is_test_module(dotted: str) -> bool:
    """``tests.core.test_kgrams``, ``.test_kgrams`` or ``tests.conftest``: a test file of
    this suite, not a helper (nor another package's, e.g. ``apache_beam.testing.test_stream``)."""
    in_suite = dotted.startswith(("tests.", ".")) or dotted in BARE_NAMES
    return in_suite and any(part.startswith("test_") or part == "conftest"
                            for part in dotted.split("."))


def imported_test_modules(tree: ast.AST) -> list[str]:
    """The test modules a file imports, at any depth (a function's own imports too)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names if is_test_module(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            if is_test_module(module):
                found.append(module)
            else:  # from tests.core import test_kgrams
                joint = "" if module.endswith(".") else "."
                found += [f"{module}{joint}{alias.name}" for alias in node.names
                          if is_test_module(alias.name)]
    return found


def suite_files():
    return sorted(glob.glob(os.path.join(ROOT, "tests", "**", "test_*.py"), recursive=True))


# A file's own name, imported bare (as if tests/core were on sys.path).
BARE_NAMES = {os.path.basename(path)[:-3] for path in suite_files()} | {"conftest"}


def test_the_check_sees_every_spelling_of_a_test_import():
    code = """
import tests.core.test_kgrams
from tests.beam.test_ngrams_beam import phrase_corpus
from tests.core import test_discrete_noise
from .test_cli_flags import FLAG
from . import conftest
def later():
    from tests.pipelines.test_cli_flags import job_parsers
import test_kgrams
import tests.support.paths
from tests.support.kgram_sets import TOKENS
from tests.support.runner import TestPipeline
import apache_beam.testing.test_stream
"""
    assert imported_test_modules(ast.parse(code)) == [
        "tests.core.test_kgrams", "tests.beam.test_ngrams_beam",
        "tests.core.test_discrete_noise", ".test_cli_flags", ".conftest",
        "test_kgrams", "tests.pipelines.test_cli_flags"]


def test_no_test_file_imports_another_test_file():
    files = suite_files()
    assert len(files) > 40  # the glob found the suite
    offenders = {}
    for path in files:
        with open(path, encoding="utf-8") as f:
            found = imported_test_modules(ast.parse(f.read(), path))
        if found:
            offenders[os.path.relpath(path, ROOT)] = found
    assert offenders == {}, "move what they share into tests/support/"


def test_hypothesis_profiles(monkeypatch):
    # ci (the default) keeps every test's count; quick runs a twentieth, at least 10.
    monkeypatch.delenv("HYPOTHESIS_PROFILE", raising=False)
    assert hypothesis_profiles.profile() == "ci"
    assert [hypothesis_profiles.examples(n) for n in (6, 100, 2000)] == [6, 100, 2000]
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "quick")
    assert [hypothesis_profiles.examples(n) for n in (6, 100, 300, 2000)] == [6, 10, 15, 100]
    monkeypatch.setenv("HYPOTHESIS_PROFILE", "fast")
    with pytest.raises(ValueError, match="HYPOTHESIS_PROFILE='fast': expected one of ci, quick"):
        hypothesis_profiles.profile()


def test_ci_runs_the_readme_test_command():
    # README's "Run the tests" command is the one CI runs (python vs python3 aside).
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        block = re.search(r"Run the tests:\n\n```bash\n(.*?)```", f.read(), re.S).group(1)
    readme = re.findall(r"python -m (pytest .*)$", block, re.M)
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        ci = re.findall(r"^step pytest python3 -m (pytest .*)$", f.read(), re.M)
    assert len(readme) == 1 and "-n auto --dist" in readme[0]
    assert ci == readme


def test_the_tier_patterns_see_code_not_strings():
    code = """
import subprocess
from tests.support.runner import TestPipeline
# beam.Pipeline( in a comment
NOTE = "vocabulary.main( in a string"
def run():
    return subprocess.run(["true"])
"""
    assert tiers.tiers_used(code) == {"pipeline", "subprocess"}
    # A job called through a table of main functions is still a job: its flags go
    # through job_args.
    assert tiers.tiers_used("JOBS = {}\nJOBS['x'](job_args(['--help']))\n") == {"job"}
    declared = "import pytest\npytestmark = [pytest.mark.job, pytest.mark.foo]\n"
    assert tiers.tiers_declared(declared) == {"job"}


def test_each_test_file_declares_the_tiers_its_code_uses():
    # A file that builds pipelines, runs jobs or starts processes is marked so (and
    # conftest marks it slow): the quick loop, -m "not slow", stays pure and fast.
    wrong = {}
    for path in suite_files():
        with open(path, encoding="utf-8") as f:
            source = f.read()
        used, declared = tiers.tiers_used(source), tiers.tiers_declared(source)
        if used != declared:
            wrong[os.path.relpath(path, ROOT)] = {"uses": sorted(used),
                                                  "declares": sorted(declared)}
    assert wrong == {}, "set the file's pytestmark to the tiers it uses (tests/support/tiers.py)"
