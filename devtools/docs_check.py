"""The docs held to the code: README.md and docs/**/*.md name only what exists.

Five checks, each a function returning one line per problem (tests/unit/test_docs.py
asserts each finds none; `python -m devtools.docs_check` prints them all):

- fences: every code fence is closed by a line of ``` alone;
- links: every relative link `[text](target)` points at a file or folder that exists;
- paths: every repository path named (in code or prose: `processors/policy/app.py`,
  `infra/locks/`, `schemas/*.avsc`, `tests/unit/x.py::test_y`) exists; every file named
  alone (`decisions.py`) is a file of the repository or one its code writes; every dotted
  name of a module (`webgym_common.leaks`, `producers.controller.heldout.stratified`)
  is a module, or a name defined at the top of one;
- commands: every `webgym ...` command line (in a fenced block, or an inline code span)
  parses against the real CLI (`parse_command`: the command path resolves through the
  click groups, every option exists on the command, no stray argument);
- variables: every `WEBGYM_*` variable named is a setting (`WEBGYM_<SECTION>__<FIELD>`,
  from the settings classes) or one of the few others the project reads.

Paths under /tmp, ~ or $VARS, URLs and placeholders (`<data_dir>/...`) are not repository
paths and are not checked.
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import shlex
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import typer.main
from typer._click.core import Command, Context
from typer._click.exceptions import BadOptionUsage, UsageError
from typer.core import TyperGroup

from webgym_cli.main import app
from webgym_common.config import PROJECT_ROOT, Settings

# Variables the project reads that are not settings. Each is read by the code named.
OTHER_VARIABLES = {
    "WEBGYM_HOME": "the cache and data home (webgym_common/config/stack.py, infra/bootstrap.sh)",
    "WEBGYM_CONFIG": "a YAML settings file (webgym_common/config/__init__.py)",
    "WEBGYM_READY_FILE": "a supervised process's ready file (webgym_common/lifecycle.py)",
    "WEBGYM_CHROMIUM": "the browser the root launcher runs (webgym_common/chromium.py)",
    "WEBGYM_CHROMIUM_USER": "the user it runs as (webgym_common/chromium.py)",
    "WEBGYM_CHAOS": "`all`: every chaos scenario (tests/chaos/conftest.py)",
    "WEBGYM_CHAOS_TABLE": "where the chaos table is written (tests/chaos/conftest.py)",
    "WEBGYM_CHAOS_VISIT": "the URL the chaos policy visits (tests/chaos/visit_policy.py)",
    "WEBGYM_COMPOSE_TEST": "`1`: collect tests/compose (tests/conftest.py)",
    "WEBGYM_COMPOSE_VLLM": "`0`: tests/compose without vLLM (tests/compose/test_compose_stack.py)",
    "WEBGYM_COMPOSE_REGISTRY": "`1`: registry images (tests/compose/test_compose_stack.py)",
    "WEBGYM_COMPOSE_BASE": "the images' base (tests/compose/test_compose_stack.py)",
    "WEBGYM_MONITOR_SCREENSHOTS": "where tests/integration/test_monitor.py saves pages",
}
# ... and the compose files' own variables (`${WEBGYM_MODEL:-...}`), read from the files.
COMPOSE_FILES = ("docker-compose.yml", "docker-compose.local.yml")

# Fenced code blocks, inline code spans, links (images too).
_FENCE = re.compile(r"^[ \t]*```([^\n]*)\n(.*?)^[ \t]*```", re.S | re.M)  # indented too
_SPAN = re.compile(r"(?<!`)`([^`]+)`(?!`)")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_VARIABLE = re.compile(r"WEBGYM_[A-Z0-9_]*[A-Z0-9](?:__\*?)?")  # WEBGYM_X, WEBGYM_X__*
_PLACEHOLDER = re.compile(r"<[^<>\s]+>")
SHELL_BLOCKS = {"", "bash", "sh", "shell", "console"}  # fenced blocks of command lines
PLACEHOLDER = "__placeholder__"  # a placeholder word of a command line (`<process>`)
_ELLIPSIS = {"…", "...", "[...]", "[…]"}
_SHELL_BREAKS = {"&&", "||", ";", "|", "&", ">", ">>", "<", "2>", "2>&1", "(", ")"}


def markdown_files(root: Path = PROJECT_ROOT) -> list[Path]:
    """README.md and every page under docs/."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def _name(path: Path, root: Path) -> str:
    return str(path.relative_to(root))


