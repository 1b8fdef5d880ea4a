"""harness/report.py: a bench's table as markdown, appended to a file."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness.report import append_markdown, markdown_table

WHEN = datetime(2026, 3, 1, 12, 30, tzinfo=UTC)


def test_markdown_table_has_heading_command_date_machine_table_and_notes() -> None:
    text = markdown_table("bus scale", ".venv/bin/python -m bench.bus_scale --steps 6",
                          ["episodes", "steps/s"], [["64", "120"], ["512", "a|b"]],
                          notes="- one note", when=WHEN, machine="machine: X, 2 cores")
    assert text.splitlines() == [
        "## bus scale", "",
        "`.venv/bin/python -m bench.bus_scale --steps 6`  ",
        "2026-03-01 12:30 UTC  ",
        "machine: X, 2 cores", "",
        "| episodes | steps/s |",
        "|---|---|",
        "| 64 | 120 |",
        "| 512 | a\\|b |",
        "", "- one note",
    ]


def test_markdown_table_defaults_to_this_machine_and_refuses_ragged_rows() -> None:
    assert "machine: " in markdown_table("t", "cmd", ["a"], [["1"]])
    with pytest.raises(ValueError):
        markdown_table("t", "cmd", ["a", "b"], [["1"]])


def test_append_markdown_keeps_what_was_there_with_a_blank_line_between(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "results.md"
    append_markdown(path, "## one\n")
    append_markdown(path, "## two\n")
    assert path.read_text() == "## one\n\n## two\n"
    other = tmp_path / "no-newline.md"
    other.write_text("# results")
    append_markdown(other, "## three\n")
    assert other.read_text() == "# results\n\n## three\n"
