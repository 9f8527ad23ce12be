"""The jobs' command line: a strict argument parser, and Beam's options beside it.

:class:`JobArgumentParser` takes no abbreviations, each flag once, ``--a-b``
and ``--a_b`` alike and negative numbers as values; :func:`parse_job_args`
parses what the job does not know as Beam pipeline options. Only argparse's
public API is used. Details: docs/explanation/jobs.md#the-command-line
"""

from __future__ import annotations

import argparse
import difflib
import re
import sys
import textwrap
from typing import Iterable, Sequence

from apache_beam.options.pipeline_options import PipelineOptions, StandardOptions
from apache_beam.runners.runner import create_runner

from pipelines.errors import UsageError

__all__ = ["flags", "boolean", "int_or_auto", "JobArgumentParser", "BeamOptionsParser",
           "beam_option_flags", "parse_job_args"]


def flags(name: str) -> tuple[str, ...]:
    """``--a-b`` and its ``--a_b`` spelling (Flex Template parameter names have no hyphens)."""
    underscored = name.replace("-", "_")
    return (f"--{name}",) if underscored == name else (f"--{name}", f"--{underscored}")


def boolean(text: str) -> bool:
    """A flag value: true/false, yes/no, 1/0 (Flex Templates pass ``--flag=value``)."""
    value = text.strip().lower()
    if value in ("true", "yes", "1"):
        return True
    if value in ("false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def int_or_auto(text: str):
    """A --max-items-per-user value: an int, or "auto" (beam_dpsu.core.max_items_choice)."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an int or 'auto', got {text!r}") from None


# A number (or a list, --epsilons -1,2) that starts with "-": argparse reads such a word
# (-1e-5, -.5e-2, -inf) as a flag ("expected one argument").
_NUMBER = r"(?:(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?|inf(?:inity)?|nan)"
_NEGATIVE_NUMBER = re.compile(rf"^-{_NUMBER}(?:,\s*-?{_NUMBER})*$", re.IGNORECASE)


class _GivenOnce(argparse.Action):
    """argparse's store (nargs=0: store_const), refusing the flag a second time."""

    def __call__(self, parser, namespace, values, option_string=None):
        parser.given(self.dest)
        setattr(namespace, self.dest, self.const if self.nargs == 0 else values)


def _given_once(kwargs: dict) -> dict:
    """``add_argument``'s keywords with the single-valued actions made :class:`_GivenOnce`."""
    action = kwargs.get("action")
    if action in (None, "store"):
        return {**kwargs, "action": _GivenOnce}
    if action in ("store_true", "store_false"):
        value = action == "store_true"
        kwargs = {**kwargs, "const": value, "default": kwargs.get("default", not value)}
    elif action != "store_const":
        return kwargs
    return {**kwargs, "action": _GivenOnce, "nargs": 0}


def _is_alias(name: str, names: Iterable[str]) -> bool:
    """Whether ``name`` is the ``--a_b`` spelling of a ``--a-b`` among ``names``."""
    return name.startswith("--") and "_" in name and name.replace("_", "-") in names


def _with_default(action: argparse.Action) -> str | None:
    """The help text with "(default: …)" added where a default says something."""
    text, default = action.help, action.default
    if (text is None or text == argparse.SUPPRESS or "(default" in text
            or not action.option_strings or default is None or default is argparse.SUPPRESS
            or default is False):
        return text
    shown = "%(default)s" if not isinstance(default, bool) else str(default).lower()
    return f"{text} (default: {shown})"


class _FlagGroup:
    """A titled group of flags in ``--help``, whose flags follow the parser's rules."""

    def __init__(self, parser: "StrictArgumentParser", group):
        self._parser, self._group = parser, group

    def add_argument(self, *names, **kwargs) -> argparse.Action:
        return self._parser._add(self._group.add_argument, names, kwargs)


class StrictArgumentParser(argparse.ArgumentParser):
    """No abbreviations, single-valued flags given once, negative numbers as values.

    A ``--a_b`` spelling beside ``--a-b`` is a second, hidden flag of the same value.
    """

    def __init__(self, **kwargs):
        self._given: set[str] = set()
        self._shown: dict[str, str] = {}  # dest -> the spelling errors name
        self._option_strings: list[str] = []
        self._value_flags: set[str] = set()
        self._shown_actions: list[argparse.Action] = []  # those --help shows
        self._ready = False
        super().__init__(allow_abbrev=False, **kwargs)
        self._ready = True

    def add_argument(self, *names, **kwargs) -> argparse.Action:
        return self._add(super().add_argument, names, kwargs)

    def add_argument_group(self, *args, **kwargs):
        group = super().add_argument_group(*args, **kwargs)
        # (argparse's own groups, made while it starts, stay argparse's.)
        return _FlagGroup(self, group) if self._ready else group

    def _add(self, add, names: Sequence[str], kwargs: dict) -> argparse.Action:
        aliases = [n for n in names if _is_alias(n, names)]
        if aliases and kwargs.get("required"):
            raise ValueError(f"{names[0]}: a required flag takes one spelling")
        kwargs = _given_once(kwargs)
        action = add(*[n for n in names if n not in aliases], **kwargs)
        action.help = _with_default(action)
        self._note(action)
        for alias in aliases:
            self._note(add(alias, **{**kwargs, "dest": action.dest, "help": argparse.SUPPRESS}))
        return action

    def _note(self, action: argparse.Action) -> None:
        self._option_strings.extend(action.option_strings)
        if action.help != argparse.SUPPRESS:
            self._shown_actions.append(action)
        if action.nargs != 0:
            self._value_flags.update(action.option_strings)
        long = [s for s in action.option_strings if s.startswith("--")]
        if long:
            self._shown.setdefault(action.dest, long[0])

    def given(self, dest: str) -> None:
        """Called by this module's actions: the flag of ``dest`` a second time is an error."""
        if dest in self._given:
            self.error(f"{self._shown.get(dest, dest)} is given more than once: give each "
                       "flag once")
        self._given.add(dest)

    def option_strings(self) -> list[str]:
        """Every flag, both spellings, in the order they were added."""
        return list(self._option_strings)

    def with_negative_values_joined(self, args: Sequence[str]) -> list[str]:
        """``args`` with ``--flag -1e-5`` written ``--flag=-1e-5`` (up to a ``--``)."""
        joined: list[str] = []
        for i, arg in enumerate(args):
            if arg == "--":
                return joined + list(args[i:])
            if joined and joined[-1] in self._value_flags and _NEGATIVE_NUMBER.match(arg):
                joined[-1] = f"{joined[-1]}={arg}"
            else:
                joined.append(arg)
        return joined

    def parse_known_args(self, args=None, namespace=None):
        self._given = set()  # one command line at a time
        args = sys.argv[1:] if args is None else args
        return super().parse_known_args(self.with_negative_values_joined(args), namespace)


def _fill(text: str, width: int = 88) -> str:
    return textwrap.fill(text, width=width, break_on_hyphens=False)  # never at a flag's hyphens


def _wrap_command(command: str, width: int = 86) -> str:
    """A command line broken before flags into shell-continued lines of ≤ ``width``."""
    lines, line = [], "  "
    for word in re.split(r" (?=--)", command):
        if len(line) + len(word) + 1 > width and line.strip():
            lines.append(line + " \\")
            line = "      "
        line += ("" if line.strip() == "" else " ") + word
    return "\n".join(lines + [line])


_NO_BREAK_HYPHEN = "\u2011"  # in help texts while argparse wraps them


def _expanded(action: argparse.Action, prog: str) -> str:
    """The help text with its ``%(name)s`` fields filled in, as argparse fills them."""
    params = {k: v for k, v in {**vars(action), "prog": prog}.items() if v is not argparse.SUPPRESS}
    params = {k: getattr(v, "__name__", v) for k, v in params.items()}
    if params.get("choices") is not None:
        params["choices"] = ", ".join(map(str, params["choices"]))
    return (action.help or "") % params


class JobArgumentParser(StrictArgumentParser):
    """The jobs' strict argument parser, its errors :class:`~pipelines.errors.UsageError`.

    Args:
      prog: e.g. ``"python -m pipelines.vocabulary"``.
      description: what the job does, in a sentence or two.
      examples: command lines shown under "examples:" at the end of ``--help``.
      beam_options: whether other flags are Beam pipeline options (the help says so).
    """

    def __init__(self, prog: str, description: str, examples: Sequence[str] = (),
                 beam_options: bool = True):
        self._examples = "examples:\n" + "\n\n".join(_wrap_command(e) for e in examples)
        self._beam_options = beam_options
        super().__init__(prog=prog, description=_fill(description),
                         formatter_class=argparse.RawDescriptionHelpFormatter)
        from beam_dpsu import __version__
        self.add_argument("--version", action="version", version=f"%(prog)s {__version__}",
                          help="show the version and exit")

    def format_help(self) -> str:
        # The epilog names flags of this parser only, so it is written when shown.
        underscored = [s for s in self._option_strings if s.startswith("--") and "_" in s]
        example = ("--max_items_per_user" if "--max_items_per_user" in underscored
                   else next(iter(underscored), None))
        notes = []
        if example:
            notes.append(f"Flags are also accepted with underscores ({example}).")
        if self._beam_options:
            notes.append("Any other flag must be a Beam pipeline option: --runner, "
                         "--direct_num_workers N (local parallelism), --project, --region, "
                         "--temp_location, …")
        self.epilog = self._examples + ("\n\n" + _fill(" ".join(notes)) if notes else "")
        # Wrapped by argparse, but never at a hyphen ("--keep-" / "case").
        texts = {action: action.help for action in self._shown_actions if action.help}
        try:
            for action in texts:
                expanded = _expanded(action, self.prog).replace("-", _NO_BREAK_HYPHEN)
                action.help = expanded.replace("%", "%%")
            return super().format_help().replace(_NO_BREAK_HYPHEN, "-")
        finally:
            for action, text in texts.items():
                action.help = text

    def error(self, message):
        raise UsageError(f"{message} (see {self.prog} --help)")

    def option_names(self) -> list[str]:
        """Every flag as shown in help (hyphenated)."""
        return sorted({s for s in self._option_strings
                       if s.startswith("--") and not _is_alias(s, self._option_strings)})

    def was_given(self, dest: str) -> bool:
        """Whether the last command line parsed set the flag of ``dest``."""
        return dest in self._given


class BeamOptionsParser(StrictArgumentParser):
    """Every flag of Beam's registered ``PipelineOptions`` classes, parsed strictly.

    Built with each class's ``_add_argparse_args(parser)``, Beam's documented hook.
    """

    def __init__(self):
        super().__init__(add_help=False)
        seen = set()
        for cls in PipelineOptions.__subclasses__():
            if cls.__name__ not in seen:  # a class defined twice (a module reloaded)
                seen.add(cls.__name__)
                cls._add_argparse_args(self)  # pylint: disable=protected-access

    def add_value_provider_argument(self, *names, **kwargs) -> argparse.Action:
        """A templated option (Beam's ``ValueProvider``): given as ``--name value``."""
        if not names[0].startswith("-"):
            names = (f"--{names[0]}",) + tuple(names[1:])
            kwargs.pop("nargs", None)
        return self.add_argument(*names, **kwargs)

    def error(self, message):
        raise UsageError(f"bad Beam pipeline option: {message}")


def beam_option_flags() -> list[str]:
    """Every flag of Beam's pipeline options (``--runner``, ``--direct_num_workers``, …)."""
    return [s for s in BeamOptionsParser().option_strings() if s.startswith("--")]


def _closest(flag: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """The valid flags closest to ``flag``: similarity ≥ 0.7, within 0.1 of the best."""
    norm = {c.replace("_", "-"): c for c in candidates if c not in ("-h", "--help")}
    target = flag.replace("_", "-")
    scored = sorted(((difflib.SequenceMatcher(None, target, c).ratio(), c) for c in norm),
                    reverse=True)
    return [norm[c] for r, c in scored[:n] if r >= max(0.7, scored[0][0] - 0.1)]


def parse_job_args(parser: JobArgumentParser, argv: Sequence[str] | None):
    """(job arguments, Beam ``PipelineOptions``) from the command line.

    Flags the job does not define are Beam pipeline options; a flag neither
    knows is a :class:`~pipelines.errors.UsageError` naming the closest valid ones.
    """
    beam_parser = BeamOptionsParser()
    # Beam's own parser, which reads the options again, would take -1e-5 for a flag.
    argv = beam_parser.with_negative_values_joined(list(sys.argv[1:] if argv is None else argv))
    args, rest = parser.parse_known_args(argv)
    _, unknown = beam_parser.parse_known_args(rest)
    if unknown:
        flag = next((u for u in unknown if u.startswith("-")), None)
        if flag is None:
            raise UsageError(f"unexpected argument {unknown[0]!r} (flags take the form "
                             f"--name value; see {parser.prog} --help)")
        name = flag.split("=", 1)[0]
        close = _closest(name, parser.option_names() + beam_option_flags())
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise UsageError(f"unknown flag {name}{hint} (see {parser.prog} --help)")
    if ("multi_processing" in " ".join(rest) and not any(
            a.startswith("--default_sdk_harness_log_level") for a in rest)):
        # The DirectRunner's worker processes log at INFO to the console otherwise.
        rest = rest + ["--default_sdk_harness_log_level=WARNING"]
    options = PipelineOptions(rest)
    runner = options.view_as(StandardOptions).runner
    if runner is not None:
        try:
            create_runner(runner)  # an unknown --runner fails now, not after the checks
        except (ValueError, ImportError) as exc:
            raise UsageError(f"--runner {runner}: {str(exc).split('. ')[0]}") from None
    return args, options
