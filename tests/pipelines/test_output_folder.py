"""One folder, one release (docs/privacy.md, invariant 9), and interrupts.

A job refuses an ``--output`` that already holds files unless ``--overwrite``
is given, and then replaces the folder as a whole; the folder appears
complete or not at all (the run writes into a hidden sibling that is renamed
into place), so a failed or interrupted run leaves neither an output folder
nor a sibling. SIGINT/SIGTERM end a job with one line ``interrupted``.
"""

import contextlib
import errno
import gzip
import io
import os
import signal
import subprocess
import sys
import time

import pytest

from pipelines import errors, job_runner, ngrams, output_folder, vocabulary
from pipelines.evaluation import evaluate
from pipelines.progress import configure_progress
from tests.support import job_calls
from tests.support.input_files import write_pairs
from tests.support.job_checks import assert_ran
from tests.support.job_processes import sigint_as_in_a_terminal
from tests.support.paths import ROOT
from tests.support.runner import job_args

pytestmark = [pytest.mark.job, pytest.mark.subprocess]

EXAMPLE = os.path.join(ROOT, "examples", "imdb_2k.csv.gz")
# Enough users holding each word that the seeded runs release something.
SURE = ["--epsilon", "5", "--delta", "1e-6", "--seed", "3", "--max-items-per-user", "3"]


def pairs_in(folder) -> str:
    """FOLDER/in/pairs.csv: 400 users holding 3 of 12 words each."""
    path = folder / "in" / "pairs.csv"
    path.parent.mkdir()
    path.write_text("".join(f"user{u},w{(u + k) % 12}\n" for u in range(400) for k in range(3)))
    return str(path)


@pytest.fixture
def pairs(tmp_path):
    return pairs_in(tmp_path)


def vocab(pairs, out, *extra):
    return vocabulary.main(job_args(["--input", pairs, "--format", "pairs", *SURE, "--output",
                            str(out),
                            *extra]))


def names(folder):
    return sorted(os.listdir(folder))


def only_error_line(err):
    lines = [line for line in err.splitlines() if not line.startswith("[")]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


# -- two releases in one folder --------------------------------------------------


def test_fewer_shards_into_the_same_folder_is_refused_then_replaces_everything(
        pairs, tmp_path, capsys):
    out = tmp_path / "out"
    assert vocab(pairs, out, "--num-shards", "3", "--with-counts") == 0
    first = names(out)
    assert len([n for n in first if n.startswith("items-")]) == 3
    capsys.readouterr()
    # Without --overwrite: one error line naming the flag, the first release untouched.
    assert vocab(pairs, out, "--num-shards", "2") == 2
    line = only_error_line(capsys.readouterr().err)
    assert "--overwrite" in line and str(out) in line
    assert names(out) == first
    # With it: nothing of the first run survives (its shards, its counts, a stray file).
    (out / "notes.txt").write_text("mine")
    assert vocab(pairs, out, "--num-shards", "2", "--overwrite") == 0
    assert names(out) == ["items-00000-of-00002.txt", "items-00001-of-00002.txt",
                          "report.json"]
    assert names(tmp_path) == ["in", "out"]  # no staging sibling left


def test_ngrams_refuses_a_folder_holding_files(tmp_path, capsys):
    src = tmp_path / "docs.txt"
    src.write_text("a b c\n" * 50)
    out = tmp_path / "out"
    out.mkdir()
    (out / "items-00000-of-00001.txt").write_text("old\n")
    code = ngrams.main(job_args(["--input", str(src), "--max-n", "2", "--max-items-per-user",
                        "3",
                        *SURE[:6], "--output", str(out)]))
    assert code == 2 and "--overwrite" in only_error_line(capsys.readouterr().err)
    assert ngrams.main(job_args(["--input", str(src), "--max-n", "2", "--max-items-per-user",
                        "3",
                        *SURE[:6], "--output", str(out), "--overwrite"])) == 0
    assert names(out) == ["ngrams-00000-of-00001.txt", "report.json"]


def test_evaluate_no_plot_over_a_plotted_run_leaves_no_old_plot(pairs, tmp_path, capsys):
    out = tmp_path / "eval"
    common = ["--input", pairs, "--format", "pairs", "--mechanisms", "weighted-gaussian",
              "--epsilons", "2", "--delta", "1e-5", "--max-items-per-user", "3",
              "--output", str(out)]
    out.mkdir()
    (out / "utility.png").write_bytes(b"an earlier run's plot")
    assert evaluate.main(job_args([*common + ["--no-plot"]])) == 2
    assert "--overwrite" in only_error_line(capsys.readouterr().err)
    assert evaluate.main(job_args([*common + ["--no-plot", "--overwrite"]])) == 0
    assert names(out) == ["results.csv", "summary.md"]
    assert names(tmp_path) == ["eval", "in"]


