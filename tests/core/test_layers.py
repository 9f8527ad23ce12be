"""The layers of beam_dpsu: the pure core loads no Beam, and no module imports in a circle.

(a) ``beam_dpsu`` itself and every ``beam_dpsu.core.*`` module are imported, one after
another, in a fresh interpreter, and ``apache_beam`` must not be in ``sys.modules``
after any of them.
(b) The import graph of beam_dpsu, read from the ``import``/``from`` statements
of its source (``ast``; imports inside functions included, those under
``if TYPE_CHECKING:`` left out: they never run), has no cycle, and
the core imports nothing from ``beam_dpsu.beam`` or the transform modules.
(c) In the same fresh interpreter, no core module loads scipy on import (~1 CPU-s of
every job's start, its ``--help`` and each worker process): its modules are imported
by the functions that use them.
"""

from __future__ import annotations

import ast
import functools
import json
import pathlib
import subprocess
import sys

import pytest

pytestmark = pytest.mark.subprocess

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "beam_dpsu"
ROOT = PACKAGE.parent


def _module_name(path: pathlib.Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}
CORE = sorted(m for m in MODULES if m.startswith("beam_dpsu.core"))


def _runtime_nodes(tree: ast.AST):
    """Every node of ``tree`` but those under ``if TYPE_CHECKING:`` (never run)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                stack.extend(child.orelse)
                continue
            stack.append(child)


def _imports(module: str, path: pathlib.Path) -> set[str]:
    """The beam_dpsu modules ``module`` imports (the deepest existing module each
    import names; ``from pkg import name`` counts as pkg.name if that is a module)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        else:
            continue
        for name in names:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name and name != module:
                found.add(name)
    return found


GRAPH = {m: _imports(m, p) for m, p in MODULES.items()}


# One fresh interpreter imports every module in turn and names, for each watched
# module, the first after whose import it is loaded (a fresh interpreter each would
# cost ~1 s of numpy and scipy apiece).
WATCHED = ("apache_beam", "scipy")
_FIRST_TO_LOAD = """
import importlib, json, sys
first = {}
for module in sys.argv[1:]:
    importlib.import_module(module)
    for watched in %r:
        if watched in sys.modules:
            first.setdefault(watched, module)
print(json.dumps(first))
""" % (WATCHED,)


@functools.lru_cache(maxsize=None)
def _first_modules_loading(modules: tuple[str, ...]) -> dict[str, str]:
    result = subprocess.run([sys.executable, "-c", _FIRST_TO_LOAD, *modules], cwd=ROOT,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_core_and_package_load_without_beam():
    assert _first_modules_loading(("beam_dpsu", *CORE)).get("apache_beam") is None


def test_a_module_loading_a_watched_one_is_named():
    # The check has teeth: a module loading Beam (or scipy) is caught, and named.
    first = _first_modules_loading(
        ("beam_dpsu.core.budgets", "scipy.stats", "beam_dpsu.beam.histograms"))
    assert first.get("scipy") == "scipy.stats"
    assert first.get("apache_beam") == "beam_dpsu.beam.histograms"


def test_core_and_package_load_without_scipy():
    assert _first_modules_loading(("beam_dpsu", *CORE)).get("scipy") is None


def test_core_imports_no_beam_layer():
    outside = {m for m in MODULES if not m.startswith("beam_dpsu.core") and m != "beam_dpsu"}
    wrong = {m: sorted(GRAPH[m] & outside) for m in CORE if GRAPH[m] & outside}
    assert not wrong, f"core modules importing Beam layers: {wrong}"


def test_import_graph_has_no_cycle():
    state: dict[str, int] = {}  # 1 visiting, 2 done
    stack: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for dep in sorted(GRAPH[module]):
            if state.get(dep) == 1:
                cycle = stack[stack.index(dep):] + [dep]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[module] = 2

    for module in sorted(GRAPH):
        if module not in state:
            visit(module)


def test_graph_reads_imports():
    # The test has teeth: the graph sees the imports it should.
    assert "beam_dpsu.core.budgets" in GRAPH["beam_dpsu.core.parallel_mechanisms"]
    assert "beam_dpsu.core.checks" in GRAPH["beam_dpsu.core.budgets"]
