"""The command-line reference, docs/reference/cli.md, generated from the parsers: ``cardiosim --doc``.

Every verb of :data:`cardiosim.cli.COMMANDS` (``sweep`` and ``bench``, which parse their own words, through their
own parsers: :func:`cardiosim.cli.sweep.parser` and each benchmark's), with its usage, description and arguments as
``--help`` prints them. Usage lines are wrapped at :data:`WIDTH` columns and prose is reflowed to it, so the page
does not depend on the terminal it was made in.
"""

from __future__ import annotations

import argparse
import importlib
import re
import textwrap
from pathlib import Path

from cardiosim.cli import common
from cardiosim.runtime.errors import SimulationError, UserError
from cardiosim.runtime.signals import STOPPED

WIDTH = 118
COMMAND = "cardiosim --doc > docs/reference/cli.md"
# argparse's own groups: their arguments share one table; any other group gets a table of its own, titled
DEFAULT_GROUPS = ("positional arguments", "options", "optional arguments")
STARTS = {common.MPI: "an MPI process", common.LOCAL: "without MPI",
          common.RAW: "without MPI; its runs as child processes"}


class _Built(Exception):
    """Raised where a benchmark's main parses its words: the parser it built, nothing run."""

    def __init__(self, parser):
        super().__init__()
        self.parser = parser


def reference_markdown(top: argparse.ArgumentParser, command) -> str:
    """The whole page, from ``cardiosim``'s parser and ``command(verb)``, a verb's module (cardiosim.cli passes
    its own: this module does not import the package, which imports it)."""
    verbs = subparsers(top)
    lines = ["# Command-line reference", "",
             *_wrap(f"Generated from the parsers of `cardiosim/cli/` (and, for `cardiosim bench NAME`, of "
                    f"`cardiosim/bench/`) by `{COMMAND}`: edit those, not this page. `cardiosim VERB --help` "
                    f"prints the same, at the terminal's width (here {WIDTH} columns). Every command takes "
                    f"`--help` and shares one error path: a mistake in the input is one line on stderr, exit status "
                    f"{UserError.exit_status}, nothing written."), "",
             *_usage(top), *_paragraph(top.description, top.prog), *_arguments(top),
             "| verb | what | started |", "|---|---|---|"]
    for verb, (sub, help_) in verbs.items():
        lines.append(f"| [`{verb}`](#cardiosim-{verb}) | {_cell(help_)} | {STARTS[command(verb).START]} |")
    lines += ["", *_exit_statuses()]
    for verb, (sub, help_) in verbs.items():
        module = command(verb)
        if verb == "bench":
            lines += _bench(module)
        else:
            parser = module.parser() if module.START == common.RAW else sub
            lines += _section(f"cardiosim {verb}", parser, "##", help_)
    return "\n".join(lines).rstrip("\n") + "\n"


def subparsers(parser) -> dict:
    """verb -> (its subparser, its one-line help), in the order of the command table."""
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help for a in action._choices_actions}
    return {verb: (sub, helps.get(verb, "")) for verb, sub in action.choices.items()}


def _exit_statuses() -> list[str]:
    return ["## Exit statuses", "", "| status | meaning |", "|---|---|",
            "| 0 | done |",
            f"| {common.BUG} | `run --strict`: the end-of-run checks warned; `info`: the installation's parts do not "
            "fit; an internal error (a bug: reported with its traceback, the whole MPI job aborted) |",
            f"| {UserError.exit_status} | bad input: one line naming the key, option or file; nothing written |",
            f"| {SimulationError.exit_status} | the run went wrong (a state out of range, a diverged solver) or a "
            "write failed (a full disk, `ulimit -f`): one line, the output kept up to there |",
            f"| {STOPPED} | stopped by SIGTERM, SIGINT or SIGUSR1 after writing a checkpoint: resume with "
            "`--restart` |",
            f"| {common.INTERRUPTED} | interrupted (SIGINT) where no checkpoint was asked for |", ""]


