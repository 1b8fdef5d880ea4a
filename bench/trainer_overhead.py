"""Trainer overhead: `consumers.trainer.run.train()` vs a direct `llamafactory-cli train`.

  .venv/bin/python -m bench.trainer_overhead [--samples 8] [--steps 6] [--repeats 1]

Both train the same run (the same data, dataset_info.json and YAML, each in a fresh folder)
on SmolLM2-135M on the CPU with LLaMA-Factory's venv; train() adds the subprocess handling,
following trainer_log.jsonl and the progress bar. Goal: ratio <= 1.1. With --repeats > 1 the
two alternate and the fastest of each is compared (the machine is shared).
"""

from __future__ import annotations

import asyncio
import subprocess
import tempfile
import time
from pathlib import Path

import typer
from rich.console import Console

from consumers.trainer.llamafactory import RunFiles, write_run
from consumers.trainer.run import Progress, train, train_env
from harness.machine import describe_machine
from infra import trainer_env, vllm_server
from webgym_common.config import TrainerSettings, get_settings
from webgym_common.events import ChatMessage, ReplaySample

console = Console()


def samples(n: int) -> list[ReplaySample]:
    elements = "\n".join(f"[{k}] button \"Item {k}\"" for k in range(1, 13))
    return [
        ReplaySample(
            sample_id=f"bench{i}:0", episode_id=f"bench{i}", task_id=f"task{i % 4}", step=0,
            messages=[
                ChatMessage(role="system", content="You control a web browser. Answer with "
                                                   "one action."),
                ChatMessage(role="user", content=f"Task: open item {i % 12 + 1}\n"
                                                 f"Interactive elements:\n{elements}\n"
                                                 "What is your next action?"),
            ],
            response=f"click({i % 12 + 1})", reward=1.0, iteration=0, policy_version="base")
        for i in range(n)
    ]


def direct(files: RunFiles, venv: Path, cfg: TrainerSettings) -> float:
    started = time.monotonic()
    with (files.run_dir / "train.log").open("wb") as log:
        subprocess.run([str(trainer_env.cli_path(venv)), "train", str(files.config)],
                       cwd=files.run_dir, env=train_env(cfg, files.run_dir), stdout=log,
                       stderr=subprocess.STDOUT, check=True, timeout=cfg.run_timeout_s)
    return time.monotonic() - started


def wrapped(files: RunFiles, venv: Path, cfg: TrainerSettings) -> tuple[float, int]:
    updates = 0

    async def on_progress(_: Progress) -> None:
        nonlocal updates
        updates += 1

    started = time.monotonic()
    asyncio.run(train(files, venv, cfg, on_progress=on_progress))
    return time.monotonic() - started, updates


def main(samples_n: int = typer.Option(8, "--samples"), steps: int = 6, repeats: int = 1,
         threads: int = 0) -> None:
    console.print(describe_machine())
    settings = get_settings()
    with console.status("LLaMA-Factory's venv and the model (cached)"):
        venv = trainer_env.prepare(settings)
        vllm_server.ensure_model(settings)
        base = trainer_env.base_model(settings)  # what the trainer trains (float32 on the CPU)
    cfg = settings.trainer.model_copy(update={"max_steps": steps, "threads": threads})
    console.print(f"run: {samples_n} samples, {steps} steps, batch {cfg.batch_size}, "
                  f"cutoff {cfg.cutoff_len}, mode {cfg.mode.value}, threads {threads or 'all'}, "
                  f"model {base}")
    direct_s: list[float] = []
    wrapped_s: list[float] = []
    with tempfile.TemporaryDirectory(prefix="webgym-trainer-bench-") as tmp:
        for r in range(repeats):
            a = write_run(Path(tmp) / f"direct{r}", samples(samples_n), cfg, base)
            with console.status(f"direct llamafactory-cli train ({r + 1}/{repeats})"):
                direct_s.append(direct(a, venv, cfg))
            b = write_run(Path(tmp) / f"wrapped{r}", samples(samples_n), cfg, base)
            wall, updates = wrapped(b, venv, cfg)
            wrapped_s.append(wall)
            console.print(f"repeat {r + 1}: direct {direct_s[-1]:.1f} s, train() {wall:.1f} s "
                          f"({updates} progress updates)")
    d, w = min(direct_s), min(wrapped_s)
    console.print(f"direct: {d:.1f} s ({d / steps:.2f} s/step incl. start-up), "
                  f"train(): {w:.1f} s; overhead ratio {w / d:.3f} (goal <= 1.1)")


if __name__ == "__main__":
    typer.run(main)
