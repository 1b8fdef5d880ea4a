"""Every command's and group's --help at 80 columns, as a reader on a narrow terminal sees
it: an example that pastes as it is and parses, a description for every option and
argument, defaults never split across lines, and summaries in the parent's list that are
not cut mid-sentence."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import typer.main
from typer._click.core import Command
from typer.core import TyperGroup
from typer.testing import CliRunner

from devtools import cli_lines
from webgym_cli.main import app

COLUMNS = 80


def walk(command: Command, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...],
                                                                        Command]]:
    """The root, every group and every command below it (hidden ones left out), by path."""
    yield path, command
    if isinstance(command, TyperGroup):
        for name, sub in command.commands.items():
            if not sub.hidden:
                yield from walk(sub, (*path, name))


COMMANDS = dict(walk(typer.main.get_command(app)))


def name(path: tuple[str, ...]) -> str:
    return " ".join(("webgym", *path))


@pytest.fixture(scope="module")
def pages() -> dict[tuple[str, ...], str]:
    """Each path's help page, as webgym_cli.main renders it below 100 columns (click's
    plain text, wrapped to the terminal)."""
    runner = CliRunner(env={"COLUMNS": str(COLUMNS)})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("typer.core.HAS_RICH", False)
        out = {}
        for path in COMMANDS:
            result = runner.invoke(app, [*path, "--help"], prog_name="webgym")
            assert result.exit_code == 0, (path, result.output)
            out[path] = result.output
    return out


def example(page: str) -> list[str]:
    """The lines of the page's example paragraph, as printed."""
    lines = page.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip().startswith("Example:")]
    if not starts:
        return []
    paragraph = []
    for line in lines[starts[0]:]:
        if not line.strip():
            break
        paragraph.append(line)
    return paragraph


def test_every_command_and_group_is_walked() -> None:
    assert {(), ("infra",), ("worker",), ("reprocess", "refilter"), ("down",)} <= set(COMMANDS)
    assert len(COMMANDS) > 40


@pytest.mark.parametrize("path", COMMANDS, ids=name)
def test_every_page_has_an_example_that_pastes_and_parses(
        path: tuple[str, ...], pages: dict[tuple[str, ...], str]) -> None:
    lines = example(pages[path])
    assert lines, f"{name(path)} --help has no Example: line"
    # printed as pasted: a line that goes on ends with a backslash, none is cut by wrapping
    assert all(line.endswith(" \\") for line in lines[:-1]), lines
    assert not lines[-1].endswith("\\"), lines
    command = " ".join(line.strip().removesuffix("\\").strip() for line in lines)
    command = command.removeprefix("Example:").strip()
    [args] = cli_lines.webgym_invocations(command)
    parsed = cli_lines.parse_command(args, command)
    assert parsed.problems == [], parsed.problems
    # the example runs this command (a group's: one of its commands)
    assert parsed.path[:len(path)] == path, (command, path)


@pytest.mark.parametrize("path", COMMANDS, ids=name)
def test_every_option_and_argument_has_a_description(path: tuple[str, ...]) -> None:
    undescribed = [param.name for param in COMMANDS[path].params
                   if not (getattr(param, "help", None) or "").strip()]
    assert undescribed == [], f"{name(path)}: {undescribed} have no help"


@pytest.mark.parametrize("path", COMMANDS, ids=name)
def test_pages_fit_the_terminal_and_keep_each_default_on_one_line(
        path: tuple[str, ...], pages: dict[tuple[str, ...], str]) -> None:
    lines = pages[path].splitlines()
    assert all(len(line) <= COLUMNS for line in lines), pages[path]
    split = [line for line in lines if "[default:" in line
             and "]" not in line.split("[default:")[1]]
    assert split == [], f"{name(path)}: a default goes on to the next line: {split}"


@pytest.mark.parametrize("path", [p for p, c in COMMANDS.items() if isinstance(c, TyperGroup)],
                         ids=name)
def test_summaries_in_a_group_list_are_whole(path: tuple[str, ...],
                                             pages: dict[tuple[str, ...], str]) -> None:
    listed = pages[path].split("\nCommands:\n")[1].splitlines()
    cut = [line.strip() for line in listed if line.rstrip().endswith("...")]
    assert cut == [], f"{name(path)} --help cuts these summaries: {cut}"