def _line_of(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


# --- links -------------------------------------------------------------------------------

def link_problems(root: Path = PROJECT_ROOT) -> list[str]:
    """Relative links whose target does not exist."""
    problems = []
    for page in markdown_files(root):
        text = page.read_text()
        for m in _LINK.finditer(_without_fences(text)):
            target = m.group(1).split("#")[0]
            if not target or re.match(r"^[a-z][a-z0-9+.-]*:", target):
                continue  # an anchor in the page, or a URL
            if not (page.parent / target).exists():
                problems.append(f"{_name(page, root)}:{_line_of(text, m.start())}: "
                                f"link to {target}: no such file")
    return problems


def fence_problems(root: Path = PROJECT_ROOT) -> list[str]:
    """Code fences that do not pair up: a closing ``` has nothing after it on its line."""
    problems = []
    for page in markdown_files(root):
        inside = False
        for number, line in enumerate(page.read_text().splitlines(), 1):
            line = line.strip()
            if not line.startswith("```"):
                continue
            if inside and line != "```":
                problems.append(f"{_name(page, root)}:{number}: text after a closing fence")
            inside = not inside
        if inside:
            problems.append(f"{_name(page, root)}: a code fence is never closed")
    return problems


def _without_fences(text: str, only: str | None = None) -> str:
    """The text with each fenced block's lines blanked (line numbers kept); `only`: just
    the blocks of that language."""
    return _FENCE.sub(lambda m: m.group(0) if only is not None and m.group(1) != only
                      else "\n" * m.group(0).count("\n"), text)


# --- paths and module names ---------------------------------------------------------------

@cache
def top_level(root: Path) -> tuple[set[str], set[str]]:
    """The repository's top-level folders and its Python packages among them."""
    folders = {p.name for p in root.iterdir()
               if p.is_dir() and not p.name.startswith(".") and not p.name.endswith(".egg-info")}
    packages = {name for name in folders if (root / name / "__init__.py").is_file()}
    return folders, packages


def path_problems(root: Path = PROJECT_ROOT) -> list[str]:
    """Repository paths and module names that do not exist (a ```diff block, which shows a
    change, is left out)."""
    folders, packages = top_level(root)
    # A path starts with a top-level folder (not after /, ~, $ or a word: /tmp/infra/x,
    # ~/.cache/..., https://.../docs/x are not the repository's); a module name with a package.
    not_after = r"(?<![\w./~$<>@:-])"
    path_re = re.compile(not_after + r"((?:" + "|".join(sorted(folders))
                         + r")/[\w./*{},<>-]*(?:::\w+)?)")
    module_re = re.compile(not_after + r"((?:" + "|".join(sorted(packages))
                           + r")(?:\.[A-Za-z_]\w*)+)(?![\w/-])")
    problems = []
    for page in markdown_files(root):
        text = _without_fences(page.read_text(), only="diff")
        for m in path_re.finditer(text):
            named = m.group(1).rstrip(".,;:")
            if not _path_exists(root, named):
                problems.append(f"{_name(page, root)}:{_line_of(text, m.start())}: "
                                f"{named}: no such path")
        for m in _SPAN.finditer(_without_fences(text)):
            if _FILE_NAME.fullmatch(m.group(1)) and m.group(1) not in _file_names(root):
                problems.append(f"{_name(page, root)}:{_line_of(text, m.start())}: "
                                f"{m.group(1)}: no file of that name")
        for m in module_re.finditer(text):
            named = m.group(1).rstrip(".")
            if named.endswith((".py", ".md", ".sh")) or _is_setting(named):
                continue
            if not _module_name_exists(root, named):
                problems.append(f"{_name(page, root)}:{_line_of(text, m.start())}: "
                                f"{named}: no such module or name")
    return problems


_FILE_NAME = re.compile(r"[\w-]+\.(?:py|md|sh|jsonl|json|ya?ml|toml|avsc|lock|html|js|css|txt)")
_SKIPPED = {".venv", "__pycache__", "node_modules"}


@cache
def _file_names(root: Path) -> frozenset[str]:
    """The names of the repository's files, and the file names its code writes (a bare
    `trainer_log.jsonl` is a file a run makes)."""
    names: set[str] = set()
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in _SKIPPED
                   and not d.endswith(".egg-info")]
        names.update(files)
        for file in files:
            if file.endswith((".py", ".sh")):
                text = Path(folder, file).read_text(errors="replace")
                names.update(m.group(0) for m in _FILE_NAME.finditer(text))
    return frozenset(names)


