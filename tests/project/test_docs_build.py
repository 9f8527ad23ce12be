"""The documentation: the API reference builds without a warning and covers the public API.

``mkdocs build --strict`` fails on any warning: a broken link or anchor, a
cross-reference to a name that does not exist, a docstring whose Args name a
parameter the signature lacks. CI installs the ``docs`` extra, so there these
tests run; elsewhere the build tests are skipped, saying why.
"""

import glob
import os
import re
import shutil
import subprocess
import sys

import pytest

import beam_dpsu
from tests.support.paths import ROOT

pytestmark = pytest.mark.subprocess

DOCS = os.path.join(ROOT, "docs")
NO_DOCS_EXTRA = "the docs extra is not installed (pip install -e '.[docs]')"


def read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def strict_build(config_dir: str, site_dir: str) -> subprocess.CompletedProcess:
    pytest.importorskip("mkdocs", reason=NO_DOCS_EXTRA)
    pytest.importorskip("mkdocstrings_handlers.python", reason=NO_DOCS_EXTRA)
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict",
         "--config-file", os.path.join(config_dir, "mkdocs.yml"), "--site-dir", site_dir],
        cwd=config_dir, capture_output=True, text=True, timeout=300)


def test_reference_builds_without_a_warning(tmp_path):
    built = strict_build(ROOT, str(tmp_path / "site"))
    assert built.returncode == 0 and "WARNING" not in built.stderr, built.stderr
    assert os.path.exists(tmp_path / "site" / "api" / "transforms" / "index.html")
    # Nothing but mkdocs' own three INFO lines (a missing signature formatter, ruff,
    # in the docs extra, was one more).
    infos = [line for line in built.stderr.splitlines() if line.strip()]
    assert all(re.match(r"INFO\s+-\s+(Cleaning site|Building documentation|Documentation "
                        r"built)", line) for line in infos), built.stderr
    # What the reference renders: no reST "Example::" left, a default as its number,
    # the module notes that docstrings point to.
    site = str(tmp_path / "site")
    pages = {os.path.relpath(p, site): read(p)
             for p in glob.glob(os.path.join(site, "**", "index.html"), recursive=True)}
    assert not [name for name, page in pages.items() if "Example::" in page]
    budgets = pages[os.path.join("api", "budgets", "index.html")]
    assert "DEFAULT_COUNTS_SHARE" not in budgets and "counts_share" in budgets
    assert 'id="beam_dpsu.count_released"' in pages[os.path.join("api", "modules", "index.html")]


def test_a_broken_reference_fails_the_build(tmp_path):
    # The same configuration and pages, plus a dead link and a cross-reference
    # to a name the package lacks: the build must fail and say which.
    for name in ("mkdocs.yml", "docs", "beam_dpsu", "pipelines"):
        source = os.path.join(ROOT, name)
        if os.path.isdir(source):
            shutil.copytree(source, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, tmp_path / name)
    with open(tmp_path / "docs" / "privacy.md", "a", encoding="utf-8") as f:
        f.write("\nSee [gone](gone.md) and [NoSuchName][beam_dpsu.NoSuchName].\n")
    built = strict_build(str(tmp_path), str(tmp_path / "site"))
    assert built.returncode != 0
    assert "gone.md" in built.stderr and "beam_dpsu.NoSuchName" in built.stderr, built.stderr


def test_the_nav_titles_the_api_pages_by_their_own_headings():
    nav = re.findall(r"^\s+- ([^:]+): (api/\w+\.md)$", read(os.path.join(ROOT, "mkdocs.yml")),
                     re.M)
    assert len(nav) == len(glob.glob(os.path.join(DOCS, "api", "*.md")))
    for title, page in nav:
        heading = re.search(r"^# (.+)$", read(os.path.join(DOCS, page)), re.M).group(1)
        assert title == heading, (page, title, heading)


def referenced_names() -> set:
    """The names of ``::: beam_dpsu.X`` directives in the API reference pages."""
    pages = glob.glob(os.path.join(DOCS, "api", "*.md"))
    return {m for page in pages for m in re.findall(r"^::: beam_dpsu\.(\w+)\s*$", read(page), re.M)}


