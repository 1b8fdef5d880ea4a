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
    monkeypatch.setattr(rollout, "_main_job",
                        lambda settings, *args, **kwargs: ran.append(settings))
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


def test_the_main_job_ends_naming_its_results_what_still_runs_and_how_to_stop_it(
    tmp_path: Path,
) -> None:
    from webgym_common.config import load_settings

    settings = load_settings(infra={"data_dir": str(tmp_path)}, policy={"kind": "vllm"})
    lines = rollout.closing_lines(settings, None, [tmp_path / "export" / "it0.avro"],
                                  "http://127.0.0.1:18780/", ["browser", "policy", "trainer"])
    text = "\n".join(lines)
    assert f"{tmp_path / 'evaluations'}" in text and "metrics.csv" in text
    assert f"trajectories: {tmp_path / 'export'}/ (1 iteration files)" in text
    assert "monitor: http://127.0.0.1:18780/" in text
    assert "vLLM" in text and "browser, policy, trainer, monitor" in text
    assert lines[-1] == "stop everything: .venv/bin/webgym down"
    teacher = rollout.closing_lines(load_settings(policy={"kind": "teacher"}), tmp_path, [],
                                    None, [])
    assert "vLLM" not in "\n".join(teacher) and "pipeline: nothing" in "\n".join(teacher)
