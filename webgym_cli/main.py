"""`webgym`: the typer app, its --verbose flag, and one command group per module.

Each group's module imports only typer, rich and the settings at import time; the
layers a command drives (infra, producers, processors, consumers) are imported
inside that command, so `webgym --help` and every other command stay light.
"""

from __future__ import annotations

import logging
import shutil

import typer
import typer.core

from webgym_cli import (
    cluster,
    demos,
    envserver,
    evaluate,
    infra,
    monitor,
    pipeline,
    reprocess,
    rollout,
    sandbox,
    tasks,
    topics,
    worker,
)

# rich's help panels give a third of the width to a type column: below this many columns
# the help is click's plain text, wrapped to the terminal (typer reads the flag per call).
RICH_HELP_COLUMNS = 100
if shutil.get_terminal_size().columns < RICH_HELP_COLUMNS:
    typer.core.HAS_RICH = False

app = typer.Typer(help="WebGym Stream: RL for web agents over Kafka.\n\n"
                  "Example: webgym run --iterations 2", no_args_is_help=True)
app.add_typer(rollout.app)  # rollout, run, drive, export: top-level commands
app.add_typer(evaluate.app)  # eval
app.add_typer(monitor.app)  # monitor
app.add_typer(envserver.app)  # envserver
app.command("down", help=infra.down_help("down"))(infra.infra_down)  # = `webgym infra down`
app.add_typer(pipeline.app, name="pipeline")
app.add_typer(cluster.app, name="cluster")
app.add_typer(infra.app, name="infra")
app.add_typer(topics.app, name="topics")
app.add_typer(worker.app, name="worker")
app.add_typer(sandbox.app, name="sandbox")
app.add_typer(tasks.app, name="tasks")
app.add_typer(reprocess.app, name="reprocess")
app.add_typer(demos.app, name="demos")


@app.callback()
def main(verbose: bool = typer.Option(False, "--verbose", "-v", help="Log at INFO.")) -> None:
    setup_logging(verbose)


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # aiokafka logs every retried request at WARNING/ERROR; they are normal at start-up.
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL if not verbose else logging.WARNING)
