"""Runs `llamafactory-cli train` on a run folder, with live progress, and reads its result.

Delivery: at-least-once per run folder, never twice at the same time. A finished folder
(all_results.json beside the weights) is returned as it is, without training again. An
unfinished one is trained again in place, and LLaMA-Factory itself resumes from the last
checkpoint-* it finds in output_dir (the YAML says `overwrite_output_dir: false`); a
half-written checkpoint is dropped first, and a run killed before its first checkpoint
starts over. The subprocess runs in its own process
group, is SIGKILLed with that group on cancel or timeout, dies with its parent (Linux
PDEATHSIG), and a run left behind by a killed trainer (train.pid) is killed before a rerun.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import shutil
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as Bar

from consumers.trainer.llamafactory import RunFiles
from webgym_common.config import TrainerSettings
from webgym_common.telemetry import without_telemetry

LOG = "train.log"
PID = "train.pid"
TRAINER_LOG = "trainer_log.jsonl"
RESULTS = "all_results.json"
# What LLaMA-Factory writes beside the weights; everything else at the top is the model.
RECORDS = {TRAINER_LOG, RESULTS, "train_results.json", "trainer_state.json",
           "training_args.bin", "README.md", "training_loss.png"}
POLL_S = 0.5


class TrainError(RuntimeError):
    """A LLaMA-Factory run failed, timed out or could not start."""


@dataclass(frozen=True)
class Progress:
    step: int
    total_steps: int
    loss: float | None
    elapsed_s: float
    eta_s: float | None


@dataclass(frozen=True)
class TrainResult:
    output_dir: Path
    adapter_files: list[Path]
    metrics: dict[str, float]
    steps: int
    wall_s: float


def hms_seconds(text: Any) -> float | None:
    """LLaMA-Factory's str(timedelta): '0:01:05' or '1 day, 2:00:00' -> seconds."""
    if not isinstance(text, str) or not text:
        return None
    days = 0
    if "day" in text:
        head, text = text.split(",", 1)
        days = int(head.split()[0])
    try:
        h, m, s = (float(x) for x in text.strip().split(":"))
    except ValueError:
        return None
    return days * 86400 + h * 3600 + m * 60 + s


def parse_log_line(line: str) -> Progress | None:
    """One trainer_log.jsonl line -> Progress; None for a partial or foreign line."""
    try:
        rec = json.loads(line)
        step, total = int(rec["current_steps"]), int(rec["total_steps"])
    except (ValueError, KeyError, TypeError):
        return None
    loss = rec.get("loss")
    return Progress(step=step, total_steps=total,
                    loss=float(loss) if isinstance(loss, int | float) else None,
                    elapsed_s=hms_seconds(rec.get("elapsed_time")) or 0.0,
                    eta_s=hms_seconds(rec.get("remaining_time")))


def train_env(cfg: TrainerSettings, run_dir: Path | None = None) -> dict[str, str]:
    """The run's environment: offline (the base model is a local directory), CPU threads,
    no usage reports (webgym_common.telemetry: LLaMA-Factory's hub, Gradio and W&B)."""
    env = without_telemetry({**os.environ, "HF_HUB_OFFLINE": "1",
                             "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"})
    if run_dir is not None:
        # The tokenized dataset cache lives and dies with its run (a rerun reuses it).
        env["HF_DATASETS_CACHE"] = str(run_dir / "datasets-cache")
    if cfg.use_cpu:
        env["CUDA_VISIBLE_DEVICES"] = ""
    if cfg.threads > 0:
        env["OMP_NUM_THREADS"] = str(cfg.threads)
    return env


def numeric(record: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in sorted(record.items())
            if isinstance(v, int | float) and not isinstance(v, bool)}


def model_files(output_dir: Path) -> list[Path]:
    return sorted(p for p in output_dir.iterdir() if p.is_file() and p.name not in RECORDS)


def result(files: RunFiles, wall_s: float) -> TrainResult | None:
    """The run's result if it finished (LLaMA-Factory writes all_results.json after the
    weights), else None."""
    out = files.output_dir
    if not (out / RESULTS).exists():
        return None
    metrics = numeric(json.loads((out / RESULTS).read_text()))
    state = out / "trainer_state.json"
    steps = int(json.loads(state.read_text()).get("global_step", 0)) if state.exists() else 0
    return TrainResult(output_dir=out, adapter_files=model_files(out), metrics=metrics,
                       steps=steps, wall_s=wall_s)