def _bench(module) -> list[str]:
    """``cardiosim bench``: the table of benchmarks, then each one's arguments."""
    names = module.BENCHMARKS
    parsers = {name: _parser_of(importlib.import_module(path).main) for name, path in names.items()}
    lines = ["## `cardiosim bench`", "", "```text", "usage: cardiosim bench NAME [options] [-- PETSc options]", "```",
             "", "| name | module | what |", "|---|---|---|"]
    for name, path in names.items():
        lines.append(f"| [`{name}`](#cardiosim-bench-{name}) | `{path}` | {_cell(parsers[name].description)} |")
    others = _benchmarks_without_a_verb(set(names.values()))
    lines.append("")
    if others:
        lines += [*_wrap(", ".join(f"`python -m {m}`" for m in others) + " are benchmarks without a verb."), ""]
    for name, parser in parsers.items():
        parser.prog = f"cardiosim bench {name}"    # some name themselves python -m MODULE
        lines += _section(parser.prog, parser, "###")
    return lines


def _parser_of(main) -> argparse.ArgumentParser:
    """The parser a benchmark's ``main(words)`` builds: it is called with argparse's parsing intercepted, so it
    stops there, before it runs anything."""
    original = argparse.ArgumentParser.parse_known_args

    def built(self, *args, **kwargs):
        raise _Built(self)

    argparse.ArgumentParser.parse_known_args = built
    try:
        main([])
    except _Built as b:
        return b.parser
    finally:
        argparse.ArgumentParser.parse_known_args = original
    raise RuntimeError(f"{main.__module__}.main returned without parsing its arguments")


def _benchmarks_without_a_verb(with_verb: set[str]) -> list[str]:
    """The modules of cardiosim/bench/ with a ``main`` that no ``cardiosim bench NAME`` starts (read, not imported)."""
    folder = Path(__file__).resolve().parents[1] / "bench"
    return [f"cardiosim.bench.{p.stem}" for p in sorted(folder.glob("*.py"))
            if f"cardiosim.bench.{p.stem}" not in with_verb and re.search(r"^def main\(", p.read_text(), re.M)]


def _section(title: str, parser, level: str, summary: str = "") -> list[str]:
    """A command's heading, usage, description (else its line in ``cardiosim --help``), arguments and epilog."""
    return [f"{level} `{title}`", "", *_usage(parser), *_paragraph(parser.description or summary, parser.prog),
            *_arguments(parser), *_paragraph(parser.epilog, parser.prog)]


def _formatter(parser):
    return parser.formatter_class(prog=parser.prog, width=WIDTH)


def _usage(parser) -> list[str]:
    f = _formatter(parser)
    f.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups)   # "usage: " as --help says
    return ["```text", *f.format_help().strip("\n").splitlines(), "```", ""]


def _arguments(parser) -> list[str]:
    """A table of the arguments (argparse's own groups together), then one per named group."""
    f = _formatter(parser)
    tables: list[tuple[str, list]] = []
    for group in parser._action_groups:
        actions = [a for a in group._group_actions
                   if a.help is not argparse.SUPPRESS and not isinstance(a, (argparse._HelpAction,
                                                                               argparse._SubParsersAction))]
        if not actions:
            continue
        title = "" if group.title in DEFAULT_GROUPS else group.title
        if tables and not title and not tables[-1][0]:
            tables[-1][1].extend(actions)
        else:
            tables.append((title, actions))
    lines = []
    for title, actions in tables:
        if title:
            lines += [f"*{_escape(title)}*", ""]
        lines += ["| argument | what |", "|---|---|"]
        for a in actions:
            invocation = f._format_action_invocation(a).replace("|", "\\|")     # GFM: a cell's | even in code
            lines.append(f"| `{invocation}` | {_cell(f._expand_help(a) if a.help else '')} |")
        lines.append("")
    return lines


def _paragraph(text, prog: str) -> list[str]:
    """Prose of a parser (its description, its epilog), %(prog)s expanded as argparse does."""
    return [*_wrap(_escape(text.replace("%(prog)s", prog))), ""] if text else []


def _wrap(text: str) -> list[str]:
    return textwrap.wrap(" ".join(text.split()), WIDTH, break_long_words=False, break_on_hyphens=False)


def _escape(text: str) -> str:
    """Markdown's special characters in argparse's plain text: ``*`` would start emphasis, ``<`` a tag (the text
    would vanish), ``|`` end a table's cell."""
    return re.sub(r"([\\*<|])", r"\\\1", " ".join(text.split()))


def _cell(text) -> str:
    return _escape(text or "")
