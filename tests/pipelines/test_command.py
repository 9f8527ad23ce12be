"""The console command ``beam-dpsu`` (pipelines/command.py): subcommands, help, version,
errors, and a subcommand run that equals its module's byte for byte.

The entry point is not installed in this worktree's environment, so the tests
run ``python3 -m pipelines.command`` (what the entry point calls) and check
that setup.py's ``console_scripts`` entry resolves to it.
"""

import ast
import glob
import os
import re
import signal
import subprocess
import sys

import pytest

import beam_dpsu
from pipelines import command
from tests.support import job_calls
from tests.support.examples import imdb_slice
from tests.support.job_processes import interrupt_once_imported

pytestmark = [pytest.mark.job, pytest.mark.subprocess]

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLE = os.path.join(ROOT, "examples", "imdb_2k.csv.gz")


def setup_keywords() -> dict:
    """The keyword arguments of setup() in setup.py, as literals where they are."""
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    call = next(node for node in ast.walk(tree) if isinstance(node, ast.Call)
                and getattr(node.func, "id", None) == "setup")
    keywords = {}
    for keyword in call.keywords:
        try:
            keywords[keyword.arg] = ast.literal_eval(keyword.value)
        except ValueError:
            pass  # e.g. long_description=open(...).read()
    return keywords


def test_setup_py_entry_point_resolves_to_the_command():
    scripts = setup_keywords()["entry_points"]["console_scripts"]
    assert len(scripts) == 1
    name, target = (part.strip() for part in scripts[0].split("="))
    module, attribute = target.split(":")
    assert name == "beam-dpsu" == command.PROG
    assert module == "pipelines.command" and getattr(command, attribute) is command.main


