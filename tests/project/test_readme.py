"""README.md is the front door: short, its commands the set-up, its names real.

Every code block of README.md and docs/ runs in tests/project/test_code_blocks.py;
this file checks what is particular to the README and to the pages' prose.
"""

import glob
import os
import re
import subprocess
import sys

from tests.support.paths import ROOT

import pytest

pytestmark = pytest.mark.subprocess

README_MAX_LINES = 150
BENCHMARKS_MAX_LINES = 300


def read(path: str) -> str:
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def pages() -> list[str]:
    """README, CONTRIBUTING and every page of docs/, relative to the repository root."""
    docs = sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
    return ["README.md", "CONTRIBUTING.md"] + [os.path.relpath(p, ROOT) for p in docs]


def python_blocks(path: str = "README.md") -> list[str]:
    return re.findall(r"```python\n(.*?)```", read(path), re.S)


def test_readme_and_benchmarks_stay_short():
    assert len(read("README.md").splitlines()) <= README_MAX_LINES
    assert len(read(os.path.join("docs", "benchmarks.md")).splitlines()) <= BENCHMARKS_MAX_LINES


def test_readme_keeps_its_two_commands_the_set_up():
    # The first command installs and runs the job; the second is CI's test command
    # (tests/project/test_tests_layout.py checks that .ci/run runs it).
    text = read("README.md")
    setup = re.search(r"## Set up\n.*?```bash\n(.*?)```", text, re.S).group(1)
    assert setup.startswith("pip install -e . && beam-dpsu vocabulary --input examples/")
    tests = re.search(r"Run the tests:\n\n```bash\n(.*?)```", text, re.S).group(1)
    assert re.search(r"^pip install -e \"\.\[test,docs\]\" && python -m pytest ", tests)
    assert len(re.findall(r"```bash\n", text)) == 2
    # The pipeline: about ten lines.
    assert len(python_blocks()) == 1 and len(python_blocks()[0].splitlines()) <= 12


def test_readme_mechanism_table_has_at_most_six_rows():
    section = re.search(r"## Mechanisms\n(.*?)\n## ", read("README.md"), re.S).group(1)
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    assert 2 <= len(rows) - 1 <= 6  # the header row aside


def test_contributor_matter_lives_in_contributing():
    readme = read("README.md")
    for word in ("HYPOTHESIS_PROFILE", "compileall", "ruff", "mypy", "xdist", "FnApiRunner"):
        assert word not in readme, word
    contributing = read("CONTRIBUTING.md")
    assert "HYPOTHESIS_PROFILE=quick" in contributing and "ruff check" in contributing


def test_tokenize_is_named_with_its_package():
    # tokenize is the package's: importable as written, and named so in the prose.
    import beam_dpsu
    from beam_dpsu import Tokenizer, Tokens, tokenize
    assert tokenize is beam_dpsu.tokenize and isinstance(tokenize, Tokenizer)
    assert isinstance(tokenize("A <br /> Cat, http://x.y/z cat"), Tokens)
    assert tokenize("A <br /> Cat, http://x.y/z cat") == ["a", "cat", "cat"]
    assert {"tokenize", "Tokenizer", "Tokens"} <= set(beam_dpsu.__all__)
    spans = []
    for page in pages():
        prose = re.sub(r"```.*?```", "", read(page), flags=re.S)  # (code blocks run)
        spans += [s for s in re.findall(r"`([^`]+)`", prose)
                  if re.search(r"\bTokeni[sz]er\(|\btokenize\b", s)]
    assert spans, "the pages show no tokenize"
    assert [s for s in spans if not re.search(r"beam_dpsu[. ]", s)] == []


def test_pages_name_only_what_beam_dpsu_has():
    import importlib
    import beam_dpsu
    for page in pages():
        names = set(re.findall(r"\bbeam_dpsu\.(\w+)", read(page)))
        missing = [n for n in sorted(names) if not hasattr(beam_dpsu, n)
                   and importlib.util.find_spec(f"beam_dpsu.{n}") is None]
        assert missing == [], (page, missing)


def test_readme_block_prints_no_beam_warning_in_a_fresh_interpreter():
    code = python_blocks()[0]
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr == "", proc.stderr[-3000:]
