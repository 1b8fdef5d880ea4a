"""harness/report.py: a bench's table as markdown, appended to a file."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from harness.report import (
    append_markdown,
    bench_command,
    markdown_table,
    ratio_spread,
    repeat_note,
    run_line,
    speedup_spread,
    spread,
    spread_cell,
)

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


def test_spread_is_the_median_with_the_range_of_the_runs() -> None:
    s = spread([6.4, 5.9, 6.19])
    assert (s.median, s.low, s.high, s.runs) == (6.19, 5.9, 6.4, 3)
    assert s.cell() == "6.19 [5.90, 6.40]"
    assert spread([1.0, 2.0, 3.0, 10.0]).median == 2.5  # an even count: the mean of the middle
    assert spread_cell([0.5, 0.25, 0.75], ".0%") == "50% [25%, 75%]"
    assert spread_cell([4.75], ".2f", "x") == "4.75x"  # one run: the figure alone
    assert spread_cell([]) == "-"
    assert spread_cell([float("nan"), float("nan")]) == "-"


def test_ratio_spread_is_over_the_baselines_median() -> None:
    r = ratio_spread([6.0, 7.0, 8.0], [10.0, 9.0, 11.0])
    assert (r.median, r.low, r.high, r.runs) == (0.7, 0.6, 0.8, 3)
    assert r.cell(suffix="x") == "0.70x [0.60x, 0.80x]"
    assert ratio_spread([1.0], []).cell() == "-"
    assert ratio_spread([1.0], [0.0]).cell() == "-"


def test_speedup_spread_inverts_the_times_the_slowest_run_at_the_low_end() -> None:
    s = speedup_spread([4.0, 5.0, 8.0], [20.0, 18.0, 22.0])  # baseline median 20
    assert (s.median, s.low, s.high) == (4.0, 2.5, 5.0)
    assert speedup_spread([0.0], [1.0]).cell() == "-"


def test_repeat_note_and_bench_command() -> None:
    assert repeat_note(1) == "One run."
    assert "median of 3 runs" in repeat_note(3)
    assert "baseline" in repeat_note(3)
    assert repeat_note(2, ratios=False) == \
        "Each figure is the median of 2 runs, [min, max] after it."
    assert bench_command("bench.bus_scale", ["--steps", "6", "--markdown", "/tmp/x.md",
                                             "--repeat", "3"]) == \
        ".venv/bin/python -m bench.bus_scale --steps 6 --repeat 3"
    assert bench_command("bench.x", ["--markdown=/tmp/x.md"]) == ".venv/bin/python -m bench.x"


def test_run_line_names_the_one_run_and_each_bench_time() -> None:
    ended = datetime(2026, 3, 1, 12, 53, 30, tzinfo=UTC)
    line = run_line(WHEN, ended, {"bus": 190.0, "rollout": 400.0}, ["bus", "rollout"])
    assert line == ("*These tables come from one run of `python -m bench`, 2026-03-01 12:30 to "
                    "12:53 UTC, 23.5 min (minutes a bench: bus 3.2, rollout 6.7).*")
    partial = run_line(WHEN, ended, {"bus": 190.0}, ["bus", "rollout", "lora"])
    assert partial.endswith("Not run this time (`--only`): rollout, lora.*")