def test_version_is_the_package_version(capsys):
    assert command.main(["--version"]) == 0
    out = capsys.readouterr()
    assert out.out == f"beam-dpsu {beam_dpsu.__version__}\n" and out.err == ""
    # The distribution's version (setup.py) is the one printed.
    assert setup_keywords()["version"] == beam_dpsu.__version__


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_lists_every_subcommand_on_one_line(capsys, flag):
    assert command.main([flag]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: beam-dpsu ")
    for name, job in command.JOBS.items():
        line = next(line for line in out.splitlines() if line.split()[:1] == [name])
        assert line.split(None, 1)[1] == job.summary
        assert job.summary.split()[0] in ("release", "compare")  # says what it releases
    assert "--version" in out
    assert max(map(len, out.splitlines())) <= 80


@pytest.mark.parametrize("argv,message", [
    ([], "error: give a command: vocabulary, ngrams or evaluate (see beam-dpsu --help)"),
    (["vocab"], "error: unknown command 'vocab': the commands are vocabulary, ngrams or "
                "evaluate (see beam-dpsu --help)"),
    (["--verbose", "vocabulary"], "error: unknown option '--verbose': the commands are "
                                  "vocabulary, ngrams or evaluate (see beam-dpsu --help)"),
])
def test_a_bad_or_missing_subcommand_is_one_error_line(capsys, argv, message):
    assert command.main(argv) == 2
    out = capsys.readouterr()
    assert out.out == "" and out.err == message + "\n"


def test_help_version_and_errors_do_not_import_beam():
    code = ("import sys\nfrom pipelines import command\n"
            "for argv in (['--help'], ['--version'], ['nope']):\n"
            "    command.main(argv)\n"
            "print('apache_beam' in sys.modules)\n")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "False"


@pytest.mark.parametrize("job", ["vocabulary", "ngrams", "evaluate"])
def test_a_subcommand_help_is_its_job_help_under_the_command_name(capsys, job):
    module = command.job_module(job)
    assert command.main([job, "--help"]) == 0
    out = capsys.readouterr().out
    prog = f"beam-dpsu {job}"
    assert out.startswith(f"usage: {prog} ")
    assert out == module.build_parser(prog).format_help()
    # Examples name the command too; the flags are the module's own.
    examples = out.split("examples:\n", 1)[1]
    assert f"  {prog} --input" in examples and "python -m pipelines" not in examples
    # Past the usage line, the module's help with the program name replaced (the
    # examples' lines break elsewhere: compare their words).
    def words(text, name):
        return re.sub(r"\s+(\\\s+)?", " ", text.split("\n\n", 1)[1].replace(name, "PROG"))

    assert words(out, prog) == words(module.build_parser().format_help(), module.PROG)


def test_a_subcommand_error_names_the_command(capsys):
    assert command.main(["vocabulary", "--input", EXAMPLE, "--delta", "1e-5",
                         "--output", "out", "--epsilonn", "1"]) == 2
    assert capsys.readouterr().err == ("error: unknown flag --epsilonn; did you mean "
                                       "--epsilon? (see beam-dpsu vocabulary --help)\n")


def test_each_subcommand_runs_its_module_main():
    for name, job in command.JOBS.items():
        module = command.job_module(name)
        assert module.__name__ == job.module and callable(module.main)
        assert module.PROG == f"python -m {job.module}"  # what the help's epilog says


def test_ctrl_c_while_importing_is_one_line(capsys, monkeypatch):
    def interrupted(name):
        raise KeyboardInterrupt

    monkeypatch.setattr(command, "job_module", interrupted)
    assert command.main(["vocabulary", "--help"]) == 130
    out = capsys.readouterr()
    assert out.err == "interrupted\n" and out.out == ""


def output_bytes(folder) -> dict:
    files = {}
    for path in sorted(glob.glob(os.path.join(folder, "*"))):
        with open(path, "rb") as f:
            files[os.path.basename(path)] = f.read()
    return files


def test_a_subcommand_run_equals_its_module_byte_for_byte(tmp_path):
    # 300 reviews: the seeded run releases a few dozen items (10 from 200 reviews).
    flags = ["--input", imdb_slice(tmp_path / "imdb_300.csv.gz", 300),
             "--user-field", "user", "--text-field", "review",
             "--mechanism", "weighted-gaussian", "--rho", "0.1", "--delta", "1e-5",
             "--max-items-per-user", "100", "--with-counts", "--seed", "7"]
    # The command as the entry point runs it (a fresh process); the module's own main, the
    # reference, in this process (tests/support/job_calls.py: its stdout as printed).
    runs = {}
    for name in ("command", "module"):
        out = tmp_path / name
        argv = [*flags, "--output", str(out)]
        if name == "command":
            proc = subprocess.run([sys.executable, "-m", "pipelines.command", "vocabulary",
                                   *argv], cwd=ROOT, capture_output=True, text=True,
                                  timeout=300)
        else:
            proc = job_calls.vocabulary(argv)
        assert proc.returncode == 0, proc.stderr
        runs[name] = (proc.stdout.replace(str(out), "OUT"), output_bytes(out))
    assert runs["command"] == runs["module"]
    summary, files = runs["command"]
    assert sorted(files) == ["counts-00000-of-00001.tsv", "items-00000-of-00001.txt",
                             "report.json"]
    assert summary.startswith("released ") and "SEEDED: not private" in summary
    assert files["items-00000-of-00001.txt"]  # something was released


# What the installed `beam-dpsu` script runs (setup.py's console_scripts wrapper).
CONSOLE_SCRIPT = ("import sys; sys.argv[0] = 'beam-dpsu'; from pipelines.command import main; "
                  "sys.exit(main())")


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_the_command_interrupted_while_beam_imports_is_one_line(sig, code):
    # The command caught only KeyboardInterrupt while the job module imported Beam:
    # SIGTERM ended it by the signal. The import log (level 2: the command blocks on
    # the full pipe until the signal) says when, not a clock.
    returncode, stdout, stderr = interrupt_once_imported(
        ["-c", CONSOLE_SCRIPT, "vocabulary", "--help"], "import 'apache_beam.", sig)
    assert returncode == code, (returncode, stderr[-3000:])
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr, stderr[-3000:]
    assert re.fullmatch(r"(?:(?:# |import ).*)?interrupted", stderr.splitlines()[-1])
