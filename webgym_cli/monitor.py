"""`webgym monitor`: the read-only web app that follows the topics live."""

from __future__ import annotations

import asyncio

import typer

from webgym_cli.common import console, one_line_errors, settings_with

app = typer.Typer()


@app.command("monitor")
@one_line_errors
def monitor_command(
    host: str | None = typer.Option(
        None, help="Address to bind (default: WEBGYM_MONITOR__HOST, 127.0.0.1)."),
    port: int | None = typer.Option(None, help="Port (default: WEBGYM_MONITOR__PORT, 18780)."),
    scored_topic: str | None = typer.Option(
        None, help="The scored topic to show (a full name, e.g. a re-scored history; "
        "default: <prefix>.episodes.scored)."),
) -> None:
    """Serve the read-only monitor web app.

    Pages: the live iteration, metrics plots, the trajectory viewer, models, tasks and dead
    letters. Reads every topic without a group; commits and publishes nothing.

    Example: webgym monitor --port 18780"""
    from consumers.monitor.app import run_monitor, tensorboard_dir

    settings = settings_with(monitor={"host": host, "port": port, "scored_topic": scored_topic})
    cfg = settings.monitor
    console.print(f"monitor: http://{cfg.host}:{cfg.port}/ (broker "
                  f"{settings.kafka.bootstrap_servers}, prefix {settings.kafka.topic_prefix})"
                  + (f"; TensorBoard files in {tensorboard_dir(settings)}"
                     if cfg.tensorboard else ""))
    asyncio.run(run_monitor(settings))
