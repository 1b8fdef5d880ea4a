"""Reading a LLaMA-Factory run (consumers/trainer/run.py): trainer_log.jsonl, results, env."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from consumers.trainer.llamafactory import RunFiles
from consumers.trainer.run import (
    Progress,
    TrainError,
    clean_for_rerun,
    hms_seconds,
    parse_log_line,
    result,
    train,
    train_env,
)
from webgym_common.config import TrainerSettings

# Lines LLaMA-Factory 0.9.5 wrote here (SmolLM2-135M, LoRA, max_steps 2, batch 1): one per
# logging step, then a closing one without loss when training ends.
STEP_LINE = ('{"current_steps": 1, "total_steps": 2, "loss": 3.2824771404266357, "lr": 0.0001, '
             '"epoch": 0.25, "percentage": 50.0, "elapsed_time": "0:00:16", '
             '"remaining_time": "0:00:16"}')
LAST_LINE = ('{"current_steps": 2, "total_steps": 2, "epoch": 0.5, "percentage": 100.0, '
             '"elapsed_time": "0:00:33", "remaining_time": "0:00:00"}')


def test_a_step_line_gives_step_total_loss_and_times() -> None:
    assert parse_log_line(STEP_LINE) == Progress(step=1, total_steps=2,
                                                 loss=3.2824771404266357,
                                                 elapsed_s=16.0, eta_s=16.0)


def test_the_closing_line_has_no_loss() -> None:
    assert parse_log_line(LAST_LINE) == Progress(step=2, total_steps=2, loss=None,
                                                 elapsed_s=33.0, eta_s=0.0)


@pytest.mark.parametrize("line", ['{"current_steps": 1, "tot', "", "not json", "[1, 2]",
                                  '{"loss": 1.0}'])
def test_partial_or_foreign_lines_are_skipped(line: str) -> None:
    assert parse_log_line(line) is None


def test_timedelta_strings() -> None:
    assert hms_seconds("0:01:05") == 65.0
    assert hms_seconds("2:00:00") == 7200.0
    assert hms_seconds("1 day, 0:00:10") == 86410.0
    assert hms_seconds("") is None and hms_seconds(None) is None and hms_seconds("soon") is None


def test_threads_and_offline_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    env = train_env(TrainerSettings(threads=1))
    assert env["OMP_NUM_THREADS"] == "1" and env["HF_HUB_OFFLINE"] == "1"
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert "OMP_NUM_THREADS" not in train_env(TrainerSettings(threads=0))  # all cores


def files_in(tmp_path: Path) -> RunFiles:
    out = tmp_path / "output"
    out.mkdir(parents=True)
    return RunFiles(run_dir=tmp_path, config=tmp_path / "train.yaml", output_dir=out,
                    dataset_file=tmp_path / "data.json", samples=1)


def test_an_unfinished_run_has_no_result(tmp_path: Path) -> None:
    files = files_in(tmp_path)
    (files.output_dir / "checkpoint-1").mkdir()
    assert result(files, 0.0) is None


def test_a_finished_run_lists_its_model_files_and_numeric_metrics(tmp_path: Path) -> None:
    files = files_in(tmp_path)
    out = files.output_dir
    for name in ("adapter_config.json", "adapter_model.safetensors", "trainer_log.jsonl",
                 "train_results.json", "training_args.bin"):
        (out / name).write_text("{}")
    (out / "checkpoint-2").mkdir()
    (out / "all_results.json").write_text(json.dumps(
        {"epoch": 0.5, "train_loss": 2.9, "train_runtime": 6.1, "total_flos": 12,
         "note": "text"}))
    (out / "trainer_state.json").write_text(json.dumps({"global_step": 2}))
    r = result(files, 7.5)
    assert r is not None
    assert [p.name for p in r.adapter_files] == ["adapter_config.json",
                                                 "adapter_model.safetensors"]
    assert r.metrics == {"epoch": 0.5, "total_flos": 12.0, "train_loss": 2.9,
                         "train_runtime": 6.1}
    assert r.steps == 2 and r.wall_s == 7.5


async def test_a_finished_run_is_returned_without_training(tmp_path: Path) -> None:
    files = files_in(tmp_path)
    (files.output_dir / "all_results.json").write_text('{"train_loss": 1.5}')
    r = await train(files, tmp_path / "no-venv", TrainerSettings(), show_progress=False)
    assert r.metrics == {"train_loss": 1.5} and r.wall_s == 0.0


async def test_a_missing_venv_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(TrainError, match="--with-trainer"):
        await train(files_in(tmp_path), tmp_path / "no-venv", TrainerSettings(),
                    show_progress=False)


async def test_a_failing_run_reports_the_end_of_its_log(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    cli = venv / "bin" / "llamafactory-cli"
    cli.write_text("#!/bin/sh\necho loading\necho 'ValueError: no such template' >&2\nexit 1\n")
    cli.chmod(0o755)
    files = files_in(tmp_path / "run")
    with pytest.raises(TrainError, match="(?s)exited 1.*no such template"):
        await train(files, venv, TrainerSettings(), show_progress=False)
    assert not (files.run_dir / "train.pid").exists()


async def test_progress_is_reported_per_new_line(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    cli = venv / "bin" / "llamafactory-cli"
    # A stand-in writing LLaMA-Factory's files as 0.9.5 does, to check the follower.
    cli.write_text(f"""#!/bin/sh
