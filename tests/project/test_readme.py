"""Every ```python block of README.md runs on its own, as written."""

import os
import re

import pytest

from tests.support.paths import ROOT


def python_blocks():
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        return re.findall(r"```python\n(.*?)```", f.read(), re.S)


def run_block(index, capsys) -> str:
    code = python_blocks()[index]
    exec(compile(code, f"README.md python block {index + 1}", "exec"), {"__name__": "readme"})
    return capsys.readouterr().out


def block_index(word: str) -> int:
    return next(i for i, b in enumerate(python_blocks()) if word in b)


def test_readme_has_the_blocks_tested_here():
    assert len(python_blocks()) == 8


def test_first_block_prints_the_report_and_releases_the_common_item(capsys):
    out = run_block(block_index("SelectItems(beam_dpsu.WeightedGaussian"), capsys).splitlines()
    sigma, threshold = map(float, out[0].split())
    assert sigma == pytest.approx(2.23607, rel=1e-5)
    assert threshold == pytest.approx(11.726, rel=1e-4)
    # "cat" (51 users) is released with probability 1 − Φ(−17) ≈ 1; "dog" (one user)
    # with probability Φ((0.707 − 11.73)/2.24) < 1e-6: this fails by chance < 1e-6.
    assert out[1:] == ["cat"]


def test_records_block_releases_the_common_items(capsys):
    out = run_block(block_index("One element per review"), capsys)
    # 300 users hold each common item (weight 150 against σ = 1 and ρ ≈ 6.7);
    # 'rare' and 'word' are ann's alone: one of them is released with
    # probability ≤ δ = 1e-7 (the threshold's guarantee), so this fails by
    # chance < 1e-6.
    assert out.strip() == "['a', 'cat', 'film', 'good']"


def test_fields_block_reads_rows_by_field_name(capsys):
    out = run_block(block_index("user_field="), capsys)
    # As the records block: 300 users hold each common item; 'rare' and 'word'
    # are ann's alone, each released with probability ≤ δ = 1e-7: this fails
    # by chance < 1e-6.
    assert out.strip() == "['a', 'cat', 'good']"


def test_ngram_block_prints_the_sorted_ngrams(capsys):
    lines = [line for line in run_block(block_index("ExtractNgrams"), capsys).splitlines() if line]
    # Every held n-gram has 200 users behind it, far above every threshold ρ_k. Unseeded:
    # fails by chance w.p. 1e-1729 (each unigram weighs 200/√3 = 115 against ρ_1 = 6.2,
    # σ = 1.2; the 2- and 3-grams weigh more against ρ_k ≤ σΦ⁻¹(1 − η/3) = 3.3).
    # A spurious k-gram (a valid one no user holds) is drawn with probability
    # Φ(−ρ_k/σ_k) each among the few unheld valid ones, so do not pin
    # the exact set: the held ones must be there, one per line, sorted.
    assert {"cat", "cat sat", "sat", "the", "the cat", "the cat sat"} <= set(lines)
    assert lines == sorted(lines, key=lambda line: tuple(line.split(" ")))


def test_composition_block_runs_end_to_end(capsys):
    out = run_block(block_index("BudgetAccountant(budget)"), capsys).splitlines()
    # 300 users hold "common" (far above the threshold); "secret" has one user:
    # released with probability ≤ δ = 2.5e-7.
    assert out[0] == "common"
    assert out[1].startswith("BudgetAccountant(total=Budget(epsilon=2.0, delta=1e-06), "
                             "spent=(epsilon=2, delta=1e-06)")
    assert out[2].startswith("refused: spending epsilon=0.01 would exceed the total")


def test_shared_accountant_block_refuses_the_overspending_transform(capsys):
    out = run_block(block_index("accountant=accountant"), capsys)
    assert out.startswith("refused: SelectItems (weighted-gaussian) asks for "
                          "Budget(epsilon=0.5, delta=1e-09): spending epsilon=0.5 would exceed "
                          "the total epsilon=2.0 (already spent 1.75)")


def test_readme_counts_example_runs(capsys):
    out = run_block(block_index("CountReleased"), capsys)
    assert out.startswith("discrete_gaussian 14.14213")  # σ² = Δ0/(2ρ) = 20/(2·0.05) = 200
    # Both items are released (300 holders each, weight 212 against ρ = 9.6, σ = 1.8: one
    # is missed w.p. < 1e-300) and counted once each.
    counted = [line for line in out.splitlines() if line.startswith("(")]
    assert sorted(line.split(",")[0] for line in counted) == ["('cat'", "('dog'"]


def test_pre_threshold_block_releases_only_the_item_of_enough_users(capsys):
    # "cat": weight 30 against ρ_10 ≈ 13.0 with σ ≈ 0.71 (released with probability
    # 1 − 1e-100); "lynx" has 3 < 10 holders and is never noised.
    out = run_block(block_index("pre_threshold=10"), capsys)
    assert out.split() == ["cat"]


def test_tokenize_is_shown_and_reachable_from_the_top_level():
    # README's tokenize is the package's: importable as written, and named so.
    import beam_dpsu
    from beam_dpsu import Tokenizer, Tokens, tokenize
    assert tokenize is beam_dpsu.tokenize and isinstance(tokenize, Tokenizer)
    assert isinstance(tokenize("A <br /> Cat, http://x.y/z cat"), Tokens)
    assert tokenize("A <br /> Cat, http://x.y/z cat") == ["a", "cat", "cat"]
    assert {"tokenize", "Tokenizer", "Tokens"} <= set(beam_dpsu.__all__)
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        text = f.read()
    # Every code span that uses them says where they come from.
    prose = re.sub(r"```.*?```", "", text, flags=re.S)  # (code blocks run above)
    spans = [s for s in re.findall(r"`([^`]+)`", prose) if re.search(r"\bTokeni[sz]er\b|"
                                                                     r"\btokenize\b", s)]
    assert spans, "README shows no tokenize"
    assert [s for s in spans if not re.search(r"beam_dpsu[. ]", s)] == []


def test_readme_names_only_what_beam_dpsu_has():
    import importlib
    import beam_dpsu
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        names = set(re.findall(r"\bbeam_dpsu\.(\w+)", f.read()))
    missing = [n for n in sorted(names) if not hasattr(beam_dpsu, n)
               and importlib.util.find_spec(f"beam_dpsu.{n}") is None]
    assert missing == []


def test_readme_blocks_print_no_beam_warning_in_a_fresh_interpreter():
    # Each block imports beam_dpsu before apache_beam: Beam's "apitools not found"
    # warning (its GCP extras missing) is then dropped, whatever the order after.
    import subprocess
    import sys
    blocks = python_blocks()
    assert all(b.index("import beam_dpsu") < b.index("import apache_beam")
               for b in blocks if "import apache_beam" in b)
    code = blocks[block_index("SelectItems(beam_dpsu.WeightedGaussian")]
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": ROOT})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr == "", proc.stderr[-3000:]