def complete_checkpoint(path: Path) -> bool:
    """transformers writes trainer_state.json last into a checkpoint-N folder."""
    try:
        json.loads((path / "trainer_state.json").read_text())
    except (OSError, ValueError):
        return False
    return True


def clean_for_rerun(output_dir: Path) -> None:
    """Drop what a killed run left half-written: checkpoints without their state (resuming
    would pick the newest, broken one), and everything when no checkpoint is left (then
    LLaMA-Factory starts over; it refuses a folder holding weights but no checkpoint)."""
    if not output_dir.is_dir():
        return
    partial = [p for p in output_dir.glob("checkpoint-*") if p.is_dir()]
    for p in partial:
        if not complete_checkpoint(p):
            shutil.rmtree(p)
    if not any(p.is_dir() for p in output_dir.glob("checkpoint-*")):
        shutil.rmtree(output_dir)


# Loaded here, not in the forked child: dlopen there could wait on a lock another thread held.
_LIBC = ctypes.CDLL(None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def kill_leftover(files: RunFiles) -> None:
    """SIGKILL the group of a run a killed trainer left on this folder (train.pid)."""
    try:
        pid = int((files.run_dir / PID).read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return
    if str(files.config).encode() in cmdline:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)


class _Follower:
    """Reads the new complete lines of trainer_log.jsonl (those of this process only)."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset = path, 0
        with contextlib.suppress(OSError):
            self.offset = path.stat().st_size

    def new(self) -> list[Progress]:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                chunk = f.read()
        except OSError:
            return []
        done = chunk.rfind(b"\n") + 1
        self.offset += done
        return [p for line in chunk[:done].decode(errors="replace").splitlines()
                if (p := parse_log_line(line)) is not None]


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


async def train(files: RunFiles, venv: Path, cfg: TrainerSettings,
                on_progress: Callable[[Progress], Awaitable[None]] | None = None,
                show_progress: bool = True, console: Console | None = None) -> TrainResult:
    """Train the run folder (or return its finished result); TrainError on failure."""
    done = result(files, 0.0)
    if done is not None:
        return done
    kill_leftover(files)
    clean_for_rerun(files.output_dir)
    files.output_dir.mkdir(parents=True, exist_ok=True)
    # The venv's entry point; infra.trainer_env builds the venv (this layer cannot import it).
    cli = venv / "bin" / "llamafactory-cli"
    if not cli.exists():
        raise TrainError(f"{cli} is missing: run `webgym infra prepare --with-trainer`")
    follower = _Follower(files.output_dir / TRAINER_LOG)
    bar = Bar(TextColumn("training {task.fields[run]}"), BarColumn(), MofNCompleteColumn(),
              TextColumn("loss {task.fields[loss]}"), TimeElapsedColumn(),
              TextColumn("eta {task.fields[eta]}"),
              console=console or Console(stderr=True), disable=not show_progress)
    task = bar.add_task("train", total=None, run=files.run_dir.name, loss="-", eta="-")
    started = time.monotonic()

    async def report() -> None:
        for p in follower.new():
            bar.update(task, completed=p.step, total=p.total_steps,
                       loss="-" if p.loss is None else f"{p.loss:.4f}",
                       eta="-" if p.eta_s is None else f"{p.eta_s:.0f}s")
            if on_progress is not None:
                await on_progress(p)

    with bar, (files.run_dir / LOG).open("ab") as log:
        proc = await asyncio.create_subprocess_exec(
            str(cli), "train", str(files.config), cwd=files.run_dir,
            env=train_env(cfg, files.run_dir),
            stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=asyncio.subprocess.STDOUT,
            start_new_session=True, preexec_fn=_die_with_parent)
        (files.run_dir / PID).write_text(str(proc.pid))
        try:
            async with asyncio.timeout(cfg.run_timeout_s):
                while proc.returncode is None:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(proc.wait(), POLL_S)
                    await report()
        except BaseException as err:  # cancelled or timed out: no orphan keeps training
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            if isinstance(err, TimeoutError):
                raise TrainError(f"training timed out after {cfg.run_timeout_s:.0f} s: "
                                 f"{files.run_dir}") from None
            raise
        finally:
            (files.run_dir / PID).unlink(missing_ok=True)
    if proc.returncode != 0:
        raise TrainError(f"llamafactory-cli train exited {proc.returncode} "
                         f"({files.run_dir / LOG}):\n{_tail(files.run_dir / LOG)}")
    finished = result(files, time.monotonic() - started)
    if finished is None:
        raise TrainError(f"no {RESULTS} after training: {files.output_dir}")
    return finished
