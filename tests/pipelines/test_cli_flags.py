"""What a newcomer meets on the command line: negative numbers, errors in flags,
repeated flags, flags that do not apply, help texts that name real flags
(docs/privacy.md, invariant 5)."""

import ast
import io
import os
import re
import contextlib

import numpy as np
import pytest

import beam_dpsu
from pipelines import errors, flags, ngrams, vocabulary
from pipelines.evaluation import benchmark, evaluate
from tests.support import job_calls
from tests.support.input_files import write_pairs
from tests.support.job_checks import assert_refused
from tests.support.job_flags import FLAG, beam_flags, job_flags, job_parsers
from tests.support.paths import ROOT
from tests.support.runner import job_args

pytestmark = pytest.mark.job

BUDGET = ["--epsilon", "1", "--delta", "1e-5"]
# A library's own spellings: a parameter name, a Budget/ZCDPBudget repr or a
# budget dict. None of them may reach a job's error line.
LIBRARY_SPELLINGS = re.compile(
    r"\b(max_items_per_user|counts_share|max_n|hot_key_fanout|num_shards|noise_decay"
    r"|single_n)\b|Budget\(|\{'type'|\b(epsilon|delta|rho|decay|eta|alpha|rounds|ratio"
    r"|shards|n)\s*=")


