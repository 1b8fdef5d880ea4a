"""`webgym eval`'s task selections and the baseline: what reaches the evaluation."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from producers.controller.heldout import HELDOUT_PER_GROUP
from webgym_cli import evaluate
from webgym_cli.main import app
from webgym_common.choices import Split, Suite


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Any, ...]]:
    seen: list[tuple[Any, ...]] = []

    async def fake(*args: Any) -> list[Any]:
        seen.append(args)
        return []

    monkeypatch.setattr(evaluate, "_evaluate", fake)
    return seen


@pytest.mark.parametrize(("flags", "per_group"), [
    (["--per-group", "3"], 3), (["--heldout"], HELDOUT_PER_GROUP), ([], None)])
def test_the_selection_reaches_the_evaluation(runner: CliRunner, calls: list[tuple[Any, ...]],
                                              flags: list[str], per_group: object) -> None:
    result = runner.invoke(app, ["eval", *flags])
    assert result.exit_code == 0, result.output
    (_, _, _, version, limit, _, _, groups, baseline), = calls
    assert (version, limit, groups, baseline) == (None, None, per_group, False)


def test_the_baseline_runs_on_the_held_out_set(runner: CliRunner,
                                               calls: list[tuple[Any, ...]]) -> None:
    result = runner.invoke(app, ["eval", "--baseline", "--heldout"])
    assert result.exit_code == 0, result.output
    assert calls[0][-2:] == (HELDOUT_PER_GROUP, True)


@pytest.mark.parametrize("flags", [
    ["--limit", "5", "--per-group", "3"], ["--limit", "5", "--heldout"],
    ["--per-group", "3", "--heldout"], ["--baseline", "--version", "2"], ["--per-group", "0"]])
def test_conflicting_selections_are_refused(runner: CliRunner, calls: list[tuple[Any, ...]],
                                            flags: list[str]) -> None:
    result = runner.invoke(app, ["eval", *flags])
    assert result.exit_code == 2 and not calls, result.output


@pytest.mark.parametrize(("flags", "per_group"), [
    (["--per-group", "8", "--suite", "sandbox"], 8),
    (["--heldout", "--suite", "sandbox"], HELDOUT_PER_GROUP[Suite.SANDBOX]),
    (["--limit", "20"], None)])
def test_the_report_covers_the_selection_evaluated(
        runner: CliRunner, calls: list[tuple[Any, ...]], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path, flags: list[str], per_group: int | None) -> None:
    reports: list[tuple[Any, ...]] = []

    async def fake_report(*args: Any) -> None:
        reports.append(args)

    monkeypatch.setattr(evaluate, "_report", fake_report)
    result = runner.invoke(app, ["eval", *flags, "--seed", "3", "--report", str(tmp_path)])
    assert result.exit_code == 0, result.output
    (_, out, splits, _, seed, groups), = reports
    assert (out, splits, seed, groups) == (tmp_path, [Split.TEST], 3, per_group)
    assert len(calls) == 1  # the evaluation ran first


def test_a_report_of_every_suites_own_held_out_size_is_refused(
        runner: CliRunner, calls: list[tuple[Any, ...]], tmp_path: Path) -> None:
    result = runner.invoke(app, ["eval", "--heldout", "--report", str(tmp_path)])
    assert result.exit_code == 2 and not calls, result.output