def _path_exists(root: Path, named: str) -> bool:
    """`a/b.py`, `a/b/`, `a/*.avsc`, `a/{b,c}.py`, `a/b-<version>.txt` (a placeholder matches
    anything), `a/b.py::test_x` (the test is defined there), `a/b.name` (module a/b.py
    defines `name`)."""
    path, _, test = named.partition("::")
    path = _PLACEHOLDER.sub("*", path)
    if any(c in path for c in "*{"):
        return all(any(root.glob(p)) for p in _expand_braces(path))
    if not (root / path).exists():
        module, _, name = path.rpartition(".")
        return (bool(module) and "/" not in name and (root / f"{module}.py").is_file()
                and _defines(root / f"{module}.py", [name]))
    return not test or re.search(rf"^\s*(async )?def {test}\b|^class {test}\b",
                                 (root / path).read_text(), re.M) is not None


def _expand_braces(pattern: str) -> list[str]:
    """`a/{b,c}.py` -> [`a/b.py`, `a/c.py`] (one brace group)."""
    m = re.search(r"\{([^{}]*)\}", pattern)
    if not m:
        return [pattern]
    return [pattern[:m.start()] + alt + pattern[m.end():] for alt in m.group(1).split(",")]


def _is_setting(named: str) -> bool:
    """`infra.host`: a setting written as section.field, not a module."""
    section, _, rest = named.partition(".")
    fields = Settings.model_fields
    if section not in fields or "." in rest:
        return False
    model = fields[section].annotation
    return rest in getattr(model, "model_fields", {})


def _module_name_exists(root: Path, named: str) -> bool:
    """`a.b.c`: a module a/b/c(.py), or a name defined at the top of module a/b (or a)."""
    parts = named.split(".")
    for cut in range(len(parts), 0, -1):
        base = root.joinpath(*parts[:cut])
        module = base.with_suffix(".py") if base.with_suffix(".py").is_file() else (
            base / "__init__.py")
        if module.is_file():
            rest = parts[cut:]
            return not rest or (len(rest) <= 2 and _defines(module, rest))
    return False


def _defines(module: Path, names: list[str]) -> bool:
    """The module defines names[0] at its top level (and names[1] inside it, a class)."""
    tree = ast.parse(module.read_text())
    body: list[ast.stmt] = tree.body
    for i, name in enumerate(names):
        found: ast.stmt | None = None
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                if node.name == name:
                    found = node
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                    found = node
            elif isinstance(node, ast.ImportFrom | ast.Import):
                if any((a.asname or a.name.split(".")[0]) == name for a in node.names):
                    found = node
        if found is None:
            return False
        if i + 1 < len(names):
            if not isinstance(found, ast.ClassDef):
                return False
            body = found.body
    return True


