"""Bench results as markdown, to keep beside the numbers printed on the console.

Any bench can offer `--markdown PATH`:

    text = markdown_table("bus scale", "python -m bench.bus_scale", columns, rows)
    append_markdown(path, text)

The block has a heading, the exact command, the date and the machine line
(harness.machine.describe_machine()), then the table and optional notes; appending keeps
earlier runs in the same file, newest last.

A bench run with `--repeat N` gives each figure as the median of its N runs with the
range, `spread_cell(runs)` -> "6.19 [5.90, 6.40]", and each ratio against a baseline
measured in the same process (and repeated too) as `ratio_spread(runs, baseline).cell()`.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Spread:
    """A figure measured over several runs: the median and the range of its runs."""

    median: float
    low: float
    high: float
    runs: int

    def cell(self, spec: str = ".2f", suffix: str = "") -> str:
        """`median [min, max]` with the format `spec` (`suffix` after each number); the
        median alone for one run, "-" for none (NaN)."""
        if self.runs == 0 or math.isnan(self.median):
            return "-"
        if self.runs == 1:
            return f"{self.median:{spec}}{suffix}"
        return (f"{self.median:{spec}}{suffix} [{self.low:{spec}}{suffix}, "
                f"{self.high:{spec}}{suffix}]")


def spread(values: Iterable[float]) -> Spread:
    """The median, min and max of one figure's runs (NaN and 0 runs for none)."""
    runs = list(values)
    if not runs:
        return Spread(math.nan, math.nan, math.nan, 0)
    return Spread(statistics.median(runs), min(runs), max(runs), len(runs))


def ratio_spread(values: Iterable[float], baseline: Iterable[float]) -> Spread:
    """A figure's runs against a baseline measured in the same process, itself repeated:
    the median over the baseline's median, and each end of the figure's range over that
    same median (the baseline's own spread is its row's)."""
    runs, base = spread(values), spread(baseline)
    if not runs.runs or not base.runs or base.median == 0:
        return Spread(math.nan, math.nan, math.nan, 0)
    return Spread(runs.median / base.median, runs.low / base.median, runs.high / base.median,
                  runs.runs)


def speedup_spread(values: Iterable[float], baseline: Iterable[float]) -> Spread:
    """How many times faster a time's runs are than a baseline's (baseline's median over
    theirs): the median over the baseline's median inverted, its range from the runs' max
    (the low end) and min (the high end)."""
    runs, base = spread(values), spread(baseline)
    if not runs.runs or not base.runs or 0 in (runs.low, runs.median):
        return Spread(math.nan, math.nan, math.nan, 0)
    return Spread(base.median / runs.median, base.median / runs.high,
                  base.median / runs.low, runs.runs)


def spread_cell(values: Iterable[float], spec: str = ".2f", suffix: str = "") -> str:
    """`spread(values).cell(spec, suffix)`: the table cell of a figure's runs."""
    return spread(values).cell(spec, suffix)


def repeat_note(repeat: int, ratios: bool = True) -> str:
    """The sentence a table's notes carry about its repeats (`ratios`: and how its ratios
    to a baseline are taken)."""
    if repeat <= 1:
        return "One run."
    text = f"Each figure is the median of {repeat} runs, [min, max] after it"
    if not ratios:
        return text + "."
    return (text + "; a ratio is the median over its baseline's median (the baseline "
            "repeated too, in the same process), its range the runs' min and max over that "
            "median.")


def bench_command(module: str, argv: list[str]) -> str:
    """The command line a table carries: `.venv/bin/python -m module` and its arguments,
    less `--markdown PATH` (where the table went, not how it was measured)."""
    kept: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--markdown":
            skip = True
        elif not arg.startswith("--markdown="):
            kept.append(arg)
    return " ".join([".venv/bin/python -m", module, *kept])


def run_line(began: datetime, ended: datetime, took: dict[str, float], every: list[str]
             ) -> str:
    """The page's last line: the one `make bench` run its tables come from, when it began
    and ended, and each bench's time (the next estimate of the set's length starts here)."""
    minutes = (ended - began).total_seconds() / 60
    each = ", ".join(f"{n} {s / 60:.1f}" for n, s in took.items())
    left = [n for n in every if n not in took]
    partial = f" Not run this time (`--only`): {', '.join(left)}." if left else ""
    return (f"*These tables come from one run of `python -m bench`, {began:%Y-%m-%d %H:%M} to "
            f"{ended:%H:%M} UTC, {minutes:.1f} min (minutes a bench: {each}).{partial}*")