def test_evaluate_refuses_a_cache_inside_the_output(pairs, tmp_path, capsys):
    out = tmp_path / "eval"
    code = evaluate.main(job_args(["--input", pairs, "--format", "pairs", "--mechanisms", "gw",
                          "--epsilons", "2", "--delta", "1e-5", "--no-plot",
                          "--cache-dir", str(out / "cache"), "--output", str(out)]))
    assert code == 2 and "--cache-dir" in only_error_line(capsys.readouterr().err)
    assert not out.exists()


# -- the folder appears complete or not at all ----------------------------------------------


@pytest.fixture(scope="module")
def spied_run(tmp_path_factory):
    """One run as ``pairs`` and ``vocab`` make it, into a new folder, watched: (its folder,
    the output, what ``read_json`` saw (called after the pipeline, before the folder is
    put in place), stderr)."""
    base = tmp_path_factory.mktemp("spied")
    pairs = pairs_in(base)
    out = base / "out"
    seen = []
    read_json = job_runner.read_json

    def spy(path):
        seen.append((path, out.exists(), names(base)))
        return read_json(path)

    err = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stderr(err):
        patch.setattr(job_runner, "read_json", spy)
        assert vocab(pairs, out) == 0
    return base, out, seen, err.getvalue()


def test_the_run_writes_into_a_hidden_sibling_renamed_at_the_end(spied_run):
    base, out, seen, _ = spied_run
    (path, existed, siblings), = seen
    staging = os.path.dirname(path)
    assert not existed and os.path.dirname(staging) == str(base)
    assert os.path.basename(staging).startswith(".out.") and siblings == sorted(
        ["in", os.path.basename(staging)])
    assert names(base) == ["in", "out"] and "report.json" in names(out)


@pytest.fixture(scope="module")
def many_shards_run(tmp_path_factory):
    """One run of ``vocab`` with ``--num-shards 40`` into a folder that exists and is
    empty: (the output, stderr)."""
    base = tmp_path_factory.mktemp("shards")
    pairs = pairs_in(base)
    out = base / "out"
    out.mkdir()
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert vocab(pairs, out, "--num-shards", "40") == 0
    return out, err.getvalue()


def test_an_empty_existing_folder_is_used(many_shards_run):
    out, _ = many_shards_run
    assert names(out) == [f"items-{s:05d}-of-00040.txt" for s in range(40)] + ["report.json"]


def test_a_failed_run_leaves_no_folder_and_keeps_the_old_one(tmp_path, capsys):
    src = tmp_path / "pairs.csv"
    # The first record parses (checked before the run); line 300 fails during the run.
    src.write_text("".join(f"user{u},w{u % 7}\n" for u in range(299)) + "user299,\n")
    out = tmp_path / "a" / "out"
    assert vocab(str(src), out) == 2
    assert ":300:" in only_error_line(capsys.readouterr().err)
    assert names(tmp_path) == ["pairs.csv"]  # not even the parent it created
    # With --overwrite, a failing run leaves the earlier folder as it was.
    old = tmp_path / "old"
    old.mkdir()
    (old / "report.json").write_text("{}")
    assert vocab(str(src), old, "--overwrite") == 2
    assert names(old) == ["report.json"] and names(tmp_path) == ["old", "pairs.csv"]


@pytest.mark.parametrize("make,message", [
    (lambda p: p.write_text("x"), "is a file"),
    (lambda p: None, None),
])
def test_output_that_is_a_file_is_refused(tmp_path, make, message, pairs, capsys):
    target = tmp_path / "f"
    make(target)
    if message is None:  # a folder below a file
        (tmp_path / "g").write_text("x")
        target = tmp_path / "g" / "sub"
        message = "is a file"
    assert vocab(pairs, target, "--overwrite") == 2
    assert message in only_error_line(capsys.readouterr().err)