def one_error_line(main, argv) -> str:
    """The job's error line; asserts it is the only line (besides progress) and exit 2."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(argv)
    lines = [line for line in err.getvalue().splitlines() if not line.startswith("[")]
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), err.getvalue()
    return lines[0]


@pytest.fixture
def pairs(tmp_path):
    path = tmp_path / "in.csv"
    path.write_text("u1,cat\nu2,dog\n", encoding="utf-8")
    return ["--input", str(path), "--format", "pairs", "--output", str(tmp_path / "o")]


@pytest.fixture
def text(tmp_path):
    path = tmp_path / "in.txt"
    path.write_text("the cat sat\nthe dog ran\n", encoding="utf-8")
    return ["--input", str(path), "--format", "text", "--output", str(tmp_path / "o")]


# -- negative numbers are values, not flags -----------------------------------------


@pytest.mark.parametrize("extra,message", [
    # A job refuses --delta 0 too (selecting items is never pure DP): 0 < delta < 1.
    (["--epsilon", "1", "--delta", "-1e-5"], "error: --delta must satisfy 0 < delta < 1, "
                                            "got -1e-05"),
    (["--epsilon", "1", "--delta", "2"], "error: --delta must satisfy 0 < delta < 1, got 2.0"),
    (["--epsilon", "1", "--delta", "1"], "error: --delta must satisfy 0 < delta < 1, got 1.0"),
    (["--rho", "1", "--delta", "nan"], "error: --delta must satisfy 0 < delta < 1, got nan"),
    (["--epsilon", "-1", "--delta", "1e-5"], "error: --epsilon must be a finite number > 0"),
    (["--epsilon", "-1E3", "--delta", "1e-5"], "error: --epsilon must be a finite number > 0"),
    (["--epsilon", "-inf", "--delta", "1e-5"], "error: --epsilon must be a finite number > 0"),
    (["--rho", "-0.1", "--delta", "1e-5"], "error: --rho must be a finite number > 0"),
    (["--rho", "-.5e-2", "--delta", "1e-5"], "error: --rho must be a finite number > 0"),
    (["--max-items-per-user", "-5", *BUDGET], "error: --max-items-per-user must be >= 1, got -5"),
    (["--max_items_per_user=-5", *BUDGET], "error: --max-items-per-user must be >= 1, got -5"),
    (["--num-shards", "-1", *BUDGET], "error: --num-shards must be >= 1, got -1"),
    (["--mechanism", "sips", "--ratio", "-0.5", *BUDGET], "error: --ratio must satisfy"),
    (["--mechanism", "gw", "--alpha", "-1e-3", *BUDGET], "error: --alpha must be a finite "
                                                        "number >= 0, got -0.001"),
    (["--hot-key-fanout", "-2", *BUDGET], "error: --hot-key-fanout must be >= 1, got -2"),
    (["--seed", "-3", *BUDGET], "error: --seed must be"),
])
def test_negative_numbers_get_the_range_error(pairs, extra, message):
    line = one_error_line(vocabulary.main, pairs + extra)
    assert line.startswith(message), line
    assert "expected one argument" not in line


@pytest.mark.parametrize("extra,message", [
    (["--eta", "-0.01", *BUDGET], "error: --eta must lie strictly between 0 and 1"),
    (["--max-n", "-2", *BUDGET], "error: --max-n must be an int >= 1, got -2"),
    (["--max-items-per-user", "-5,3", "--max-n", "2", *BUDGET],
     "error: --max-items-per-user must be >= 1, got -5"),
    (["--noise-decay", "-1", *BUDGET], "error: --noise-decay must be a finite number > 0"),
])
def test_negative_numbers_ngrams(text, extra, message):
    line = one_error_line(ngrams.main, text + extra)
    assert line.startswith(message), line


def test_negative_numbers_evaluate(pairs):
    line = one_error_line(evaluate.main, pairs + ["--no-plot", "--epsilons", "-1,2",
                                                  "--delta", "1e-5"])
    assert line.startswith("error: --epsilons must be a finite number > 0, got -1.0"), line
    line = one_error_line(evaluate.main, pairs + ["--no-plot", "--epsilons", "1",
                                                  "--delta", "-1e-5"])
    assert line.startswith("error: --delta must satisfy"), line


def test_a_flag_after_a_flag_is_still_a_missing_value():
    with pytest.raises(errors.UsageError, match="argument --delta: expected one argument"):
        flags.parse_job_args(vocabulary.build_parser(),
                           ["--input", "x", "--output", "o", "--delta", "--epsilon", "1"])


def test_negative_values_reach_beam_options():
    _, options = flags.parse_job_args(vocabulary.build_parser(),
                                    ["--input", "x", "--output", "o", "--delta", "1e-5",
                                     "--direct_num_workers", "-1"])
    assert options.get_all_options()["direct_num_workers"] == -1


def argparse_private_names() -> set:
    """The underscore names of argparse: its module's, its classes' and their instances'."""
    import argparse
    parser = argparse.ArgumentParser()
    things = [argparse, argparse.ArgumentParser, argparse.HelpFormatter, argparse.Action,
              parser, argparse.HelpFormatter("prog"), parser.add_argument_group("g"),
              parser.add_argument("--x")]
    names = {n for t in things for n in list(dir(t)) + list(vars(t))}
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def test_the_command_line_uses_argparse_and_beam_through_their_public_api():
    # No argparse internals (argparse._StoreAction, _negative_number_matcher, a
    # formatter's _split_lines …) and no Beam private name (_BeamArgumentParser);
    # Beam's documented hook for options classes, _add_argparse_args, is called.
    private = argparse_private_names()
    found = []
    for name in sorted(os.listdir(os.path.join(ROOT, "pipelines"))):
        if not name.endswith(".py"):
            continue
        with open(os.path.join(ROOT, "pipelines", name), encoding="utf-8") as f:
            tree = ast.parse(f.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr in private:
                found.append(f"{name}:{node.lineno}: .{node.attr}")
            elif isinstance(node, ast.FunctionDef) and node.name in private:
                found.append(f"{name}:{node.lineno}: def {node.name}")
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                    "apache_beam"):
                found += [f"{name}:{node.lineno}: {a.name}" for a in node.names
                          if a.name.startswith("_")]
    assert found == []


# -- errors speak in flags ------------------------------------------------------------


