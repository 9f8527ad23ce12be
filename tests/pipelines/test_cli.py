"""The shared command-line pieces (pipelines/flags.py, errors.py, output_folder.py,
settings.py), without running pipelines."""

import errno
import logging
import os
import subprocess
import sys

import pytest
from apache_beam.options.pipeline_options import DirectOptions, StandardOptions

from beam_dpsu import Budget, ZCDPBudget
import pipelines
from pipelines import errors, flags, ngrams, output_folder, settings, vocabulary
from pipelines.io.errors import InputFormatError

from tests.support.paths import ROOT

pytestmark = pytest.mark.subprocess


def parse(argv):
    return flags.parse_job_args(vocabulary.build_parser(), argv)


REQUIRED = ["--input", "x", "--delta", "1e-5", "--output", "o"]


def test_both_spellings_are_accepted_and_beam_options_pass_through():
    args, options = parse(REQUIRED + ["--max_items_per_user", "7", "--keep-case",
                                      "--non_private_stats=true", "--direct_num_workers", "2",
                                      "--runner=DirectRunner", "--experiments=a",
                                      "--experiments", "b"])
    assert args.max_items_per_user == 7 and args.keep_case and args.non_private_stats
    assert options.view_as(DirectOptions).direct_num_workers == 2
    assert options.view_as(StandardOptions).runner == "DirectRunner"
    assert options.get_all_options()["experiments"] == ["a", "b"]


@pytest.mark.parametrize("extra,message", [
    (["--mechansim", "sips"], "unknown flag --mechansim; did you mean --mechanism?"),
    (["--mechanism_typo=sips"], "unknown flag --mechanism_typo; did you mean --mechanism?"),
    (["--mech", "sips"], "unknown flag --mech; did you mean --mechanism?"),  # no abbreviations
    (["--epsi", "1"], "unknown flag --epsi; did you mean --epsilon?"),
    (["--direct_num_worker", "2"], "did you mean --direct_num_workers"),
    (["--zzzz"], "unknown flag --zzzz (see python -m pipelines.vocabulary --help)"),
    (["stray"], "unexpected argument 'stray'"),
    (["--direct_num_workers", "many"], "bad Beam pipeline option: argument "
                                       "--direct_num_workers: invalid int value: 'many'"),
])
def test_unknown_flags_name_the_closest_valid_ones(extra, message):
    with pytest.raises(errors.UsageError) as err:
        parse(REQUIRED + extra)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_help_shows_one_spelling_per_flag():
    for build in (vocabulary.build_parser, ngrams.build_parser):
        text = build().format_help()
        options_part = text.split("examples:")[0]
        assert "--max-items-per-user" in options_part
        assert "--max_items_per_user" not in options_part
        assert "--keep-case [BOOL]" in options_part


