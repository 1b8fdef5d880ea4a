"""`webgym envserver`: AgentGym's WebArena environment-server API over the pipeline.

The same process as `webgym worker envserver` (the registry's `envserver`, with the same
options), under the name its users look for; `webgym pipeline up --with-envserver` runs it
supervised.
"""

from __future__ import annotations

import typer

from webgym_cli.worker import worker_command
from webgym_common.processes import PROCESSES, Process

app = typer.Typer()

HELP = """Serve AgentGym's env-server API over HTTP.

    verl (or any AgentGym client) drives the pipeline's browsers through it. Routes: /create,
    /reset, /step, /observation, /close, /list_envs. Each env is an episode of the pipeline
    (driver external): run browser workers and the evaluator beside it; `idx` in /reset picks
    the catalog's tasks sorted by task_id. The same process as `webgym worker envserver`;
    `webgym pipeline up --with-envserver` runs it supervised beside the others.

    Example: webgym envserver --port 18790 --idle-timeout 900"""

app.command("envserver", help=HELP)(worker_command(PROCESSES[Process.ENVSERVER]))