VOCABULARY_ERRORS = [
    (["--epsilon", "0", "--delta", "1e-5"], "--epsilon"),
    (["--epsilon", "nan", "--delta", "1e-5"], "--epsilon"),
    (["--rho", "0", "--delta", "1e-5"], "--rho"),
    (["--epsilon", "1", "--delta", "0"], "--delta"),
    (["--rho", "0.1", "--delta", "0"], "--delta"),
    (["--with-counts", "--epsilon", "1", "--delta", "0"], "--delta"),
    (["--max-items-per-user", "0", *BUDGET], "--max-items-per-user"),
    (["--mechanism", "sips", "--rounds", "0", *BUDGET], "--rounds"),
    (["--mechanism", "sips", "--ratio", "2", *BUDGET], "--ratio"),
    (["--mechanism", "gw", "--shards", "0", *BUDGET], "--shards"),
    (["--mechanism", "policy-gaussian", "--alpha", "-1", *BUDGET], "--alpha"),
    (["--mechanism", "weighted-gaussian", "--rounds", "3", *BUDGET], "--rounds"),
    (["--mechanism", "count-laplace", "--alpha", "3", "--shards", "2", *BUDGET], "--alpha"),
    (["--mechanism", "truncated-geometric", "--rho", "0.1", "--delta", "1e-5"], "--epsilon"),
    (["--mechanism", "truncated-geometric", "--epsilon", "40", "--delta", "1e-15",
      "--max-items-per-user", "1"], "--epsilon"),
    (["--with-counts", "--counts-share", "1.5", *BUDGET], "--counts-share"),
    (["--with-counts", "--counts-share", "0", *BUDGET], "--counts-share"),
    (["--with-counts", "--counts-max-items-per-user", "0", *BUDGET],
     "--counts-max-items-per-user"),
    (["--hot-key-fanout", "0", *BUDGET], "--hot-key-fanout"),
    (["--num-shards", "0", *BUDGET], "--num-shards"),
]


@pytest.mark.parametrize("extra,flag", VOCABULARY_ERRORS)
def test_vocabulary_errors_name_the_flag_not_the_library(pairs, extra, flag):
    line = one_error_line(vocabulary.main, pairs + extra)
    assert flag in line, line
    assert not LIBRARY_SPELLINGS.search(line), line


@pytest.mark.parametrize("extra,flag", [
    (["--max-n", "0", *BUDGET], "--max-n"),
    (["--eta", "1", *BUDGET], "--eta"),
    (["--max-items-per-user", "0", *BUDGET], "--max-items-per-user"),
    (["--max-items-per-user", "5,6", *BUDGET], "--max-items-per-user"),
    (["--noise-decay", "0", *BUDGET], "--noise-decay"),
    (["--level1", "policy-gaussian", "--alpha", "-1", *BUDGET], "--alpha"),
    (["--epsilon", "1", "--delta", "0"], "--delta"),
    (["--rho", "0", "--delta", "1e-5"], "--rho"),
    (["--method", "dpsu-single", *BUDGET], "--single-n"),
    (["--method", "dpsu-single", "--single-n", "5", *BUDGET], "--single-n"),
    (["--method", "dpsu-all", "--max-items-per-user", "0", *BUDGET], "--max-items-per-user"),
    (["--method", "dpsu-even", "--max-items-per-user", "3,4,5", *BUDGET],
     "--max-items-per-user"),
    (["--method", "dpsu-all", "--epsilon", "1", "--delta", "0"], "--delta"),
    (["--with-counts", "--counts-share", "2", *BUDGET], "--counts-share"),
    (["--with-counts", "--counts-max-items-per-user", "0", *BUDGET],
     "--counts-max-items-per-user"),
])
def test_ngrams_errors_name_the_flag_not_the_library(text, extra, flag):
    line = one_error_line(ngrams.main, text + extra)
    assert flag in line, line
    assert not LIBRARY_SPELLINGS.search(line), line


