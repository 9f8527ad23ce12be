"""Every code block of README.md, CONTRIBUTING.md and docs/ runs, and prints what it says.

The rules the pages follow (CONTRIBUTING.md, "The documentation"):

* A ``python`` block is executed, in a fresh namespace, in a temporary folder
  shared by every block (it holds ``examples/``). Each ``# prints: TEXT``
  comment must match a line the block printed, in the order of the comments;
  a ``text`` block right after a code block lists lines that must appear, in
  that order, in what it printed. ``…`` stands for any text.
* A ``bash`` block runs with ``bash -euo pipefail`` in the same folder, with
  ``beam-dpsu`` and ``python`` meaning this checkout's command and
  interpreter; ``pip install …`` steps are left out (the suite runs in the
  installed environment). An identical block runs once.
* A block preceded by ``<!-- block: not run (reason) -->`` is not run, and
  says why; nor is a ``bash`` block running ``python -m pytest`` (the suite itself:
  README's test command stays unmarked, as CI reads it). Other languages
  (``text``, ``json``) are shown data.

A block may use what an earlier block of its page made (a file, an output
folder): running one block runs the earlier blocks of its page first.

The blocks release from data built so that their printed result fails by chance
< 1e-6: common items are held by hundreds of users, far above every threshold,
and an item of one user is released with probability ≤ δ ≤ 2.5e-7 (or never, below
a pre-threshold); a block whose output varies with the noise prints it under ``…``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import io
import os
import re
import subprocess
import sys

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.subprocess

FENCE = re.compile(r"^( *)```(\S*)[^\n]*\n(.*?)^\1```[ \t]*$", re.M | re.S)
NOT_RUN = re.compile(r"<!-- block: not run \((.+?)\) -->\s*$")
RUNNABLE = ("python", "bash")
SHOWN = ("text", "json", "yaml", "toml")


def doc_files() -> list[str]:
    pages = sorted(glob.glob(os.path.join(ROOT, "docs", "**", "*.md"), recursive=True))
    return [os.path.join(ROOT, "README.md"), os.path.join(ROOT, "CONTRIBUTING.md")] + pages


@dataclasses.dataclass(frozen=True)
class Block:
    page: str          # relative to the repository root
    line: int          # of the opening fence
    lang: str
    code: str
    not_run: str | None
    output: tuple[str, ...]  # lines a text block right after it says it prints

    @property
    def name(self) -> str:
        return f"{self.page}:{self.line}"

    def expected(self) -> list[str]:
        prints = [m.group(1).strip() for m in re.finditer(r"#\s*prints:\s*(.+)$", self.code, re.M)]
        return prints + [line for line in self.output if line.strip()]


def page_blocks(path: str) -> list[Block]:
    with open(path, encoding="utf-8") as f:
        return parse_blocks(f.read(), os.path.relpath(path, ROOT))


def parse_blocks(text: str, page: str) -> list[Block]:
    fences = list(FENCE.finditer(text))
    blocks, taken = [], set()
    for i, match in enumerate(fences):
        if i in taken:
            continue
        lang = match.group(2)
        output: tuple[str, ...] = ()
        if lang in RUNNABLE and i + 1 < len(fences):
            after = fences[i + 1]
            if after.group(2) == "text" and not text[match.end():after.start()].strip():
                output = tuple(after.group(3).splitlines())
                taken.add(i + 1)
        before = text[:match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        not_run = NOT_RUN.search(before)
        blocks.append(Block(page, text.count("\n", 0, match.start()) + 1, lang,
                            match.group(3), not_run.group(1) if not_run else None, output))
    return blocks


ALL_BLOCKS = [b for path in doc_files() for b in page_blocks(path)]
RUN_BLOCKS = [b for b in ALL_BLOCKS if b.lang in RUNNABLE]


def matches(expected: list[str], printed: str) -> list[str]:
    """The expected lines not found, in order, among the printed lines (… = any text)."""
    lines = [line.strip() for line in printed.splitlines()]
    missing, at = [], 0
    for want in expected:
        pattern = re.compile(".*".join(re.escape(part) for part in want.split("…")))
        found = next((j for j in range(at, len(lines)) if pattern.fullmatch(lines[j])), None)
        if found is None:
            missing.append(want)
        else:
            at = found + 1
    return missing


def shell_code(code: str) -> str:
    """The block as run: ``pip install …`` steps left out."""
    code = re.sub(r"^pip install [^&\n]*&&\s*", "", code, flags=re.M)
    return "\n".join(line for line in code.splitlines() if not line.startswith("pip install "))


class Runner:
    """Runs blocks once each, in one folder; a block's page's earlier blocks first."""

    def __init__(self, folder):
        self.folder = str(folder)
        os.symlink(os.path.join(ROOT, "examples"), os.path.join(self.folder, "examples"))
        bin_dir = os.path.join(self.folder, ".bin")
        os.mkdir(bin_dir)
        for name, target in (("beam-dpsu", f'"{sys.executable}" -m pipelines.command'),
                             ("python", f'"{sys.executable}"')):
            path = os.path.join(bin_dir, name)
            with open(path, "w", encoding="utf-8") as f:
                f.write(f'#!/bin/sh\nexec {target} "$@"\n')
            os.chmod(path, 0o755)
        self.env = {**os.environ, "PATH": bin_dir + os.pathsep + os.environ["PATH"],
                    "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.done: dict = {}   # block → printed text
        self.shell: dict = {}  # shell code → printed text

    def run(self, block: Block) -> str:
        for earlier in RUN_BLOCKS:
            if earlier.page == block.page and earlier.line < block.line:
                if skip_reason(earlier) is None and earlier not in self.done:
                    self.done[earlier] = self._run(earlier)
            if earlier == block:
                break
        if block not in self.done:
            self.done[block] = self._run(block)
        return self.done[block]

    def _run(self, block: Block) -> str:
        if block.lang == "python":
            out = io.StringIO()
            cwd = os.getcwd()
            os.chdir(self.folder)
            try:
                with contextlib.redirect_stdout(out):
                    exec(compile(block.code, block.name, "exec"), {"__name__": "docs_block"})
            finally:
                os.chdir(cwd)
            return out.getvalue()
        code = shell_code(block.code)
        if code not in self.shell:
            proc = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=self.folder,
                                  env=self.env, capture_output=True, text=True, timeout=600)
            assert proc.returncode == 0, f"{block.name}:\n{proc.stdout}\n{proc.stderr[-4000:]}"
            self.shell[code] = proc.stdout + proc.stderr
        return self.shell[code]


def skip_reason(block: Block) -> str | None:
    if block.not_run:
        return f"not run: {block.not_run}"
    if block.lang == "bash" and re.search(r"-m pytest\b", block.code):
        return "not run: it is the test suite itself (README keeps the command unmarked for CI)"
    if "import pipeline_dp" in block.code:
        try:
            import pipeline_dp  # noqa: F401
        except ImportError:
            return "PipelineDP is not installed (pip install -e '.[test]')"
    return None


@pytest.fixture(scope="module")
def runner(tmp_path_factory):
    return Runner(tmp_path_factory.mktemp("doc_blocks"))


@pytest.mark.parametrize("block", RUN_BLOCKS, ids=lambda b: b.name)
def test_block_runs_and_prints_what_it_says(block, runner, capfd):
    reason = skip_reason(block)
    if reason:
        pytest.skip(reason)
    printed = runner.run(block)
    printed += capfd.readouterr().out  # what a runner's worker threads wrote to fd 1
    assert matches(block.expected(), printed) == [], printed[-4000:]


def test_every_block_is_run_or_says_why_not():
    assert len(RUN_BLOCKS) > 20
    unlabelled = [b.name for b in ALL_BLOCKS if b.lang not in RUNNABLE + SHOWN]
    assert unlabelled == [], "give these blocks a language (python, bash, text, …)"
    assert [b.name for b in ALL_BLOCKS if b.not_run and b.lang not in RUNNABLE] == []


def test_the_block_rules_catch_a_wrong_print():
    # The checker has teeth: a missing line, a wrong order, a wrong value fail.
    assert matches(["cat", "dog"], "cat\ndog\n") == []
    assert matches(["2.236… 11.72…"], "2.2360679 11.7264\n") == []
    assert matches(["dog", "cat"], "cat\ndog\n") == ["cat"]
    assert matches(["cat"], "lynx\n") == ["cat"]
    text = "x\n<!-- block: not run (a cluster) -->\n```bash\nfoo\n```\n```text\nbar\n```\n"
    blocks = parse_blocks(text, "page.md")
    assert [(b.lang, b.not_run, b.output) for b in blocks] == [("bash", "a cluster", ("bar",))]
