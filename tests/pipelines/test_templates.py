"""The Flex Template metadata agrees with the jobs' own argument parsers."""

import argparse
import json
import os
import re

import pytest

from pipelines import ngrams, vocabulary
from tests.support.paths import ROOT

JOBS = {"vocabulary": vocabulary.build_parser, "ngrams": ngrams.build_parser}
# seed: test-only (a seeded release is not private); version: prints the version and
# exits, not a parameter of a run.
NOT_IN_TEMPLATES = {"seed", "version"}


def load(job):
    with open(os.path.join(ROOT, "templates", f"{job}_metadata.json"), encoding="utf-8") as f:
        return json.load(f)


def actions(parser) -> dict:
    """dest → action for every job option (help excluded)."""
    return {a.dest: a for a in parser._actions if not isinstance(a, argparse._HelpAction)}


@pytest.mark.parametrize("job", sorted(JOBS))
def test_every_parameter_exists_and_agrees(job):
    meta = load(job)
    parser = JOBS[job]()
    by_dest = actions(parser)
    names = [p["name"] for p in meta["parameters"]]
    assert len(names) == len(set(names)), "duplicate parameter"
    for param in meta["parameters"]:
        name = param["name"]
        assert re.fullmatch(r"[a-zA-Z][a-zA-Z0-9_]*", name), name
        assert name in by_dest, f"{job}: template parameter {name!r} is not a job option"
        action = by_dest[name]
        assert f"--{name}" in action.option_strings, f"the job does not accept --{name}"
        assert param["isOptional"] == (not action.required), name
        assert param["label"] and param["helpText"]
        regexes = [re.compile(r) for r in param["regexes"]]
        if action.choices:
            for choice in action.choices:
                assert all(r.fullmatch(str(choice)) for r in regexes), (name, choice)
            assert not any(r.fullmatch("not-a-choice") for r in regexes), name
        if "defaultValue" in param:
            default = action.default
            expected = str(default).lower() if isinstance(default, bool) else str(default)
            assert param["defaultValue"] == expected, (name, param["defaultValue"], default)
            assert all(r.fullmatch(param["defaultValue"]) for r in regexes), name
            # The job parses the template's default to its own default.
            assert action.type is None or action.type(param["defaultValue"]) == default, name
        else:
            assert action.default in (None, False), f"{name}: default {action.default!r} missing"


@pytest.mark.parametrize("job", sorted(JOBS))
def test_every_job_option_is_in_the_template(job):
    names = {p["name"] for p in load(job)["parameters"]}
    missing = set(actions(JOBS[job]())) - names - NOT_IN_TEMPLATES
    assert not missing, f"{job}: options missing from the template metadata: {sorted(missing)}"


@pytest.mark.parametrize("job", sorted(JOBS))
def test_template_style_arguments_parse(job):
    # Flex Templates pass every parameter as --name=value.
    meta = load(job)
    argv = [f"--{p['name']}={p['defaultValue']}" for p in meta["parameters"]
            if "defaultValue" in p]
    argv += ["--input=x", "--delta=1e-5", "--output=o"]
    args, unknown = JOBS[job]().parse_known_args(argv)
    assert not unknown
    assert args.input == "x" and args.delta == 1e-5


def test_numeric_regexes():
    meta = {p["name"]: p for p in load("vocabulary")["parameters"]}
    delta = re.compile(meta["delta"]["regexes"][0])
    assert delta.fullmatch("1e-5") and delta.fullmatch("0.001") and not delta.fullmatch("abc")
    max_items = re.compile(meta["max_items_per_user"]["regexes"][0])
    assert max_items.fullmatch("100") and not max_items.fullmatch("0")
