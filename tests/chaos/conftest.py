"""Chaos suite fixtures: one embedded stack of its own, a Run per scenario, the table at the end.

The suite has its own stack (Kafka, MinIO, the sandbox web) because its scenarios kill the
broker and stop MinIO. `make test` runs only the scenarios marked `chaos_fast`;
`make chaos` (WEBGYM_CHAOS=all) runs every scenario. The table (scenario, episodes, lost,
duplicated, wrong, ...) is printed at the end of the session and written as markdown to
<pytest's base temp>/chaos_table.md, or to WEBGYM_CHAOS_TABLE when set.
"""

from __future__ import annotations

import asyncio
import io
import os
import platform
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from harness.outcomes import COLUMNS, markdown, row
from infra import stack
from tests.chaos.harness import RESULTS, Run
from tests.chaos.scenario import Options
from tests.integration.conftest import stack_settings
from webgym_common.config import Settings

TABLE: dict[str, Path] = {}


def everything() -> bool:
    return os.environ.get("WEBGYM_CHAOS") == "all"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if everything():
        return
    slow = [i for i in items
            if i.get_closest_marker("chaos") and not i.get_closest_marker("chaos_fast")]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [i for i in items if i not in set(slow)]


def pytest_report_header(config: pytest.Config) -> str | None:
    if everything():
        return "chaos: every scenario (WEBGYM_CHAOS=all)"
    return "chaos: the fast subset only (`make chaos` runs every scenario)"


@pytest.fixture(scope="session")
def chaos_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """Kafka, MinIO and the sandbox web for the chaos scenarios only."""
    base = tmp_path_factory.getbasetemp()
    TABLE["path"] = Path(os.environ.get("WEBGYM_CHAOS_TABLE") or base / "chaos_table.md")
    settings = stack_settings(str(tmp_path_factory.mktemp("chaos-stack")))
    try:
        asyncio.run(stack.up(settings))
        yield settings
    finally:
        stack.down(settings)


@pytest_asyncio.fixture(loop_scope="session")
async def chaos_run(chaos_stack: Settings, tmp_path: Path) -> AsyncIterator[Callable[..., Run]]:
    """Make the scenario's Run (its processes are stopped by `play`, or here at the latest)."""
    runs: list[Run] = []

    def make(scenario: str, options: Options | None = None, base: Settings | None = None) -> Run:
        run = Run(base or chaos_stack, tmp_path / f"run{len(runs)}", scenario,
                  options or Options())
        runs.append(run)
        return run

    yield make
    for run in runs:
        await run.teardown()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not RESULTS:
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="chaos suite: outcomes counted from the topics")
    for col in COLUMNS:
        table.add_column(col, justify="left" if col in ("scenario", "ended early") else "right")
    for t in RESULTS:
        style = None if t.clean else "red"
        table.add_row(*row(t), style=style)
    buf = io.StringIO()
    Console(file=buf, width=160, force_terminal=terminalreporter.hasmarkup).print(table)
    terminalreporter.write_sep("=", "chaos table")
    terminalreporter.write(buf.getvalue())
    for t in RESULTS:
        for note in t.notes:
            if not note.startswith("["):  # findings; the timeline is in the markdown
                terminalreporter.write_line(f"  {t.scenario}: {note}")
    header = {"machine": f"{os.cpu_count()} cores, {platform.machine()}",
              "episodes in flight": str(Options().contexts)}
    path = TABLE.get("path")
    if path is not None:
        path.write_text(markdown(RESULTS, header))
        terminalreporter.write_line(f"chaos table (markdown): {path}")