def test_overwrite_refuses_a_folder_holding_the_input_or_the_working_folder(
        pairs, tmp_path, capsys, monkeypatch):
    folder = os.path.dirname(pairs)
    assert vocab(pairs, folder, "--overwrite") == 2
    assert "holds the input" in only_error_line(capsys.readouterr().err)
    assert names(folder) == ["pairs.csv"]
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    monkeypatch.chdir(work / "sub")
    assert vocab(pairs, work, "--overwrite") == 2
    assert "working folder" in only_error_line(capsys.readouterr().err)
    assert names(work) == ["sub"]


def test_swap_replaces_a_folder_in_one_step(tmp_path):
    new, old = tmp_path / "new", tmp_path / "old"
    new.mkdir()
    old.mkdir()
    (new / "a").write_text("new")
    (old / "b").write_text("old")
    output_folder._swap_folders(str(new), str(old))
    assert names(old) == ["a"] and names(new) == ["b"]


@pytest.mark.parametrize("exchange", [True, False])
def test_overwrite_puts_the_new_folder_in_place_whole(tmp_path, monkeypatch, exchange):
    if not exchange:  # a system without renameat2: two renames, the old folder removed after
        monkeypatch.setattr(output_folder, "_swap_folders", lambda a, b: False)
    out = tmp_path / "out"
    out.mkdir()
    (out / "old.txt").write_text("old")
    output = output_folder.prepare_output(str(out), overwrite=True)
    (tmp_path / output.staging / "new.txt").write_text("new")
    assert names(out) == ["old.txt"]  # untouched while the run writes
    output.commit()
    assert names(out) == ["new.txt"] and names(tmp_path) == ["out"]


# A run's writers (the items' shard, report.json) meet a full disk.

FIXED = ["--delta", "1e-5", "--max-items-per-user", "2"]


@pytest.fixture
def pairs_csv(tmp_path) -> str:
    return write_pairs(tmp_path / "pairs.csv", ["cat", "dog"])