out="$(dirname "$2")/output"
echo '{STEP_LINE}' >> "$out/trainer_log.jsonl"
sleep 0.6
echo '{LAST_LINE}' >> "$out/trainer_log.jsonl"
echo '{{"train_loss": 2.5}}' > "$out/all_results.json"
echo '{{"global_step": 2}}' > "$out/trainer_state.json"
""")
    cli.chmod(0o755)
    files = files_in(tmp_path / "run")
    (files.output_dir / "trainer_log.jsonl").write_text(LAST_LINE + "\n")  # an earlier run's
    seen: list[Progress] = []

    async def on_progress(p: Progress) -> None:
        seen.append(p)

    r = await train(files, venv, TrainerSettings(), on_progress=on_progress,
                    show_progress=False)
    assert [(p.step, p.loss) for p in seen] == [(1, 3.2824771404266357), (2, None)]
    assert r.steps == 2 and r.metrics == {"train_loss": 2.5}


def test_a_rerun_drops_half_written_checkpoints_and_keeps_complete_ones(tmp_path: Path) -> None:
    out = tmp_path / "output"
    for n, state in ((1, '{"global_step": 1}'), (2, '{"global_st'), (3, None)):
        (out / f"checkpoint-{n}").mkdir(parents=True)
        (out / f"checkpoint-{n}" / "adapter_model.safetensors").write_text("w")
        if state is not None:
            (out / f"checkpoint-{n}" / "trainer_state.json").write_text(state)
    (out / "trainer_log.jsonl").write_text(STEP_LINE + "\n")
    clean_for_rerun(out)
    assert sorted(p.name for p in out.iterdir()) == ["checkpoint-1", "trainer_log.jsonl"]


def test_a_rerun_without_any_checkpoint_starts_from_an_empty_folder(tmp_path: Path) -> None:
    out = tmp_path / "output"
    (out / "checkpoint-2").mkdir(parents=True)  # its state never written
    (out / "adapter_model.safetensors").write_text("w")  # LLaMA-Factory would refuse this
    clean_for_rerun(out)
    assert not out.exists()
    clean_for_rerun(out)  # nothing there: nothing to do


def sleeper_venv(tmp_path: Path) -> Path:
    """A stand-in llamafactory-cli that just sleeps (exec: it is the child process itself)."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    cli = venv / "bin" / "llamafactory-cli"
    cli.write_text("#!/bin/sh\nexec sleep 120\n")
    cli.chmod(0o755)
    return venv


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def wait_gone(pid: int, within_s: float = 10.0) -> bool:
    for _ in range(int(within_s / 0.05)):
        if not alive(pid):
            return True
        await asyncio.sleep(0.05)
    return False


