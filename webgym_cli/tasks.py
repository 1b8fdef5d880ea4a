"""`webgym tasks load`: the task catalog."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer

from webgym_cli.common import console, one_line_errors
from webgym_common.config import get_settings

app = typer.Typer(help="The task catalog (webgym.tasks).", no_args_is_help=True)


@app.command("load")
@one_line_errors
def tasks_load(
    path: Path = typer.Argument(..., exists=True, dir_okay=False, help="JSONL task file."),
) -> None:
    """Validate a task file and publish its good lines to webgym.tasks (bad lines reported).

    Example: webgym tasks load infra/sandbox/tasks/miniwob_tasks.jsonl"""
    from producers.catalog import run_tasks_load

    report = asyncio.run(run_tasks_load(get_settings(), path, console))
    if not report.loaded:
        raise typer.Exit(1)