class _FullDisk:
    """A file being written on a full disk: every write fails with ENOSPC."""

    def __init__(self, handle):
        self._handle = handle

    def write(self, _data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    def __getattr__(self, name):
        return getattr(self._handle, name)


def test_a_full_disk_is_one_error_line_and_leaves_nothing(tmp_path, pairs_csv, monkeypatch,
                                                          capsys):
    from apache_beam.io.filesystems import FileSystems

    create = FileSystems.create
    monkeypatch.setattr(FileSystems, "create",
                        staticmethod(lambda path, *a, **k: _FullDisk(create(path, *a, **k))))
    out = tmp_path / "out"
    code = vocabulary.main(job_args(["--input", pairs_csv, "--format", "pairs",
                            "--epsilon", "1", *FIXED,
                            "--output", str(out)]))
    captured = capsys.readouterr()
    assert code == 2 and captured.out == "", captured.err[-3000:]
    assert "Traceback" not in captured.err, captured.err[-3000:]
    lines = [line for line in captured.err.splitlines() if not line.startswith("[vocabulary ")]
    assert len(lines) == 1 and lines[0].startswith("error: No space left on device"), lines
    assert "free some space" in lines[0] and str(tmp_path) not in lines[0]
    assert sorted(os.listdir(tmp_path)) == ["pairs.csv"]  # no output, no staging folder


# -- siblings left by a killed run ---------------------------------------------------


def test_a_run_holds_a_lock_on_its_staging_folder_until_it_ends(tmp_path):
    out = str(tmp_path / "out")
    for end in ("commit", "discard"):
        output = output_folder.prepare_output(out, overwrite=True)
        assert os.path.basename(output.staging).startswith(".out" + output_folder.STAGING)
        assert output_folder._locked(output.staging) is None  # another open file: refused
        getattr(output, end)()
        assert output._lock is None
    assert names(tmp_path) == ["out"]  # no starting, staging or old sibling left


def test_a_left_staging_folder_is_removed_and_a_live_one_kept_both_named(tmp_path, capsys):
    left = tmp_path / ".out.beam_dpsu-staging-0123456789ab"
    live = tmp_path / ".out.beam_dpsu-staging-ba9876543210"
    old = tmp_path / ".out.beam_dpsu-old-00000000000a"
    other = tmp_path / ".other.beam_dpsu-staging-0123456789ab"  # another output's
    for folder in (left, live, old, other):
        folder.mkdir()
        (folder / "items-00000-of-00001.txt").write_text("partial\n")
    held = output_folder._locked(str(live))  # as the run writing it holds it
    configure_progress("test")  # the progress lines on stderr, as a job has them
    try:
        output = output_folder.prepare_output(str(tmp_path / "out"))
        output.discard()
    finally:
        os.close(held)
    assert not left.exists() and live.exists() and old.exists() and other.exists()
    messages = capsys.readouterr().err.splitlines()  # warning lines of the pipelines logger
    assert len(messages) == 3, messages
    assert any(f"removed {left}" in m for m in messages)
    assert any(str(live) in m and "another run" in m for m in messages)
    assert any(str(old) in m and "moved aside" in m for m in messages)


def test_stale_staging_folder_is_removed_or_named(tmp_path, pairs_csv):
    # The name pipelines/output_folder.py (_sibling, STAGING) gives the hidden sibling a run
    # writes into: PARENT/.NAME.beam_dpsu-staging-<12 hex>.
    stale = tmp_path / ".out.beam_dpsu-staging-0123456789ab"
    stale.mkdir()
    (stale / "items-00000-of-00001.txt").write_text("partial\n", encoding="utf-8")
    proc = job_calls.vocabulary(["--input", pairs_csv, "--format", "pairs", "--epsilon", "1",
                                 *FIXED, "--output", tmp_path / "out"])
    assert_ran(proc)
    assert not stale.exists() or stale.name in proc.stderr


@pytest.mark.parametrize("remote", [False, True])
def test_a_temporary_file_left_by_a_dead_worker_is_not_released(tmp_path, remote):
    # A worker that dies between writing a shard's temporary file and renaming it
    # leaves that file in the staging folder (its retried bundle writes the shard
    # again): it must not be moved into place with the release.
    out = str(tmp_path / "out")
    if remote:
        os.makedirs(out)  # (object stores have no folders; local renames need one)
    output = output_folder._RemoteOutput(out) if remote else output_folder.prepare_output(out)
    os.makedirs(output.staging, exist_ok=True)
    for name in ("items-00000-of-00001.txt", "report.json",
                 "items.tmp-0123456789abcdef0123456789abcdef-00000.txt",
                 "report.json.tmp-fedcba9876543210fedcba9876543210"):
        with open(os.path.join(output.staging, name), "w") as f:
            f.write(name)
    output.commit()
    assert names(out) == ["items-00000-of-00001.txt", "report.json"]


def test_progress_names_the_written_files_where_they_end_up(spied_run):
    # "wrote …" names the final folder, not the staging folder gone after the rename.
    _, out, _, err = spied_run
    wrote = [line for line in err.splitlines() if "] wrote " in line]
    assert wrote and all(f"wrote {out}/items-" in line for line in wrote)


def test_progress_says_once_what_many_shards_wrote(many_shards_run):
    # `--num-shards 300` printed 300 "wrote …" lines: one line per writer now,
    # naming how many files (the flag's value), the first and the last.
    out, err = many_shards_run
    wrote = [line.split("] ", 1)[1] for line in err.splitlines() if "] wrote " in line]
    assert wrote == [f"wrote 40 files {out}/items-00000-of-00040.txt … "
                     f"{out}/items-00039-of-00040.txt"]


# -- remote outputs (gs://…): the same steps through Beam's FileSystems, tried on local paths


def test_remote_output_is_refused_when_it_holds_files_and_renamed_file_by_file(tmp_path):
    final = str(tmp_path / "bucket" / "out")
    os.makedirs(final)  # (object stores have no folders: only files are moved)
    with open(os.path.join(final, "old.txt"), "w") as f:
        f.write("old")
    with pytest.raises(errors.UsageError, match="--overwrite"):
        output_folder._RemoteOutput(final, overwrite=False)
    with pytest.raises(errors.UsageError, match="holds the input"):
        output_folder._RemoteOutput(final, overwrite=True, inputs=[final + "/old.txt"])
    output = output_folder._RemoteOutput(final, overwrite=True)
    assert os.path.basename(output.staging).startswith(".out.")
    os.makedirs(output.staging, exist_ok=True)
    for name in ("items-00000-of-00001.txt", "report.json"):
        with open(os.path.join(output.staging, name), "w") as f:
            f.write(name)
    output.commit()
    assert names(final) == ["items-00000-of-00001.txt", "report.json"]
    assert names(tmp_path / "bucket") == ["out"]
    failed = output_folder._RemoteOutput(str(tmp_path / "bucket" / "other"), overwrite=False)
    os.makedirs(failed.staging, exist_ok=True)
    with open(os.path.join(failed.staging, "x"), "w") as f:
        f.write("x")
    failed.discard()
    assert names(tmp_path / "bucket") == ["out"]


# -- interrupts ------------------------------------------------------------------


@pytest.fixture(scope="module")
def big_csv(tmp_path_factory):
    """examples/imdb_2k.csv.gz eight times over: a few seconds of work."""
    with gzip.open(EXAMPLE, "rt", encoding="utf-8") as f:
        header, *rows = f.read().split("\n")  # one row per line (no quoted line breaks)
    rows = [row + "\n" for row in rows if row]
    path = tmp_path_factory.mktemp("big") / "imdb_16k.csv.gz"
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=1) as f:
        f.write(header + "\n")
        for copy in range(8):
            f.writelines(f"c{copy}{row}" for row in rows)
    return str(path)


