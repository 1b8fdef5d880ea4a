"""`webgym pipeline up | down | status`: the pipeline's processes in the background."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path

import typer
from rich.table import Table

from webgym_cli.common import console, one_line_errors
from webgym_cli.worker import laid_over, with_options
from webgym_common.choices import PolicyKind
from webgym_common.config import get_settings
from webgym_common.processes import PROCESSES, ProcessSpec

app = typer.Typer(help="The pipeline's worker processes in the background.\n\n"
                  "Example: webgym pipeline up --policy teacher", no_args_is_help=True)


def opt_in_flag(spec: ProcessSpec) -> inspect.Parameter:
    """`--with-<name>`: `up` also runs the row's optional process (turns its setting on)."""
    section, field = str(spec.opt_in).split(".")
    return inspect.Parameter(
        "with_" + spec.name.value.replace("-", "_"), inspect.Parameter.KEYWORD_ONLY,
        annotation=bool, default=typer.Option(
            False, f"--with-{spec.name.value}", help=f"Also run {spec.name.value} "
            f"({spec.summary}), supervised like the rest "
            f"(default: WEBGYM_{section.upper()}__{field.upper()}, off)."))


OPTIONAL = [spec for spec in PROCESSES.values() if spec.optional]


def pipeline_up(
    policy: PolicyKind | None = typer.Option(None, help="Policy (default: WEBGYM_POLICY__KIND)."),
    contexts: int | None = typer.Option(None, help="Browser contexts (WEBGYM_BROWSER__CONTEXTS)."),
    **asked: bool,
) -> None:
    from infra import pipeline

    # Not given: None, so the optional process's own setting still decides.
    settings = laid_over([("policy.kind", policy), ("browser.contexts", contexts), *(
        (str(spec.opt_in), True if asked[opt_in_flag(spec).name] else None)
        for spec in OPTIONAL)])
    with console.status("starting the pipeline processes"):
        started = asyncio.run(pipeline.up(settings))
    console.print(f"started: {', '.join(started) or 'all were running'} "
                  f"(logs in {settings.infra.data_dir / 'logs'})")


def up_help() -> str:
    """`up`'s help: which processes it runs, from the registry."""
    def names(specs: list[ProcessSpec]) -> str:
        *most, last = [s.name.value for s in specs]
        return f"{', '.join(most)} and {last}" if most else last

    specs = list(PROCESSES.values())
    always = [s for s in specs if not s.training and not s.optional]
    training = [s for s in specs if s.training]
    asked = "".join(f"; {s.name.value} with --with-{s.name.value}" for s in OPTIONAL)
    return ("Start the pipeline's processes, supervised (restarted if they die).\n\n"
            f"The processes {names(always)}; {names(training)} when the loop trains "
            f"(WEBGYM_ROLLOUT__TRAIN){asked}.\n\n"
            "Example: webgym pipeline up --policy teacher --contexts 4"
            + "".join(f" --with-{s.name.value}" for s in OPTIONAL))


app.command("up", help=up_help())(
    with_options(one_line_errors(pipeline_up), map(opt_in_flag, OPTIONAL)))


@app.command("down")
@one_line_errors
def pipeline_down() -> None:
    """Stop the pipeline processes.

    Example: webgym pipeline down"""
    from infra import pipeline

    console.print(f"stopped: {', '.join(pipeline.down(get_settings())) or 'nothing'}")


@app.command("status")
@one_line_errors
def pipeline_status() -> None:
    """Show each pipeline process and its state.

    Its pid, whether it is ready, its restarts by the supervisor and its last exit.

    Example: webgym pipeline status"""
    import time

    from infra import pipeline

    settings = get_settings()
    rows = pipeline.status(settings)
    supervised = pipeline.supervisor_pid(settings)
    table = Table(title="WebGym pipeline", caption=f"supervisor: pid {supervised}"
                  if supervised else "supervisor: not running (nothing restarts)")
    for col in ("process", "pid", "state", "restarts", "last exit", "log"):
        table.add_column(col)
    for r in rows:
        if not r.started:
            why = not_started_because(r.name)
            state = f"[dim]not started{f' ({why})' if why else ''}[/dim]"
        elif r.pid:
            state = "[green]ready[/green]" if r.ready else "[yellow]starting[/yellow]"
        else:
            state = "[yellow]restarting[/yellow]" if supervised else "[red]stopped[/red]"
        last = r.last_exit
        if r.last_restart_at is not None:
            last += f", restarted {time.time() - r.last_restart_at:.0f}s ago"
        table.add_row(r.name, str(r.pid or "-"), state, str(r.restarts), last, str(r.log_file))
    console.print(table)
    running = [r for r in rows if r.started]
    raise typer.Exit(0 if running and all(r.pid and r.ready for r in running) else 1)


def not_started_because(name: str) -> str | None:
    """Why `up` leaves a process out, as the status table says it."""
    from infra import pipeline

    if name in pipeline.OPTIONAL:  # `up --with-<name>` is the option that asks for it
        return f"optional: up --with-{name}"
    if name in pipeline.TRAINING:
        return "training off"
    return None


@app.command("supervise", hidden=True)
def pipeline_supervise(spec: Path = typer.Argument(..., help="Written by `pipeline up`.")) -> None:
    """Run and restart the processes in SPEC until SIGTERM (started by `pipeline up`)."""
    from infra import supervisor

    supervisor.run(spec)
