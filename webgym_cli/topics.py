"""`webgym topics create | list`: the topic registry."""

from __future__ import annotations

import asyncio

import typer
from rich.table import Table

from webgym_cli.common import console, one_line_errors
from webgym_common.config import get_settings

app = typer.Typer(help="Topics from the registry.\n\nExample: webgym topics list",
                  no_args_is_help=True)


@app.command("create")
@one_line_errors
def topics_create() -> None:
    """Create every registry topic that is missing (safe to run again).

    Example: webgym topics create"""
    from webgym_common.stream.admin import create_topics

    results = asyncio.run(create_topics(get_settings()))
    for r in results:
        colour = "yellow" if r.status.startswith("mismatch") else "green"
        console.print(f"[{colour}]{r.status:>8}[/{colour}] {r.name}", highlight=False)


@app.command("list")
@one_line_errors
def topics_list() -> None:
    """Show the topic registry.

    Each topic's name, partitions, cleanup policy and retention, faust's topics too.

    Example: webgym topics list"""
    from webgym_common.topics import all_topic_specs

    table = Table(title="topic registry")
    for col in ("topic", "partitions", "cleanup", "retention.ms", "events"):
        table.add_column(col)
    for spec in all_topic_specs(get_settings().kafka):
        table.add_row(spec.name, str(spec.partitions), spec.cleanup_policy,
                      str(spec.retention_ms), ", ".join(spec.value_types) or "(faust state)")
    console.print(table)