@pytest.mark.parametrize("extra,flag", [
    (["--epsilons", "0,1", "--delta", "1e-5"], "--epsilons"),
    (["--rhos", "0", "--delta", "1e-5"], "--rhos"),
    (["--epsilons", "1", "--delta", "0"], "--delta"),
    (["--epsilons", "1", "--delta", "1e-5", "--max-items-per-user", "0"],
     "--max-items-per-user"),
    (["--epsilons", "1", "--delta", "1e-5", "--mechanisms", "sips", "--rounds", "0"],
     "--rounds"),
    (["--epsilons", "1", "--delta", "1e-5", "--mechanisms", "gw", "--alpha", "-2"], "--alpha"),
    (["--epsilons", "1", "--delta", "1e-5", "--hot-key-fanout", "0"], "--hot-key-fanout"),
    (["--rhos", "1", "--delta", "1e-5", "--mechanisms", "truncated-geometric"], "--epsilons"),
])
def test_evaluate_errors_name_the_flag_not_the_library(pairs, extra, flag):
    line = one_error_line(evaluate.main, pairs + ["--no-plot"] + extra)
    assert flag in line, line
    assert not LIBRARY_SPELLINGS.search(line), line


def test_library_messages_are_unchanged():
    # The translation is the CLI's: the library keeps its parameter names.
    from beam_dpsu import Budget
    with pytest.raises(ValueError, match=r"^epsilon must be a finite number > 0"):
        Budget(-1, 1e-5)


# -- flags that do not apply, repeated flags --------------------------------------------


@pytest.mark.parametrize("fmt,fields", [("csv", ["--user-field", "u", "--text-field", "t"]),
                                        ("jsonl", ["--user-field", "u", "--text-field", "t"])])
def test_skip_header_lines_is_refused_where_it_does_not_apply(tmp_path, fmt, fields):
    path = tmp_path / f"in.{fmt}"
    path.write_text("u,t\na,cat\n" if fmt == "csv" else '{"u": "a", "t": "cat"}\n',
                    encoding="utf-8")
    line = one_error_line(vocabulary.main, ["--input", str(path), "--format", fmt, *fields,
                                            "--skip-header-lines", "1", *BUDGET,
                                            "--output", str(tmp_path / "o")])
    assert f"--skip-header-lines applies to --format pairs or text, not {fmt}" in line, line
    assert not (tmp_path / "o").exists()


def test_skip_header_lines_is_refused_for_msnbc(tmp_path):
    msnbc = os.path.join(ROOT, "examples", "msnbc_1k.seq")
    line = one_error_line(ngrams.main, ["--input", msnbc, "--skip-header-lines", "2", *BUDGET,
                                        "--output", str(tmp_path / "o")])
    assert "--skip-header-lines applies to --format pairs or text, not msnbc" in line, line


@pytest.mark.parametrize("extra,flag", [
    (["--epsilon", "2"], "--epsilon"),
    (["--delta=1e-6"], "--delta"),
    (["--max-items-per-user", "3", "--max_items_per_user", "4"], "--max-items-per-user"),
    (["--keep-case", "--keep-case=false"], "--keep-case"),
    (["--mechanism", "sips", "--mechanism", "gw"], "--mechanism"),
])
def test_a_repeated_flag_is_an_error_naming_it(pairs, extra, flag):
    line = one_error_line(vocabulary.main, pairs + BUDGET + extra)
    assert f"{flag} is given more than once" in line, line


def test_a_repeated_beam_option_is_an_error_but_list_options_repeat():
    base = ["--input", "x", "--output", "o", "--delta", "1e-5"]
    with pytest.raises(errors.UsageError, match="--runner is given more than once"):
        flags.parse_job_args(vocabulary.build_parser(),
                           base + ["--runner", "DirectRunner", "--runner=PortableRunner"])
    _, options = flags.parse_job_args(vocabulary.build_parser(),
                                    base + ["--experiments", "a", "--experiments=b"])
    assert options.get_all_options()["experiments"] == ["a", "b"]


