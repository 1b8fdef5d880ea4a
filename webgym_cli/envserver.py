"""`webgym envserver`: AgentGym's WebArena environment-server API over the pipeline.

The same process as `webgym worker envserver` (the registry's `envserver`), under the
name its users look for; `webgym pipeline up --with-envserver` runs it supervised.
"""

from __future__ import annotations

import typer

from webgym_cli.common import one_line_errors
from webgym_cli.worker import (
    ENVSERVER_HOST,
    ENVSERVER_IDLE_TIMEOUT,
    ENVSERVER_PORT,
    worker_envserver,
)

app = typer.Typer()


@app.command("envserver")
@one_line_errors
def envserver_command(
    host: str | None = ENVSERVER_HOST,
    port: int | None = ENVSERVER_PORT,
    idle_timeout: float | None = ENVSERVER_IDLE_TIMEOUT,
) -> None:
    """Serve AgentGym's env-server API (verl drives the browsers over HTTP).

    Routes: /create, /reset, /step, /observation, /close, /list_envs. Each env is an
    episode of the pipeline (driver external): run browser workers and the evaluator
    beside it; `idx` in /reset picks the catalog's tasks sorted by task_id. The same
    process as `webgym worker envserver`; `webgym pipeline up --with-envserver` runs it
    supervised beside the others.

    Example: webgym envserver --port 18790 --idle-timeout 900"""
    worker_envserver(host=host, port=port, idle_timeout=idle_timeout)
