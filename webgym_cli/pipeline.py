"""`webgym pipeline up | down | status`: the pipeline's processes in the background."""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer
from rich.table import Table

from webgym_cli.common import console, one_line_errors, settings_with
from webgym_common.choices import PolicyKind
from webgym_common.config import get_settings

app = typer.Typer(help="The pipeline's worker processes in the background.",
                  no_args_is_help=True)


@app.command("up")
@one_line_errors
def pipeline_up(
    policy: PolicyKind | None = typer.Option(None, help="Policy (default: WEBGYM_POLICY__KIND)."),
    contexts: int | None = typer.Option(None, help="Browser contexts (WEBGYM_BROWSER__CONTEXTS)."),
    with_envserver: bool = typer.Option(
        False, "--with-envserver", help="Also run the env server, supervised like the rest "
        "(default: WEBGYM_ENVSERVER__SUPERVISED, off)."),
) -> None:
    """Start the pipeline's processes, supervised (restarted if they die).

    Browser, policy, evaluator, history, metrics and replay; the trainer and the model
    loader when the loop trains (WEBGYM_ROLLOUT__TRAIN); the env server (AgentGym's API,
    WEBGYM_ENVSERVER__HOST/PORT) with --with-envserver.

    Example: webgym pipeline up --policy teacher --contexts 4 --with-envserver"""
    from infra import pipeline

    # Not given: None, so WEBGYM_ENVSERVER__SUPERVISED still decides.
    settings = settings_with(policy={"kind": policy}, browser={"contexts": contexts},
                             envserver={"supervised": True if with_envserver else None})
    with console.status("starting the pipeline processes"):
        started = asyncio.run(pipeline.up(settings))
    console.print(f"started: {', '.join(started) or 'all were running'} "
                  f"(logs in {settings.infra.data_dir / 'logs'})")


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
    """Show each pipeline process: pid, ready, restarts by the supervisor, last exit.

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
