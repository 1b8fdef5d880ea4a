"""`webgym tasks load`: the task catalog."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer

from webgym_cli.common import console, one_line_errors
from webgym_common.choices import Split
from webgym_common.config import get_settings

app = typer.Typer(help="The task catalog (webgym.tasks).\n\n"
                  "Example: webgym tasks load environments/tasks/sandbox_tasks.jsonl",
                  no_args_is_help=True)


@app.command("load")
@one_line_errors
def tasks_load(
    path: Path = typer.Argument(..., exists=True, dir_okay=False, help="JSONL task file."),
    split: Split | None = typer.Option(
        None, help="The file's split, for lines without one (WebGym keeps train and test in "
        "separate files); without it a line with no split is refused."),
) -> None:
    """Validate a task file and publish it to webgym.tasks.

    Its good lines are published, its bad lines reported.

    Example: webgym tasks load my_test_tasks.jsonl --split test"""
    from producers.catalog import run_tasks_load

    report = asyncio.run(run_tasks_load(get_settings(), path, console, split))
    if not report.loaded:
        raise typer.Exit(1)
