"""Bench results as markdown, to keep beside the numbers printed on the console.

Any bench can offer `--markdown PATH`:

    text = markdown_table("bus scale", "python -m bench.bus_scale", columns, rows)
    append_markdown(path, text)

The block has a heading, the exact command, the date and the machine line
(harness.machine.describe_machine()), then the table and optional notes; appending keeps
earlier runs in the same file, newest last.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from rich.table import Table

from harness.machine import describe_machine


def _cell(value: str) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(title: str, command: str, columns: list[str], rows: list[list[str]],
                   notes: str = "", when: datetime | None = None,
                   machine: str | None = None) -> str:
    """A markdown block: `## title`, the command, date and machine, the table, the notes.

    `when` and `machine` default to now (UTC) and this machine; tests pass their own."""
    if any(len(r) != len(columns) for r in rows):
        raise ValueError("every row needs one cell per column")
    stamp = (when or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        f"## {title}",
        "",
        f"`{command}`  ",
        f"{stamp}  ",
        f"{machine if machine is not None else describe_machine()}",
        "",
        "| " + " | ".join(_cell(c) for c in columns) + " |",
        "|" + "---|" * len(columns),
        *("| " + " | ".join(_cell(c) for c in r) + " |" for r in rows),
    ]
    if notes.strip():
        lines += ["", notes.strip()]
    return "\n".join(lines) + "\n"


def append_markdown(path: str | Path, text: str) -> None:
    """Append `text` to `path` (created with its parents if missing), a blank line between
    it and what the file held."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    before = path.read_text() if path.exists() else ""
    sep = "" if not before else ("\n" if before.endswith("\n") else "\n\n")
    with path.open("a") as f:
        f.write(sep + text)


def console_table(title: str, columns: list[str], rows: list[list[str]]) -> Table:
    """The same rows as a rich table for the console, numbers right-aligned."""
    table = Table(title=title)
    for col in columns:
        table.add_column(col, justify="right")
    for row in rows:
        table.add_row(*row)
    return table