def test_repeated_benchmark_flag(capsys):
    assert benchmark.main(["--repeats", "2", "--repeats", "3", "--", "--input", "x"]) == 2
    assert "--repeats is given more than once" in capsys.readouterr().err


# -- help texts and README name only real flags -----------------------------------------


@pytest.mark.parametrize("job", ["vocabulary", "ngrams", "evaluate", "benchmark",
                                 "benchmark_peers", "delta0_benchmark", "command"])
def test_help_names_only_flags_that_exist(job):
    parsers = job_parsers()
    if job not in parsers:
        pytest.skip("benchmark_peers does not import here")
    parser = parsers[job]
    known = job_flags(parser)
    if job == "benchmark":
        # Flags after -- are the timed job's own; the benchmark takes no Beam option.
        known |= job_flags(parsers["vocabulary"]) | job_flags(parsers["ngrams"])
    else:
        known |= beam_flags()
    text = parser.format_help()
    named = set(FLAG.findall(text))
    assert named and named <= known, sorted(named - known)
    # A flag broken over two lines (at a hyphen) is not one the reader can copy.
    assert not re.search(r"--[a-z0-9_-]*-\n", text), text


def test_readme_names_only_flags_that_exist():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    known = beam_flags().union(*(job_flags(p) for p in job_parsers().values()))
    placeholders = {"--a-b", "--a_b"}  # README's example of the two spellings
    placeholders |= {"--dist"}  # pytest-xdist's, in the test command
    named = set(FLAG.findall(text)) - placeholders
    assert named - known == set()


# -- grammar of the messages ------------------------------------------------------------


def string_literals():
    """(file, line, text) of every string literal (f-string parts joined) in the code."""
    for folder in ("beam_dpsu", "pipelines"):
        for name in sorted(os.listdir(os.path.join(ROOT, folder))):
            if not name.endswith(".py"):
                continue
            path = os.path.join(ROOT, folder, name)
            with open(path, encoding="utf-8") as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                if isinstance(node, ast.JoinedStr):
                    parts = [v.value if isinstance(v, ast.Constant) else "{}"
                             for v in node.values]
                    yield f"{folder}/{name}", node.lineno, "".join(map(str, parts))
                elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                    yield f"{folder}/{name}", node.lineno, node.value


DUPLICATED_WORD = re.compile(r"\b([A-Za-z]{2,})\s+\1\b", re.IGNORECASE)
# "a" before a vowel sound, "an" before a consonant (a lower-case word: "an n-gram",
# "an L2" and "a UTF-8" are right).
WRONG_ARTICLE = re.compile(r"\b[Aa] (?!one\b|once\b|u[nst]i|use|usu|eu)[aeiou][a-z]+\b"
                           r"|\b[Aa]n (?!hour|honest|heir|ndarray)[b-df-hj-np-tv-z][a-z]+\b")


def test_no_duplicated_words_or_wrong_articles_in_messages():
    found = []
    for path, line, text in string_literals():
        for pattern in (DUPLICATED_WORD, WRONG_ARTICLE):
            for match in pattern.finditer(text):
                found.append(f"{path}:{line}: {match.group(0)!r}")
    assert found == []


def test_no_fixed_article_before_a_type_name():
    # f"got a {type(x).__name__}" says "got a int": the article must follow the name.
    found = []
    for folder in ("beam_dpsu", "pipelines"):
        for name in sorted(os.listdir(os.path.join(ROOT, folder))):
            if not name.endswith(".py"):
                continue
            with open(os.path.join(ROOT, folder, name), encoding="utf-8") as f:
                tree = ast.parse(f.read())
            for node in ast.walk(tree):
                if not isinstance(node, ast.JoinedStr):
                    continue
                for before, value in zip(node.values, node.values[1:]):
                    if (isinstance(before, ast.Constant) and isinstance(value, ast.FormattedValue)
                            and re.search(r"\b[Aa]n? $", before.value)
                            and "__name__" in ast.unparse(value.value)):
                        found.append(f"{folder}/{name}:{node.lineno}")
    assert found == []


