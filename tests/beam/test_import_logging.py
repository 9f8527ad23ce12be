"""``import beam_dpsu`` keeps Beam's "apitools not found" warning off stderr and
leaves the user's logging configuration as it was (each case in a fresh
interpreter: the import happens once per process)."""

import subprocess
import sys
import textwrap

from tests.support.paths import ROOT

import pytest

pytestmark = pytest.mark.subprocess

STATE = ("root = logging.getLogger(); "
         "state = lambda: (list(root.handlers), list(root.filters), root.level)")


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120, check=False)


def test_import_prints_no_apitools_warning_and_configures_no_logging():
    done = run(f"""
        import logging
        {STATE}
        before = state()
        import beam_dpsu
        assert state() == before, (before, state())
        """)
    assert done.returncode == 0, done.stderr
    assert "apitools" not in done.stderr
    assert done.stderr == ""


def test_users_logging_config_after_the_import_takes_effect():
    # Beam's import calls logging.basicConfig (through logging.warning) when the
    # root logger has no handler, which made a later basicConfig of the user's a no-op.
    done = run("""
        import logging
        import beam_dpsu
        logging.basicConfig(level=logging.INFO, format="USER %(levelname)s %(message)s")
        logging.getLogger("mine").info("hello")
        logging.warning("careful")
        """)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["USER INFO hello", "USER WARNING careful"]


def test_users_logging_config_before_the_import_is_kept():
    done = run(f"""
        import logging
        logging.basicConfig(level=logging.INFO, format="USER %(levelname)s %(message)s")
        {STATE}
        before = state()
        import beam_dpsu
        assert state() == before, (before, state())
        logging.warning("careful")
        """)
    assert done.returncode == 0, done.stderr
    assert "apitools" not in done.stderr
    assert "USER WARNING careful" in done.stderr.splitlines()


def test_beam_imported_first_is_left_alone():
    done = run(f"""
        import logging
        import apache_beam
        {STATE}
        before = state()
        import beam_dpsu
        assert state() == before, (before, state())
        """)
    assert done.returncode == 0, done.stderr
    # Beam's own import printed it, as it does without beam_dpsu.
    assert done.stderr.count("apitools not found") == 1


def test_other_warnings_during_the_quiet_import_still_show(tmp_path):
    (tmp_path / "noisy_module.py").write_text(textwrap.dedent("""
        import logging
        logging.warning("apitools not found, and bigquery client libraries are not available")
        logging.warning("something else")
        logging.getLogger("noisy").error("an error of its own")
        """))
    done = run(f"""
        import logging, sys
        sys.path.insert(0, {str(tmp_path)!r})
        import beam_dpsu
        {STATE}
        before = state()
        beam_dpsu._import_quietly("noisy_module")
        assert state() == before, (before, state())
        """)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == ["something else", "an error of its own"]


def test_the_users_own_beam_import_after_beam_dpsu_is_quiet_and_configures_nothing():
    # beam_dpsu imports Beam lazily: the user's `import apache_beam` after it is quiet
    # too (a one-shot import hook), and leaves logging as it was.
    done = run(f"""
        import logging
        {STATE}
        before = state()
        import beam_dpsu
        import apache_beam as beam
        assert state() == before, (before, state())
        assert beam.Pipeline and beam_dpsu.SelectItems
        import sys
        assert not any(type(f).__name__ == "_QuietBeamFinder" for f in sys.meta_path)
        """)
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
