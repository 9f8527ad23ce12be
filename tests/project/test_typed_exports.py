"""The package's names reach a user's type checker: ``from beam_dpsu import X`` passes
``mypy --strict``.

Strict mypy exports from a package only what it can read without running it: names
imported with an alias or listed in a literal ``__all__``. A computed ``__all__`` passes
the project's own (non-strict) mypy run but gives a user's strict one "Module
"beam_dpsu" does not explicitly export attribute …" for every name.
"""

import os
import subprocess
import sys

import pytest

import beam_dpsu
from tests.support.paths import ROOT

pytestmark = pytest.mark.subprocess


def test_every_public_name_type_checks_strictly_in_user_code(tmp_path):
    pytest.importorskip("mypy")  # the lint extra, which CI installs
    user = tmp_path / "user_code.py"
    user.write_text(f"from beam_dpsu import {', '.join(beam_dpsu.__all__)}\n", encoding="utf-8")
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\n", encoding="utf-8")
    # Errors in beam_dpsu itself are the project mypy run's job; here only the user's file.
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports=silent",
         "--config-file", str(config), "--cache-dir", str(tmp_path / "cache"), str(user)],
        cwd=ROOT, capture_output=True, text=True, env={**os.environ, "MYPYPATH": ROOT})
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(beam_dpsu.__all__) > 30  # the import line named the whole API
