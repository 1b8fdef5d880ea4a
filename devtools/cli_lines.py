"""`webgym` command lines held to the real CLI: a shell line split into its `webgym`
invocations, each parsed by click's own parser against the command it names (nothing runs).
The docs check (devtools.docs_check) and the help check (tests/unit/webgym_cli/test_help.py)
use it."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from functools import cache

import typer.main
from typer._click.core import Command, Context
from typer._click.exceptions import BadOptionUsage, UsageError
from typer.core import TyperGroup

from webgym_cli.main import app

PLACEHOLDER = "__placeholder__"  # a placeholder word of a command line (`<process>`)
PLACEHOLDER_RE = re.compile(r"<[^<>\s]+>")
ELLIPSIS = {"…", "...", "[...]", "[…]"}
SHELL_BREAKS = {"&&", "||", ";", "|", "&", ">", ">>", "<", "2>", "2>&1", "(", ")"}


@dataclass
class Parsed:
    """A `webgym` command line parsed against the CLI: the command it names, what is wrong."""

    line: str
    path: tuple[str, ...] = ()
    problems: list[str] = field(default_factory=list)


@cache
def cli() -> TyperGroup:
    """The `webgym` command as click sees it (typer's own copy of click)."""
    command = typer.main.get_command(app)
    assert isinstance(command, TyperGroup)
    return command


def shell_lines(block: str) -> list[tuple[int, str]]:
    """A code block's lines, backslash continuations joined: (index of the first, line)."""
    lines: list[tuple[int, str]] = []
    pending, first = "", 0
    for i, raw in enumerate(block.splitlines()):
        line = raw.rstrip()
        if not pending:
            first = i
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        lines.append((first, pending + line))
        pending = ""
    if pending:
        lines.append((first, pending))
    return lines


def webgym_invocations(line: str) -> list[list[str]]:
    """The argument lists of each `webgym` (or `.venv/bin/webgym`) command on a shell line:
    env-var prefixes, comments, `&&`/`|`/`;` chains and redirections handled; placeholders
    (`<process>`) become PLACEHOLDER. Raises ValueError where the line does not split."""
    lexer = shlex.shlex(PLACEHOLDER_RE.sub(PLACEHOLDER, line), posix=True,
                        punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    tokens = list(lexer)
    invocations = []
    segment: list[str] = []
    for token in [*tokens, ";"]:
        if token in SHELL_BREAKS or set(token) <= set("&|;<>()"):
            words = segment
            while words and (re.match(r"^[A-Za-z_]\w*=", words[0]) or words[0] in {
                    "$", "env", "sudo", "exec", "time"}):
                words = words[1:]
            if words and (words[0] == "webgym" or words[0].endswith("/webgym")):
                invocations.append(words[1:])
            segment = []
        else:
            segment.append(token)
    return invocations


def parse_command(args: list[str], line: str = "", mention: bool = False) -> Parsed:
    """`webgym <args>` resolved through the click groups (each group's options checked on
    the way), then the command's options and arguments by click's own parser. A `mention`
    (an inline code span: `webgym curve --train-max-steps`) may end on an option without
    its value."""
    parsed = Parsed(line or shlex.join(["webgym", *args]))
    if args and all(a in ELLIPSIS for a in args):
        return parsed  # `webgym ...`: any command
    args = [a for a in args if a not in ELLIPSIS]
    command: Command = cli()
    while isinstance(command, TyperGroup):
        group_options = {o for p in command.params for o in (*p.opts, *p.secondary_opts)}
        while args and args[0].startswith("-"):
            option = args.pop(0).split("=")[0]
            if option == "--help":
                return parsed
            if option not in group_options:
                parsed.problems.append(f"{' '.join(('webgym', *parsed.path))}: no option {option}")
        if not args:
            if parsed.path == ():
                parsed.problems.append("webgym alone: no command")
            return parsed
        name = args.pop(0)
        if name == PLACEHOLDER:
            return parsed  # `webgym worker <process>`: any of the group's commands
        sub = command.commands.get(name)
        if sub is None:
            parsed.problems.append(
                f"webgym {' '.join((*parsed.path, name))}: no such command")
            return parsed
        parsed.path = (*parsed.path, name)
        command = sub
    if "--help" in args:
        return parsed
    # click's own option parser, without converting values (placeholders and examples'
    # values pass) or asking for what is required: unknown options, an option without its
    # value and arguments past the command's are what it reports.
    ctx = Context(command, info_name=" ".join(("webgym", *parsed.path)))
    try:
        _, extra, _ = command.make_parser(ctx).parse_args(list(args))
    except BadOptionUsage as err:
        if not (mention and "requires an argument" in err.message):
            parsed.problems.append(f"webgym {' '.join(parsed.path)}: {err.format_message()}")
        return parsed
    except UsageError as err:
        parsed.problems.append(f"webgym {' '.join(parsed.path)}: {err.format_message()}")
        return parsed
    if extra and not command.allow_extra_args:
        parsed.problems.append(
            f"webgym {' '.join(parsed.path)}: unexpected arguments {' '.join(extra)}")
    return parsed


@cache
def subcommand_names() -> frozenset[str]:
    """The names of the commands inside the CLI's groups (`rescore`, `up`, ...)."""
    return frozenset(name for group in cli().commands.values()
                     if isinstance(group, TyperGroup) for name in group.commands)


def alternatives(span: str) -> list[str]:
    """`webgym reprocess rescore / refilter / export` -> one line per alternative."""
    words = span.split()
    if "/" not in words:
        return [span]
    i = words.index("/")
    head, options = words[:i - 1], [words[i - 1]]
    rest = words[i + 1:]
    while rest:
        options.append(rest.pop(0))
        if rest and rest[0] == "/":
            rest.pop(0)
        else:
            break
    return [" ".join([*head, option, *rest]) for option in options]
