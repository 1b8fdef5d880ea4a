"""Real `llamafactory-cli train` runs (LLaMA-Factory's own venv) on SmolLM2-135M on the CPU.

A few steps each (batch 1, cutoff 256): a run gives a LoRA adapter and live progress; a run on
top of it continues its adapter; a run SIGKILLed mid-way (its whole process group) and
started again on the same folder resumes from its checkpoint and finishes.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import yaml

from consumers.trainer.llamafactory import RunFiles, write_run
from consumers.trainer.run import Progress, TrainError, TrainResult, train
from infra import trainer_env, vllm_server
from webgym_common.choices import TrainMode
from webgym_common.config import TrainerSettings, load_settings
from webgym_common.events import ChatMessage, ReplaySample

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

PAGES = [("click-button", "click(4)"), ("enter-text", "type(2, 'hello')"),
         ("click-link", "click(7)"), ("focus-text", "click(1)")]


def samples() -> list[ReplaySample]:
    return [
        ReplaySample(
            sample_id=f"ep{i}:0", episode_id=f"ep{i}", task_id=task, step=0,
            messages=[
                ChatMessage(role="system", content="You control a web browser. Answer with "
                                                   "one action."),
                ChatMessage(role="user", content=f"Task: {task}\nPage (elements end with "
                                                 "their [number]):\ntextbox [1]\ninput [2]\n"
                                                 "\"Submit\" button [4]\n\"Next\" link [7]\n"
                                                 "What is your next action?"),
            ],
            response=response, reward=1.0, iteration=0, policy_version="base", success=True)
        for i, (task, response) in enumerate(PAGES)
    ]


@pytest.fixture(scope="module")
def env() -> tuple[Path, str]:
    """(LLaMA-Factory's venv, the base model directory), both cached by `infra prepare`."""
    settings = load_settings()
    return trainer_env.prepare(settings), str(vllm_server.ensure_model(settings))


def small(max_steps: int) -> TrainerSettings:
    return TrainerSettings(max_steps=max_steps, batch_size=1, cutoff_len=256)


async def run_collecting(files: RunFiles, venv: Path, cfg: TrainerSettings,
                         seen: list[Progress]) -> TrainResult:
    async def on_progress(p: Progress) -> None:
        seen.append(p)

    return await train(files, venv, cfg, on_progress=on_progress)


def assert_adapter(result: TrainResult) -> None:
    names = {p.name for p in result.adapter_files}
    assert {"adapter_config.json", "adapter_model.safetensors"} <= names
    assert (result.output_dir / "adapter_model.safetensors").stat().st_size > 0


async def test_a_run_gives_an_adapter_and_progress_and_a_next_run_continues_it(
    env: tuple[Path, str], tmp_path: Path,
) -> None:
    venv, base = env
    cfg = small(2)
    seen: list[Progress] = []
    first = await run_collecting(write_run(tmp_path / "v1", samples(), cfg, base),
                                 venv, cfg, seen)
    assert_adapter(first)
    assert first.steps == 2 and "train_loss" in first.metrics
    steps = [p.step for p in seen]
    assert steps == sorted(steps) and steps[-1] == 2 and seen[0].total_steps == 2
    assert any(p.loss is not None and p.loss > 0 for p in seen)

    files = write_run(tmp_path / "v2", samples(), cfg, base, parent_adapter=first.output_dir)
    second = await train(files, venv, cfg, show_progress=False)
    assert_adapter(second)
    log = (files.run_dir / "train.log").read_text()
    assert f"Loaded adapter(s): {first.output_dir}" in log  # trained on top of v1's LoRA

    # A finished folder is not trained again (a trainer restarted after the run ended).
    again = await train(files, venv, cfg, show_progress=False)
    assert again.adapter_files == second.adapter_files and again.wall_s == 0.0


async def test_a_run_killed_mid_way_resumes_on_the_same_folder(
    env: tuple[Path, str], tmp_path: Path,
) -> None:
    venv, base = env
    cfg = small(4)  # a checkpoint every step (4 steps / 4 checkpoints per run)
    files = write_run(tmp_path / "run", samples(), cfg, base)
    killed_at: list[int] = []

    async def kill_after_two_steps(p: Progress) -> None:
        if p.step >= 2 and not killed_at:
            killed_at.append(p.step)
            pid = int((files.run_dir / "train.pid").read_text())
            os.killpg(pid, signal.SIGKILL)

    with pytest.raises(TrainError, match="exited -9"):
        await train(files, venv, cfg, on_progress=kill_after_two_steps, show_progress=False)
    assert killed_at and not (files.output_dir / "all_results.json").exists()

    seen: list[Progress] = []
    resumed = await run_collecting(files, venv, cfg, seen)
    assert_adapter(resumed)
    assert resumed.steps == 4
    assert "Resuming training from" in (files.run_dir / "train.log").read_text()
    assert seen and seen[0].step >= 2  # went on from a checkpoint, did not start over


def with_failures() -> list[ReplaySample]:
    """Each page answered once right (success) and once wrong (failure) on the same step."""
    good = samples()
    bad = [s.model_copy(update={"sample_id": f"bad{s.sample_id}",
                                "episode_id": f"bad{s.episode_id}", "response": "click(99)",
                                "reward": 0.0, "success": False})
           for s in good]
    return good + bad


@pytest.mark.parametrize("mode", [TrainMode.KTO, TrainMode.DPO])
async def test_a_preference_run_kto_or_dpo_gives_an_adapter(
    env: tuple[Path, str], tmp_path: Path, mode: TrainMode,
) -> None:
    # The recipe's preference objectives (WEBGYM_TRAINER__MODE) as LLaMA-Factory really runs
    # them: KTO on the desirable/undesirable tags, DPO on the success/failure pairs.
    venv, base = env
    cfg = small(2).model_copy(update={"mode": mode})
    files = write_run(tmp_path / mode.value, with_failures(), cfg, base)
    result = await train(files, venv, cfg, show_progress=False)
    assert_adapter(result)
    assert result.steps == 2 and "train_loss" in result.metrics
    assert yaml.safe_load(files.config.read_text())["stage"] == mode.value