def test_counts_in_messages_agree_in_number():
    from beam_dpsu.core.checks import a_type, plural
    assert plural(1, "budget") == "1 budget" and plural(2, "budget") == "2 budgets"
    assert plural(1, "mechanism") == "1 mechanism" and plural(0, "trial") == "0 trials"
    assert a_type(3) == "an int" and a_type(np.zeros(1)) == "an ndarray"
    assert a_type("x") == "a str" and a_type(None) == "a NoneType"


def test_the_checks_find_what_they_look_for():
    assert DUPLICATED_WORD.search("stop at at line 3")
    assert WRONG_ARTICLE.search("must be a int") and WRONG_ARTICLE.search("an file")
    assert not WRONG_ARTICLE.search("a user, an item, a one-off")


def test_one_released_item_is_one_item(tmp_path, capsys):
    path = tmp_path / "in.csv"
    path.write_text("".join(f"u{i},cat\n" for i in range(300)) + "x,dog\n", encoding="utf-8")
    code = vocabulary.main(job_args(["--input", str(path), "--format", "pairs", "--rho", "1",
                            "--delta", "1e-7", "--max-items-per-user", "1",
                            "--output", str(tmp_path / "o")]))
    captured = capsys.readouterr()
    # "cat" (300 users, weight 300 against SIPS's thresholds ≤ 15.4, σ ≤ 2.6) is missed
    # w.p. < 1e-300; "dog" (one user, weight 1) passes a round's threshold w.p. 1e-7 in
    # all (δ = 1e-7 at Δ0 = 1): this fails by chance w.p. about 1e-7.
    assert code == 0 and captured.out.startswith("released 1 item with "), captured.out
    assert "sips: released 1 item\n" in captured.err  # the default mechanism


@pytest.mark.parametrize("job", ["vocabulary", "ngrams"])
def test_pre_threshold_help_says_what_the_threshold_does_and_its_default_once(job):
    # The threshold rises by K − 1 over the mechanism's own, except Policy Gaussian's,
    # whose base threshold changes too (beam_dpsu.core.pre_threshold, 2.).
    action = next(a for a in job_parsers()[job]._actions
                  if "--pre-threshold" in a.option_strings)
    text = job_parsers()[job].format_help()
    start = text.index("--pre-threshold K", text.index("options:"))
    helped = " ".join(text[start:text.index("\n  -", start)].split())  # up to the next flag
    assert helped.count("(default") == 1 and "(default: 1, none)" in helped
    assert "policy-gaussian" in action.help and "K − 1" in action.help


def test_mechanism_names_and_auto_ignore_case_alike(pairs, capsys):
    # One rule for the names a flag takes: --mechanism as --max-items-per-user's "auto".
    code = vocabulary.main(job_args([*pairs, *BUDGET, "--mechanism", "Weighted-Gaussian",
                            "--max-items-per-user", "AUTO"]))
    assert code == 0, capsys.readouterr().err


@pytest.mark.parametrize("spelling", ["SIPS", " Policy-Gaussian ", "WEIGHTED-GAUSSIAN"])
def test_a_mechanism_spelled_in_capitals_gets_the_same_job_defaults(spelling, tmp_path):
    # The job's defaults (Δ0 chosen privately for these mechanisms) follow the name as
    # the library reads it, so SIPS gets what sips gets.
    def parsed(name):
        args = vocabulary.parse_args(["--input", str(tmp_path / "pairs.csv"), "--format",
                                      "pairs", "--mechanism", name, "--epsilon", "1",
                                      "--delta", "1e-5", "--output", str(tmp_path / "out")])[0]
        return args.max_items_per_user, args.job_defaults
    (tmp_path / "pairs.csv").write_text("u1,a\nu2,a\n", encoding="utf-8")
    assert parsed(spelling) == parsed(spelling.strip().lower()) == (
        "auto", {"max_items_per_user": "auto"})