# --- command lines --------------------------------------------------------------------------

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
    lexer = shlex.shlex(_PLACEHOLDER.sub(PLACEHOLDER, line), posix=True,
                        punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = "#"
    tokens = list(lexer)
    invocations = []
    segment: list[str] = []
    for token in [*tokens, ";"]:
        if token in _SHELL_BREAKS or set(token) <= set("&|;<>()"):
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
    if args and all(a in _ELLIPSIS for a in args):
        return parsed  # `webgym ...`: any command
    args = [a for a in args if a not in _ELLIPSIS]
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


def command_lines(text: str) -> Iterator[tuple[int, str, bool]]:
    """(line number, shell line, fenced) of each line that may hold a `webgym` command:
    every line of a fenced shell block, and every inline code span that starts with webgym, with a
    command group's name and a word (`pipeline up --with-envserver`) or with a word and a
    group's command (`replay rescore`, a group that does not exist); `a / b` alternatives,
    as in `webgym infra up / status / down`, made one line each."""
    for m in _FENCE.finditer(text):
        if m.group(1).strip() not in SHELL_BLOCKS:
            continue
        first = _line_of(text, m.start(2))
        for index, line in shell_lines(m.group(2)):
            yield first + index, line, True
    prose = _without_fences(text)
    for m in _SPAN.finditer(prose):
        span = " ".join(m.group(1).split())
        words = span.split()
        if len(words) > 1 and "webgym" not in words[0] and (
                isinstance(cli().commands.get(words[0]), TyperGroup)
                or words[1] in _subcommand_names()):
            span = "webgym " + span  # `replay rescore --judge rules`: no group `replay`
        if re.match(r"^([A-Z_]+=\S+ )*(\S*/)?webgym ", span):
            for alternative in _alternatives(span):
                yield _line_of(prose, m.start()), alternative, False


@cache
def _subcommand_names() -> frozenset[str]:
    """The names of the commands inside the CLI's groups (`rescore`, `up`, ...)."""
    return frozenset(name for group in cli().commands.values()
                     if isinstance(group, TyperGroup) for name in group.commands)


def _alternatives(span: str) -> list[str]:
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


def command_problems(root: Path = PROJECT_ROOT) -> list[str]:
    """`webgym` command lines in README and docs that do not parse."""
    problems = []
    for page in markdown_files(root):
        text = page.read_text()
        for number, line, fenced in command_lines(text):
            try:
                invocations = webgym_invocations(line)
            except ValueError as err:
                if "webgym" in line:
                    problems.append(f"{_name(page, root)}:{number}: cannot split {line!r}: {err}")
                continue
            for args in invocations:
                for problem in parse_command(args, line, mention=not fenced).problems:
                    problems.append(f"{_name(page, root)}:{number}: {problem}  [{line.strip()}]")
    return problems


# --- variables ------------------------------------------------------------------------------

def setting_variables() -> set[str]:
    """Every `WEBGYM_<SECTION>__<FIELD>` the settings read."""
    names = set()
    for section, info in Settings.model_fields.items():
        model = info.annotation
        for name in getattr(model, "model_fields", {}):
            names.add(f"WEBGYM_{section.upper()}__{name.upper()}")
    return names


def compose_variables(root: Path = PROJECT_ROOT) -> set[str]:
    """The WEBGYM_* variables the compose files interpolate (`${WEBGYM_X:-default}`)."""
    found = set()
    for name in COMPOSE_FILES:
        if (root / name).is_file():
            found |= set(re.findall(r"\$\{(WEBGYM_[A-Z0-9_]+)", (root / name).read_text()))
    return found


def variable_problems(root: Path = PROJECT_ROOT) -> list[str]:
    """WEBGYM_* variables named in README and docs that nothing reads."""
    settings = setting_variables()
    sections = {f"WEBGYM_{s.upper()}__" for s in Settings.model_fields}
    known = settings | set(OTHER_VARIABLES) | compose_variables(root)
    problems = []
    for page in markdown_files(root):
        text = page.read_text()
        for m in _VARIABLE.finditer(text):
            name = m.group(0)
            if name.rstrip("*") in sections or name in known:
                continue
            problems.append(f"{_name(page, root)}:{_line_of(text, m.start())}: {name}: "
                            "no such setting or variable")
    return problems


def all_problems(root: Path = PROJECT_ROOT) -> list[str]:
    return [*fence_problems(root), *link_problems(root), *path_problems(root),
            *command_problems(root), *variable_problems(root)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.docs_check", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args(argv)
    problems = all_problems()
    print("\n".join(problems) or "the docs name only what exists")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