def test_help_runs_without_beam_noise():
    proc = subprocess.run([sys.executable, "-m", "pipelines.vocabulary", "--help"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stderr == ""
    assert proc.stdout.startswith("usage: python -m pipelines.vocabulary")


def test_beam_noise_filter():
    f = pipelines.BEAM_NOISE_FILTER
    record = logging.LogRecord("root", logging.WARNING, "", 0, "apitools not found, and …",
                               None, None)
    assert not f.filter(record)
    record = logging.LogRecord("apache_beam.options.pipeline_options", logging.WARNING, "", 0,
                               "Discarding unparseable args: %s", (["--x"],), None)
    assert not f.filter(record)
    # Beam's ERROR log of an exception the job reports itself …
    try:
        raise InputFormatError("f:2: field 1 (user id) is empty")
    except InputFormatError as exc:
        record = logging.LogRecord("apache_beam.runners.common", logging.ERROR, "", 0, exc,
                                   None, sys.exc_info())
    assert not f.filter(record)
    # … but not of a genuine bug, nor our own lines.
    try:
        raise KeyError("bug")
    except KeyError as exc:
        record = logging.LogRecord("apache_beam.runners.common", logging.ERROR, "", 0, exc,
                                   None, sys.exc_info())
    assert f.filter(record)
    assert f.filter(logging.LogRecord("pipelines", logging.INFO, "", 0, "reading x", None, None))


def test_error_message_strips_beam_context_and_unwraps_portable_errors():
    exc = InputFormatError("f:2: bad [while running 'ReadPairs/ParseRecords']")
    assert errors.error_message(exc) == "f:2: bad"
    wrapped = RuntimeError("Pipeline job failed in state FAILED: Traceback …\n"
                           "pipelines.io.errors.InputFormatError: f:3: field 2 (item) is empty "
                           "[while running 'X']\n")
    assert errors.error_message(wrapped) == "f:3: field 2 (item) is empty"
    assert errors.error_message(RuntimeError("something else")) is None


@pytest.mark.parametrize("exc", [
    OSError(errno.ENOSPC, "No space left on device", "/data/out/.staging/items-x"),
    RuntimeError("OSError: [Errno %d] No space left on device [while running "
                 "'WriteItems/SortAndWriteShard']" % errno.ENOSPC),
    RuntimeError("Pipeline failed: Traceback (most recent call last):\n  File …\nOSError: "
                 "[Errno %d] Disk quota exceeded [while running 'WriteReport/Write']"
                 % errno.EDQUOT),
])
def test_a_full_disk_is_worded_whatever_wraps_it(exc):
    from pipelines.errors import error_message
    message = error_message(exc)
    assert message and "\n" not in message and "/data/out" not in message, message
    assert message.startswith(os.strerror(exc.errno if isinstance(exc, OSError)
                                          else errno.ENOSPC if "space" in str(exc)
                                          else errno.EDQUOT)), message
    assert "free some space and run again" in message
    if isinstance(exc, RuntimeError):
        assert "in step 'Write" in message


def test_other_os_errors_stay_bugs():
    from pipelines.errors import error_message
    assert error_message(RuntimeError("OSError: [Errno 5] Input/output error")) is None


def test_prepare_output(tmp_path):
    out = tmp_path / "a" / "b"
    output = output_folder.prepare_output(str(out))
    # Nothing at the final path yet: a hidden sibling (its parent created) takes the run.
    assert not out.exists() and os.listdir(tmp_path / "a") == [os.path.basename(output.staging)]
    (tmp_path / "a" / output.staging / "x").write_text("x")
    output.commit()
    assert os.listdir(out) == ["x"] and os.listdir(tmp_path / "a") == ["b"]
    with pytest.raises(errors.UsageError, match="give --overwrite"):
        output_folder.prepare_output(str(out))
    failed = output_folder.prepare_output(str(tmp_path / "c" / "d"))
    failed.discard()  # the parents it created go too
    assert os.listdir(tmp_path) == ["a"]
    a_file = tmp_path / "f"
    a_file.write_text("x")
    with pytest.raises(errors.UsageError, match="is a file"):
        output_folder.prepare_output(str(a_file / "sub"))
    with pytest.raises(errors.UsageError, match="cannot write output"):
        output_folder.prepare_output("nosuchscheme://bucket/out")


def test_describe_budget():
    assert settings.describe_budget(Budget(1, 1e-6)) == "(ε = 1, δ = 1e-06)-DP"
    assert settings.describe_budget(ZCDPBudget(0.1, 1e-5)) == (
        "ρ = 0.1 zCDP, δ = 1e-05 (by the zCDP conversion: ≈ (ε = 1.91, δ = 2e-05)-DP)")
    # A Gaussian mechanism's report states the exact curve: the smaller ε at 2δ.
    from beam_dpsu import SelectItems, WeightedGaussian
    report = SelectItems(WeightedGaussian(100), ZCDPBudget(0.1, 1e-5)).report
    assert settings.describe_budget(ZCDPBudget(0.1, 1e-5), report["dp_equivalents"]) == (
        "ρ = 0.1 zCDP, δ = 1e-05 (by the mechanism's privacy curve: ≈ (ε = 1.76, "
        "δ = 2e-05)-DP)")
    # Under auto the report states only the conversion (the curve depends on the Δ0
    # chosen when the pipeline runs): labelled as the conversion, not as the curve.
    auto = SelectItems(WeightedGaussian("auto"), ZCDPBudget(0.1, 1e-5)).report
    assert settings.describe_budget(ZCDPBudget(0.1, 1e-5), auto["dp_equivalents"]) == (
        "ρ = 0.1 zCDP, δ = 1e-05 (by the zCDP conversion: ≈ (ε = 1.91, δ = 2e-05)-DP)")
