"""`webgym run` and `webgym curve`: their options land in the settings the job runs on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from webgym_cli import rollout
from webgym_cli.main import app


@pytest.fixture
def jobs(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The settings each main job would have run on (nothing is started)."""
    ran: list[Any] = []
    monkeypatch.setattr(rollout, "_main_job", lambda settings, *args: ran.append(settings))
    return ran


@pytest.mark.parametrize("command", ["run", "curve"])
def test_model_points_vllm_and_the_trainer_at_a_model_directory(
    runner: CliRunner, jobs: list[Any], tmp_path: Path, command: str
) -> None:
    result = runner.invoke(app, [command, "--model", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert jobs[0].vllm.model == str(tmp_path)
    result = runner.invoke(app, [command])
    assert result.exit_code == 0, result.output
    assert jobs[1].vllm.model == ""  # SmolLM2, built into the cache


def test_a_model_that_is_not_a_directory_is_a_usage_error(
    runner: CliRunner, jobs: list[Any], tmp_path: Path
) -> None:
    result = runner.invoke(app, ["run", "--model", str(tmp_path / "nowhere")])
    assert result.exit_code == 2 and not jobs