async def started_pid(files: RunFiles) -> int:
    pid_file = files.run_dir / "train.pid"
    for _ in range(200):
        if pid_file.exists() and pid_file.read_text():
            return int(pid_file.read_text())
        await asyncio.sleep(0.05)
    raise AssertionError("the run never started")


async def test_cancelling_kills_the_run(tmp_path: Path) -> None:
    files = files_in(tmp_path / "run")
    task = asyncio.create_task(train(files, sleeper_venv(tmp_path), TrainerSettings(),
                                     show_progress=False))
    pid = await started_pid(files)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await wait_gone(pid)
    assert not (files.run_dir / "train.pid").exists()


async def test_a_run_over_its_time_limit_is_killed(tmp_path: Path) -> None:
    files = files_in(tmp_path / "run")
    venv = sleeper_venv(tmp_path)
    (venv / "bin" / "llamafactory-cli").write_text(
        f"#!/bin/sh\necho $$ > {tmp_path / 'child.pid'}\nexec sleep 120\n")
    with pytest.raises(TrainError, match="timed out after 1 s"):
        await train(files, venv, TrainerSettings(run_timeout_s=1.0), show_progress=False)
    assert await wait_gone(int((tmp_path / "child.pid").read_text()))


async def test_the_run_dies_with_a_sigkilled_trainer(tmp_path: Path) -> None:
    files = files_in(tmp_path / "run")
    venv = sleeper_venv(tmp_path)
    script = (
        "import asyncio, sys\n"
        "from pathlib import Path\n"
        "from consumers.trainer.llamafactory import RunFiles\n"
        "from consumers.trainer.run import train\n"
        "from webgym_common.config import TrainerSettings\n"
        f"r = Path({str(files.run_dir)!r})\n"
        "files = RunFiles(r, r / 'train.yaml', r / 'output', r / 'data.json', 1)\n"
        f"asyncio.run(train(files, Path({str(venv)!r}), TrainerSettings(), "
        "show_progress=False))\n"
    )
    trainer = await asyncio.create_subprocess_exec(sys.executable, "-c", script)
    try:
        pid = await started_pid(files)
        assert alive(pid)
    finally:
        trainer.kill()  # SIGKILL: no handler of ours runs
        await trainer.wait()
    assert await wait_gone(pid)  # PR_SET_PDEATHSIG took it down with its parent


async def test_a_run_left_by_a_killed_trainer_is_killed_before_the_rerun(tmp_path: Path) -> None:
    files = files_in(tmp_path / "run")
    files.config.write_text("stage: sft\n")
    leftover = await asyncio.create_subprocess_exec(
        "tail", "-f", str(files.config), start_new_session=True)  # its cmdline names the run
    (files.run_dir / "train.pid").write_text(str(leftover.pid))
    stranger = await asyncio.create_subprocess_exec("sleep", "30", start_new_session=True)
    try:
        with pytest.raises(TrainError, match="timed out"):
            await train(files, sleeper_venv(tmp_path), TrainerSettings(run_timeout_s=0.5),
                        show_progress=False)
        assert await asyncio.wait_for(leftover.wait(), 10) == -9
        # A recycled pid of another program is left alone.
        (files.run_dir / "train.pid").write_text(str(stranger.pid))
        with pytest.raises(TrainError, match="timed out"):
            await train(files, sleeper_venv(tmp_path / "2"), TrainerSettings(run_timeout_s=0.5),
                        show_progress=False)
        assert stranger.returncode is None and alive(stranger.pid)
    finally:
        for p in (leftover, stranger):
            if p.returncode is None:
                p.kill()
                await p.wait()