def test_every_public_name_is_in_the_reference():
    missing = sorted(set(beam_dpsu.__all__) - referenced_names())
    assert missing == [], f"add these to a page under docs/api/: {missing}"


def test_index_shows_readme_first_example():
    # test_readme.py runs README's blocks; the index shows the first one as is.
    first = re.findall(r"```python\n(.*?)```", read(os.path.join(ROOT, "README.md")), re.S)[0]
    assert re.findall(r"```python\n(.*?)```", read(os.path.join(DOCS, "index.md")), re.S) == [first]


def test_readme_links_to_files_that_exist():
    # GitHub renders README with links relative to the repository root.
    readme = read(os.path.join(ROOT, "README.md"))
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", readme)
    local = [t for t in targets if "://" not in t]
    assert {"docs/tutorial.md", "docs/privacy.md", "docs/report.md", "docs/jobs.md",
            "docs/scale.md", "docs/benchmarks.md", "docs/reference/flags.md",
            "docs/explanation/mechanisms.md", "docs/explanation/proofs.md",
            "CONTRIBUTING.md"} <= set(local)
    how_to = {os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(DOCS, "how-to", "*.md"))}
    assert how_to and how_to <= set(local)
    assert [t for t in local if not os.path.exists(os.path.join(ROOT, t))] == []
    anchors = re.findall(r"\]\(#([^)]+)\)", readme)
    headings = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-")
                for h in re.findall(r"^#+ (.+)$", readme, re.M)}
    assert [a for a in anchors if a not in headings] == []


def test_pages_name_only_real_flags():
    # What test_cli_flags checks on README, for every page of docs/ and CONTRIBUTING.md
    # (tests/project/test_readme.py checks the beam_dpsu names they use).
    from tests.support.job_flags import FLAG, beam_flags, job_flags, job_parsers
    known = beam_flags().union(*(job_flags(p) for p in job_parsers().values()))
    pages = glob.glob(os.path.join(DOCS, "**", "*.md"), recursive=True)
    for page in pages + [os.path.join(ROOT, "CONTRIBUTING.md")]:
        text = read(page)
        placeholders = {"--a-b", "--a_b"}  # jobs.md's example of the two spellings
        placeholders |= {"--dist"}  # pytest-xdist's, in the test command
        placeholders |= {"--strict"}  # mkdocs build's, in CONTRIBUTING.md
        assert set(FLAG.findall(text)) - known - placeholders == set(), page


def documented_names(docstring, kinds) -> set:
    if docstring is None:
        return set()
    return {item.name for section in docstring.parsed if section.kind.value in kinds
            for item in section.value}


def test_every_parameter_of_the_public_api_is_documented():
    # The reference lists a parameter only if its docstring's Args (or, for a
    # dataclass, Attributes) names it; griffe warns only about names that are
    # there but wrong. ``label`` is Beam's PTransform label.
    griffe = pytest.importorskip("griffe", reason=NO_DOCS_EXTRA)
    package = griffe.load("beam_dpsu", search_paths=[ROOT], docstring_parser="google")
    undocumented = {}
    for name in beam_dpsu.__all__:
        obj = package[name]
        obj = obj.final_target if obj.is_alias else obj
        if obj.is_class:
            init = obj.members.get("__init__")
            params = init.parameters if init is not None else obj.parameters
            documented = documented_names(obj.docstring, ("parameters", "attributes"))
            if init is not None:
                documented |= documented_names(init.docstring, ("parameters",))
        elif obj.is_function:
            params = obj.parameters
            documented = documented_names(obj.docstring, ("parameters",))
        else:
            continue
        missing = [p.name for p in params if p.name not in documented | {"self", "label"}
                   and p.kind.value != "variadic positional"
                   and not (p.kind.value == "variadic keyword" and f"**{p.name}" in documented)]
        if missing:
            undocumented[name] = missing
    assert undocumented == {}