@pytest.mark.parametrize("spell", [str.title, lambda name: f" {name.upper()} "],
                         ids=["title", "upper-spaced"])
def test_algorithm_choices_ignore_case_and_spaces_as_mechanism_names_do(text, pairs, spell,
                                                                          capsys):
    # --pruning, --level1, --method and --sips-removal name algorithms as --mechanism does:
    # one rule for all of them (beam_dpsu.core.checks.canonical_name).
    args, _, transform = ngrams.parse_args(text + BUDGET + [
        "--pruning", spell("single"), "--level1", spell("policy-gaussian")])
    assert (args.pruning, args.level1) == ("single", "policy-gaussian")
    assert (transform.pruning, transform.level1) == ("single", "policy-gaussian")
    args = ngrams.parse_args(text + BUDGET + ["--method", spell("dpsu-even")])[0]
    assert args.method == "dpsu-even"
    args, _, mechanism, _ = vocabulary.parse_args(pairs + BUDGET + [
        "--mechanism", "sips", "--sips-removal", spell("join")])
    assert args.sips_removal == mechanism.removal == "join"
    # Comma lists of mechanisms read each entry so, twice given however spelled.
    line = one_error_line(evaluate.main, pairs + ["--no-plot", "--epsilons", "1", "--delta",
                                                  "1e-5", "--mechanisms",
                                                  f"sips,{spell('sips')}"])
    assert "--mechanisms gives sips twice" in line, line
    line = one_error_line(benchmark.main, ["--mechanisms", f"gw,{spell('gw')}", "--",
                                           *pairs[:4], *BUDGET])
    assert "--mechanisms gives gw twice" in line, line
    # An unknown name is still refused, naming the flag.
    line = one_error_line(ngrams.main, text + BUDGET + ["--pruning", spell("sometimes")])
    assert "--pruning" in line and "invalid choice" in line, line


# -- values too large to use are refused naming the flag ------------------------------------

FIXED = ["--delta", "1e-5", "--max-items-per-user", "2"]


@pytest.fixture
def pairs_csv(tmp_path) -> str:
    return write_pairs(tmp_path / "pairs.csv", ["cat", "dog"])


def test_huge_epsilon_is_refused_naming_the_flag(tmp_path, pairs_csv):
    out = tmp_path / "out"
    proc = job_calls.vocabulary(["--input", pairs_csv, "--format", "pairs", "--epsilon", "1e308",
                                 *FIXED, "--output", out])
    assert "--epsilon" in assert_refused(proc, out)
    # The error line alone: no RuntimeWarning of the float overflow before it.
    assert "Warning" not in proc.stderr, proc.stderr[-3000:]


def test_huge_num_shards_is_refused_naming_the_flag(tmp_path, pairs_csv):
    # Taken, --num-shards 100000 writes 100,000 files for minutes (the timeout ends such a
    # run at 90 s); refused, the run takes seconds.
    out = tmp_path / "out"
    proc = job_calls.vocabulary(["--input", pairs_csv, "--format", "pairs", "--epsilon", "1",
                                 *FIXED, "--num-shards", "100000", "--output", out], timeout=90)
    assert "--num-shards" in assert_refused(proc, out)


# -- --version and what --help names -------------------------------------------------------


@pytest.mark.parametrize("module", ["vocabulary", "ngrams"])
def test_version_prints_the_version(module):
    proc = job_calls.run(module, ["--version"], timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert beam_dpsu.__version__ in proc.stdout


def test_ngrams_help_names_no_pairs_format():
    proc = job_calls.run("ngrams", ["--help"], timeout=120)
    assert proc.returncode == 0
    assert "pairs" not in proc.stdout


def test_input_help_names_lzma():
    proc = job_calls.run("vocabulary", ["--help"], timeout=120)
    assert proc.returncode == 0
    assert ".lzma" in proc.stdout
