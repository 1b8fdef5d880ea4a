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


def test_the_curve_by_default_is_the_measured_miniwob_recipe(
    runner: CliRunner, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from webgym_common.choices import Split, Suite

    calls: list[tuple[Any, tuple, dict]] = []
    monkeypatch.setattr(rollout, "_main_job",
                        lambda settings, *args, **kwargs: calls.append((settings, args, kwargs)))
    result = runner.invoke(app, ["curve", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    settings, (tasks, monitor, bank, suites, per_iteration, iterations, out), kwargs = calls[0]
    assert (bank, suites, per_iteration, iterations, out) == (
        510, [Suite.MINIWOB], 128, 2, tmp_path)
    assert kwargs == {"from_scratch": True, "control": True} and not monitor
    assert settings.rollout.eval_suite == Suite.MINIWOB
    assert list(settings.rollout.eval_splits) == [Split.TEST]
    assert (settings.rollout.eval_per_group, settings.rollout.eval_max_steps) == (6, 8)
    assert settings.trainer.max_steps == 96 and settings.rollout.train
    assert settings.rollout.demonstration_share == 0.0  # demonstrations come from the bank
    assert settings.rollout.task_timeout_minutes == 5.0
    assert settings.rollout.train_max_steps == 8
    assert (settings.rollout.attempts_per_task, settings.policy.temperature) == (4, 0.7)
    assert settings.rollout.train_pool == "rollout"
    # 16 episodes at once, each timed from its own request: 128 on 4 contexts, all requested
    # at the start, ran out their 5 minutes waiting.
    assert (settings.browser.contexts, settings.policy.max_inflight,
            settings.rollout.iteration_window) == (16, 16, 16)
    assert (settings.rollout.seed, settings.trainer.seed) == (1, 1)

    runner.invoke(app, ["curve", "--suite", "all", "--train-steps", "650",
                        "--episode-minutes", "4", "--train-max-steps", "12"])
    settings, args, _ = calls[1]
    assert settings.rollout.task_timeout_minutes == 4.0
    assert settings.rollout.train_max_steps == 12
    assert args[3] == [Suite.MINIWOB, Suite.SANDBOX]
    assert settings.trainer.run_timeout_s >= 650 * rollout.RUN_S_PER_STEP

    runner.invoke(app, ["curve", "--attempts", "1", "--temperature", "0", "--train-pool",
                        "all", "--bank-share", "0", "--no-control"])
    settings, args, kwargs = calls[2]
    assert (settings.rollout.attempts_per_task, settings.policy.temperature) == (1, 0.0)
    assert settings.rollout.train_pool == "all"
    assert settings.trainer.demonstration_share == 0.0 and kwargs["control"] is False
    assert args[6] == Path(settings.infra.data_dir) / "evaluations" / "curve"  # not the docs
