"""`webgym envserver`: AgentGym's WebArena environment-server API over the pipeline."""

from __future__ import annotations

import asyncio

import typer

from webgym_cli.common import console, one_line_errors, settings_with

app = typer.Typer()


@app.command("envserver")
@one_line_errors
def envserver_command(
    host: str | None = typer.Option(
        None, help="Address to bind (default: WEBGYM_ENVSERVER__HOST, 127.0.0.1)."),
    port: int | None = typer.Option(
        None, help="Port (default: WEBGYM_ENVSERVER__PORT, 18790)."),
    idle_timeout: float | None = typer.Option(
        None, help="Close envs no request touched for this many seconds "
        "(default: WEBGYM_ENVSERVER__IDLE_TIMEOUT_S, 900)."),
) -> None:
    """Serve AgentGym's env-server API (verl drives the browsers over HTTP).

    Routes: /create, /reset, /step, /observation, /close, /list_envs. Each env is an
    episode of the pipeline (driver external): run browser workers and the evaluator
    beside it; `idx` in /reset picks the catalog's tasks sorted by task_id.

    Example: webgym envserver --port 18790 --idle-timeout 900"""
    from producers.envserver.app import run_envserver

    settings = settings_with(envserver={"host": host, "port": port,
                                        "idle_timeout_s": idle_timeout})
    cfg = settings.envserver
    console.print(f"env server: http://{cfg.host}:{cfg.port}/ (broker "
                  f"{settings.kafka.bootstrap_servers}, prefix {settings.kafka.topic_prefix}; "
                  f"idle envs closed after {cfg.idle_timeout_s:g} s)")
    asyncio.run(run_envserver(settings))