def interrupt(big_csv, out, sig, *extra):
    """Starts the vocabulary job, sends ``sig`` once it reads its input; (exit, stderr)."""
    command = [sys.executable, "-m", "pipelines.vocabulary", "--input", big_csv,
               "--user-field", "user", "--text-field", "review", "--rho", "0.1",
               "--delta", "1e-5", "--output", str(out), *extra]
    with sigint_as_in_a_terminal():
        proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    lines = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # the second progress line: the pipeline runs
        lines.append(proc.stderr.readline())
        if "(file 1 of 1)" in lines[-1] or not lines[-1]:
            break
    time.sleep(0.3)
    proc.send_signal(sig)
    rest, err = proc.communicate(timeout=60)
    return proc.returncode, "".join(lines) + err, rest


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_an_interrupt_is_one_line_and_leaves_no_folder(big_csv, tmp_path, sig, code):
    out = tmp_path / "out"
    returncode, err, stdout = interrupt(big_csv, out, sig)
    assert returncode == code, err
    assert "Traceback" not in err and stdout == ""
    other = [line for line in err.splitlines() if not line.startswith("[vocabulary ")]
    assert other == ["interrupted"], err
    assert names(tmp_path) == []


def test_an_interrupted_overwrite_keeps_the_old_folder(big_csv, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").write_text("{}")
    returncode, err, _ = interrupt(big_csv, out, signal.SIGTERM, "--overwrite")
    assert returncode == 143 and err.splitlines()[-1] == "interrupted"
    assert names(tmp_path) == ["out"] and names(out) == ["report.json"]


# -- an --output that names no folder of its own --------------------------------------------


@pytest.mark.parametrize("job", [vocabulary, ngrams])
@pytest.mark.parametrize("output", ["", " ", "\t", "/", "//", "/."])
def test_an_empty_blank_or_root_output_is_refused_before_anything_is_written(
        job, output, pairs, tmp_path, monkeypatch, capsys):
    # "" once wrote items-*.txt and report.json into the filesystem root: the run is
    # replaced by a spy, so that the test itself writes nowhere if the check is missing.
    ran = []
    monkeypatch.setattr(job, "run_prepared", lambda prepared: ran.append(prepared) or "ran")
    monkeypatch.chdir(tmp_path)  # a blank name would be a folder here
    before = names(tmp_path)
    argv = ["--input", pairs, "--format", "pairs" if job is vocabulary else "text",
            "--epsilon", "1", "--delta", "1e-5", "--output", output]
    if job is vocabulary:
        argv += ["--max-items-per-user", "10"]
    code = job.main(argv)
    line = only_error_line(capsys.readouterr().err)
    assert code == 2 and "--output" in line, line
    assert ran == [] and names(tmp_path) == before


def test_the_interrupts_learn_where_the_release_was_put_in_place(tmp_path):
    # What a later signal says depends on it (pipelines.interrupts.interrupted_line).
    from pipelines.interrupts import INTERRUPTS, interrupted_line
    folder = str(tmp_path / "out")
    with INTERRUPTS:
        assert INTERRUPTS.released_to is None and interrupted_line() == "interrupted"
        with pytest.raises(RuntimeError), output_folder.written_whole(folder) as staging:
            open(os.path.join(staging, "items.txt"), "w").close()
            raise RuntimeError("the job failed before its release was in place")
        assert INTERRUPTS.released_to is None and not os.path.exists(folder)
        with output_folder.written_whole(folder) as staging:
            open(os.path.join(staging, "items.txt"), "w").close()
    assert INTERRUPTS.released_to == folder and interrupted_line().startswith(
        f"interrupted after the release was complete: {folder} holds it")
    with INTERRUPTS:  # the next job starts with no release
        assert INTERRUPTS.released_to is None
