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
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from typer.core import TyperGroup

from devtools.cli_lines import (
    PLACEHOLDER_RE,
    alternatives,
    cli,
    parse_command,
    shell_lines,
    subcommand_names,
    webgym_invocations,
)
from webgym_common.config import PROJECT_ROOT, Settings, setting_variable

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
COMPOSE_FILES = ("docker-compose.yml", "docker-compose.local.yml", "docker-compose.replicas.yml",
                 "docker-compose.replicas.local.yml")

# Fenced code blocks, inline code spans, links (images too).
_FENCE = re.compile(r"^[ \t]*```([^\n]*)\n(.*?)^[ \t]*```", re.S | re.M)  # indented too
_SPAN = re.compile(r"(?<!`)`([^`]+)`(?!`)")
_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
_VARIABLE = re.compile(r"WEBGYM_[A-Z0-9_]*[A-Z0-9](?:__\*?)?")  # WEBGYM_X, WEBGYM_X__*
SHELL_BLOCKS = {"", "bash", "sh", "shell", "console"}  # fenced blocks of command lines


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
    path = PLACEHOLDER_RE.sub("*", path)
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
                or words[1] in subcommand_names()):
            span = "webgym " + span  # `replay rescore --judge rules`: no group `replay`
        if re.match(r"^([A-Z_]+=\S+ )*(\S*/)?webgym ", span):
            for alternative in alternatives(span):
                yield _line_of(prose, m.start()), alternative, False


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
            names.add(setting_variable(section, name))
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
