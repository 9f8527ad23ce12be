"""The suite tests Beam as installed: nothing in tests/ replaces Beam's code.

Two checks. In this process, after conftest and every support module loaded, no
function or class reachable from a loaded ``apache_beam`` module (its attributes, and
the attributes of its classes) was defined in tests/. And in the source, no test or
support file assigns into an object imported from ``apache_beam`` (``x.attr = …``,
``setattr(x, …)``) outside a test's own ``monkeypatch``; a test may choose its runner
through Beam's public options only (tests/support/runner.py).
"""

import ast
import glob
import importlib
import inspect
import os
import sys

from tests.support.paths import ROOT

TESTS = os.path.join(ROOT, "tests")


def _defined_in_tests(value) -> bool:
    code = getattr(inspect.unwrap(value), "__code__", None) if callable(value) else None
    module = getattr(value, "__module__", None) or ""
    return module.split(".")[0] == "tests" or (
        code is not None and os.path.abspath(code.co_filename).startswith(TESTS + os.sep))


def test_no_loaded_beam_module_holds_code_from_tests():
    for path in glob.glob(os.path.join(TESTS, "support", "*.py")):
        importlib.import_module("tests.support." + os.path.basename(path)[:-3])
    replaced = []
    for name, module in list(sys.modules.items()):
        if not name.startswith("apache_beam") or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if _defined_in_tests(value):
                replaced.append(f"{name}.{attr}")
            if inspect.isclass(value) and value.__module__ == name:
                replaced += [f"{name}.{attr}.{member}" for member, inner in vars(value).items()
                             if _defined_in_tests(inner)]
    assert len([n for n in sys.modules if n.startswith("apache_beam")]) > 50  # Beam is loaded
    assert replaced == []


def _assignments_into_beam(source: str) -> list[int]:
    """Lines assigning into a name imported from apache_beam, or into its attributes."""
    tree = ast.parse(source)
    beam_names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            beam_names |= {(a.asname or a.name).split(".")[0] for a in node.names
                           if a.name.startswith("apache_beam")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("apache_beam"):
            beam_names |= {a.asname or a.name for a in node.names}

    def rooted_in_beam(node) -> bool:
        while isinstance(node, (ast.Attribute, ast.Subscript)):
            node = node.value
        return isinstance(node, ast.Name) and node.id in beam_names

    lines = []
    for node in ast.walk(tree):
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
        lines += [node.lineno for t in targets
                  if isinstance(t, (ast.Attribute, ast.Subscript)) and rooted_in_beam(t)]
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("setattr", "delattr") and node.args
                and rooted_in_beam(node.args[0])):
            lines.append(node.lineno)
    return sorted(lines)


def test_the_source_check_sees_assignments_into_beam():
    code = """
import apache_beam as beam
from apache_beam.runners.portability import prism_runner
from apache_beam.options import pipeline_options as po
prism_runner.PrismRunner.run_pipeline = None
setattr(beam.Pipeline, "run", None)
po.PipelineOptions.__init__ = None
other = object()
other.x = 1
"""
    assert _assignments_into_beam(code) == [5, 6, 7]


def test_no_test_file_assigns_into_beam():
    files = glob.glob(os.path.join(TESTS, "**", "*.py"), recursive=True)
    assert len(files) > 60
    found = {}
    for path in files:
        with open(path, encoding="utf-8") as f:
            lines = _assignments_into_beam(f.read())
        if lines:
            found[os.path.relpath(path, ROOT)] = lines
    assert found == {}, "choose the runner by Beam's options; inject a fault with monkeypatch"
