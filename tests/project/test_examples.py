"""The scripts of examples/ run as their docstrings say (examples/pipelinedp_aggregation.py
has its own tests, in tests/pipelines/evaluation)."""

import gzip
import os
import subprocess
import sys

import beam_dpsu
from tests.support.paths import ROOT

import pytest

pytestmark = pytest.mark.subprocess


def run_example(name: str, args, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT}  # as after `pip install -e .`
    return subprocess.run([sys.executable, os.path.join(ROOT, "examples", name), *args],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_select_from_csv_reads_a_csv_file_and_writes_items_and_counts(tmp_path):
    # 300 users write "a cat and a dog", one user "a secret": with δ = 1e-9 the secret
    # (one user) is released with probability < 1e-9, while cat and dog (300 users
    # each, far above SIPS' threshold) fail to be with probability < 1e-9 each.
    path = tmp_path / "reviews.csv.gz"
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write("user,review\n")
        f.writelines(f'u{i},"A cat, and a dog"\n' for i in range(300))
        f.write("loner,a secret\n")
    out = tmp_path / "out"
    proc = run_example("select_from_csv.py", ["--input", str(path), "--epsilon", "1",
                                              "--delta", "1e-9", "--output", str(out)],
                       cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "apitools" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    items = beam_dpsu.read_released(str(out / "items-*.txt"))
    assert {"cat", "dog", "a", "and"} <= set(items) and "secret" not in items
    assert items == sorted(items)
    counts = beam_dpsu.read_counts(str(out / "counts-*.tsv"))
    assert [item for item, _ in counts] == items  # every released item, no other
    assert proc.stdout.startswith(f"released {len(items)} words with SIPS under "
                                  "(ε = 1, δ = 1e-09)-DP")
    assert "tight split, scale 1." in proc.stdout
