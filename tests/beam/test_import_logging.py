"""Importing beam_dpsu and Beam prints nothing and leaves the user's logging as it was
(each case in a fresh interpreter: an import happens once per process).

Beam logs "apitools not found" on the root logger at import when its BigQuery
client's dependency is missing, and that first ``logging.warning`` configures
logging for the process (``basicConfig``), so that a later ``basicConfig`` of the
user's did nothing. beam_dpsu depends on google-apitools (setup.py), so Beam's
import says nothing; beam_dpsu itself adds no handler, filter or import hook.
"""

import subprocess
import sys
import textwrap

import pytest

from tests.support.paths import ROOT

pytestmark = pytest.mark.subprocess

STATE = ("root = logging.getLogger(); "
         "state = lambda: (list(root.handlers), list(root.filters), root.level)")


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("first", ["beam_dpsu", "apache_beam"])
def test_importing_both_prints_nothing_and_configures_no_logging(first):
    second = "apache_beam" if first == "beam_dpsu" else "beam_dpsu"
    done = run(f"""
        import logging, sys
        {STATE}
        before = state()
        import {first}
        import {second}
        import beam_dpsu
        assert beam_dpsu.SelectItems and beam_dpsu.CountReleased  # the Beam modules load
        assert state() == before, (before, state())
        assert sys.meta_path[0].__module__.split(".")[0] != "beam_dpsu"
        """)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""


def test_users_logging_config_after_the_imports_takes_effect():
    done = run("""
        import logging
        import beam_dpsu
        import apache_beam
        assert beam_dpsu.SelectItems
        logging.basicConfig(level=logging.INFO, format="USER %(levelname)s %(message)s")
        logging.getLogger("mine").info("hello")
        logging.warning("careful")
        """)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["USER INFO hello", "USER WARNING careful"]


def test_users_logging_config_before_the_imports_is_kept():
    done = run(f"""
        import logging
        logging.basicConfig(level=logging.INFO, format="USER %(levelname)s %(message)s")
        {STATE}
        before = state()
        import beam_dpsu
        assert beam_dpsu.SelectItems
        assert state() == before, (before, state())
        logging.warning("careful")
        """)
    assert done.returncode == 0, done.stderr
    assert "apitools" not in done.stderr
    assert "USER WARNING careful" in done.stderr.splitlines()


def test_the_core_imports_no_beam():
    done = run("""
        import sys
        import beam_dpsu
        from beam_dpsu.core import thresholds
        assert beam_dpsu.WeightedGaussian and thresholds
        assert not any(name.split(".")[0] == "apache_beam" for name in sys.modules)
        """)
    assert done.returncode == 0, done.stderr
