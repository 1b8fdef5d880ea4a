"""`webgym pipeline up | down | status`: the pipeline's processes in the background."""

from __future__ import annotations

import asyncio

import typer
from rich.table import Table

from webgym_cli.common import console, one_line_errors, settings_with
from webgym_common.config import PolicyKind, get_settings

app = typer.Typer(help="The pipeline's worker processes in the background.",
                  no_args_is_help=True)


@app.command("up")
@one_line_errors
def pipeline_up(
    policy: PolicyKind | None = typer.Option(None, help="Policy (default: WEBGYM_POLICY__KIND)."),
    contexts: int | None = typer.Option(None, help="Browser contexts (WEBGYM_BROWSER__CONTEXTS)."),
) -> None:
    """Start browser, policy, evaluator, history and metrics processes in the background."""
    from infra import pipeline

    settings = settings_with(policy={"kind": policy}, browser={"contexts": contexts})
    with console.status("starting the pipeline processes"):
        started = asyncio.run(pipeline.up(settings))
    console.print(f"started: {', '.join(started) or 'all were running'} "
                  f"(logs in {settings.infra.data_dir / 'logs'})")


@app.command("down")
@one_line_errors
def pipeline_down() -> None:
    """Stop the pipeline processes."""
    from infra import pipeline

    console.print(f"stopped: {', '.join(pipeline.down(get_settings())) or 'nothing'}")


@app.command("status")
@one_line_errors
def pipeline_status() -> None:
    """Show each pipeline process, its pid, whether it runs and whether it is ready."""
    from infra import pipeline

    rows = pipeline.status(get_settings())
    table = Table(title="WebGym pipeline")
    for col in ("process", "pid", "state", "log"):
        table.add_column(col)
    for r in rows:
        state = ("[green]ready[/green]" if r.ready else "[yellow]starting[/yellow]") if r.pid \
            else "[red]stopped[/red]"
        table.add_row(r.name, str(r.pid or "-"), state, str(r.log_file))
    console.print(table)
    raise typer.Exit(0 if rows and all(r.pid and r.ready for r in rows) else 1)
