"""The page-driven settle against the fixed one: the same tasks, the same outcomes, less time.

  .venv/bin/python -m bench.settle_outcomes [--tasks 48] [--contexts 8] \
      [--markdown docs/benchmarks.md]

For each suite (the sandbox's hand-written tasks, MiniWoB++), one rollout iteration of the
same fixed sample of train tasks, teacher-forced through the whole pipeline, once with
`browser.settle=fixed` (a 0.3 s sleep after every action: the baseline) and once with
`browser.settle=page` (until no request is in flight and the DOM has been still for
settle_quiet_s, capped at settle_max_s). Prints each run's success, mean settle and step
time, steps/s, and every task whose reward differs between the two.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer
from rich.console import Console

from bench.rollout_iteration import TASKS_FILE, PipelineRun, via_pipeline
from environments.tasks.miniwob_tasks import OUTPUT as MINIWOB_TASKS
from harness.machine import describe_machine
from harness.report import append_markdown, bench_command, console_table, markdown_table
from infra import stack
from webgym_common.choices import SettleMode
from webgym_common.config import get_settings

console = Console(width=160)
SUITES = {"sandbox": TASKS_FILE, "miniwob": MINIWOB_TASKS}
STEP_PHASES = ("execute", "settle", "screenshot", "tree", "upload")


def differing(a: PipelineRun, b: PipelineRun) -> list[str]:
    """Tasks both runs scored whose rewards differ, and tasks only one of them scored."""
    return sorted(t for t in a.rewards.keys() | b.rewards.keys()
                  if a.rewards.get(t) != b.rewards.get(t))


def main(tasks: int = 48, contexts: int = 8, markdown: Path | None = None) -> None:
    console.print(describe_machine())
    settings = get_settings()
    asyncio.run(stack.up(settings))
    columns = ["suite", "settle", "tasks", "success", "settle ms", "step ms", "steps/s",
               "tasks that differ"]
    rows: list[list[str]] = []
    for suite, path in SUITES.items():
        runs: dict[SettleMode, PipelineRun] = {}
        for mode in (SettleMode.FIXED, SettleMode.PAGE):
            console.print(f"{suite}: settle={mode} ...")
            runs[mode] = asyncio.run(via_pipeline(settings, tasks, contexts, 0.0, path,
                                                  {"settle": mode}))
        changed = differing(runs[SettleMode.FIXED], runs[SettleMode.PAGE])
        for mode, run in runs.items():
            step_ms = sum(run.phases.get(p, 0.0) for p in STEP_PHASES)
            rows.append([suite, str(mode), str(len(run.rewards)), f"{run.success:.3f}",
                         f"{run.phases.get('settle', 0.0):.0f}", f"{step_ms:.0f}",
                         f"{run.rate:.2f}",
                         "-" if mode is SettleMode.FIXED else (", ".join(changed) or "none")])
    console.print(console_table(
        f"settle: fixed 0.3 s vs page-driven, {tasks} train tasks per suite", columns, rows))
    if markdown is not None:
        append_markdown(markdown, markdown_table(
            "Settle: fixed 0.3 s vs page-driven, same tasks",
            bench_command("bench.settle_outcomes", ["--tasks", str(tasks), "--contexts",
                                                    str(contexts)]),
            columns, rows,
            "Teacher-forced train tasks through the pipeline (fixed uniform sample, "
            f"{contexts} contexts, no policy latency); step ms = execute + settle + "
            "screenshot + tree + upload."))


if __name__ == "__main__":
    typer.run(main)
