"""Decision latency of the local vLLM, with and without prefix caching, at 1, 8 and 16 in flight.

  .venv/bin/python -m bench.decision_latency [--seconds 20] [--repeat 1]
      [--markdown docs/benchmarks.md]

Starts the project's CPU vLLM (SmolLM2-135M) twice in the same run: without prefix caching
(the baseline) and with it (`vllm.prefix_caching`, the default). Each actor plays episodes of
--steps steps the way the policy does: the real set-of-marks prompt (one system prompt for
every episode; a step repeats its task and the history of the steps before it) with the
action grammar's structured output, at the policy's max_tokens. For each level it prints
the decision latency p50/p99, decisions/s, prompt tokens per decision and the share of
prompt tokens vLLM found in its prefix cache (from its /metrics), and the p50 ratio of
caching on to off. With --repeat N each level runs N times on each server (the levels in
turn each round) and each figure is the median of its runs with [min, max]; the ratio is
the median p50 with caching over the median p50 without.
"""

from __future__ import annotations

import asyncio
import re
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import httpx
import typer
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam
from rich.console import Console

from bench.policy_throughput import MARKS, TASK, pct
from bench.vllm_cpu_fit import wait_healthy
from harness.machine import describe_machine
from harness.report import (
    append_markdown,
    bench_command,
    console_table,
    markdown_table,
    ratio_spread,
    repeat_note,
    spread_cell,
)
from infra import vllm_server
from infra.procs import ManagedProcess, free_port
from webgym_common.agent.actions import reply_regex
from webgym_common.agent.prompts import EpisodeContext, StepRecord, build_messages
from webgym_common.config import Settings, load_settings

console = Console(width=160)
LEVELS = (1, 8, 16)
ACTIONS = ["Click [2]", "Type [1] [cobalt pulse]", "Click [8]", "Scroll [down]", "Click [13]"]


@dataclass
class Level:
    latencies_ms: list[float]
    decisions_per_s: float
    prompt_tokens: float
    cache_hit_share: float | None


def step_messages(episode: int, step: int) -> list[dict]:
    """The policy's prompt at `step` of an episode: the steps before it in its history."""
    history = [StepRecord(k, f"step {k} of the search", ACTIONS[k % len(ACTIONS)])
               for k in range(step)]
    ctx = EpisodeContext(episode_id=f"bench-{episode}", task_id="bench", task_name=TASK,
                         history=history)
    return build_messages(ctx, "http://127.0.0.1/shop/", MARKS)


async def prefix_counters(base_url: str) -> tuple[float, float] | None:
    """(prefix cache queries, hits) in tokens, from vLLM's Prometheus metrics."""
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            text = (await client.get(f"{base_url}/metrics")).text
    except httpx.HTTPError:
        return None

    def total(name: str) -> float | None:
        found = re.findall(rf"^vllm:{name}(?:_total)?(?:{{[^}}]*}})? ([0-9.e+]+)$", text, re.M)
        return sum(float(v) for v in found) if found else None

    queries, hits = total("prefix_cache_queries"), total("prefix_cache_hits")
    return None if queries is None or hits is None else (queries, hits)


async def load(client: AsyncOpenAI, settings: Settings, inflight: int, seconds: float,
               steps: int) -> tuple[list[float], float, float]:
    """(latencies ms, decisions/s, mean prompt tokens) with `inflight` actors for `seconds`."""
    latencies: list[float] = []
    prompt_tokens: list[int] = []
    stop_at = time.monotonic() + seconds
    regex = reply_regex("set_of_marks")
    episodes = iter(range(10**9))

    async def actor() -> None:
        while time.monotonic() < stop_at:
            episode = next(episodes)
            for step in range(steps):
                started = time.perf_counter()
                reply = await client.chat.completions.create(
                    model=settings.policy.model,
                    messages=cast(list[ChatCompletionMessageParam], step_messages(episode, step)),
                    max_tokens=settings.policy.max_tokens, temperature=0.0,
                    extra_body={"structured_outputs": {"regex": regex}})
                latencies.append((time.perf_counter() - started) * 1000)
                prompt_tokens.append(reply.usage.prompt_tokens if reply.usage else 0)
                if time.monotonic() >= stop_at:
                    return

    started = time.monotonic()
    await asyncio.gather(*(actor() for _ in range(inflight)))
    return latencies, len(latencies) / (time.monotonic() - started), statistics.mean(
        prompt_tokens)


async def measure(base: Settings, caching: bool, seconds: float, steps: int, repeat: int = 1
                  ) -> dict[int, list[Level]]:
    """Each level's `repeat` runs on one server (started and warmed up once), the levels
    taken in turn in each round."""
    settings = base.model_copy(update={"vllm": base.vllm.model_copy(
        update={"port": free_port(), "prefix_caching": caching})})
    proc = ManagedProcess("vllm", Path(tempfile.mkdtemp(prefix="bench-vllm-")))
    vllm_server.start(settings, proc)
    root = f"http://{settings.infra.host}:{settings.vllm.port}"
    out: dict[int, list[Level]] = {}
    try:
        with console.status(f"starting vLLM (prefix caching {'on' if caching else 'off'})"):
            await wait_healthy(settings, proc, settings.vllm.start_timeout_s)
        client = AsyncOpenAI(base_url=f"{root}/v1", api_key=settings.vllm.api_key,
                             timeout=300)
        await load(client, settings, 1, 3, 2)  # warm-up: the grammar compiles once
        for run in range(repeat):
            for level in LEVELS:
                before = await prefix_counters(root)
                with console.status(f"prefix caching {'on' if caching else 'off'}: {level} "
                                    f"in flight for {seconds:.0f} s, run {run + 1}/{repeat}"):
                    latencies, rate, tokens = await load(client, settings, level, seconds,
                                                         steps)
                after = await prefix_counters(root)
                share = None
                if before and after and after[0] > before[0]:
                    share = (after[1] - before[1]) / (after[0] - before[0])
                out.setdefault(level, []).append(Level(latencies, rate, tokens, share))
    finally:
        proc.stop(20)
    return out


def level_row(level: int, caching: bool, runs: list[Level], baseline: list[Level]
              ) -> list[str]:
    """A level's row: each figure the median of its runs [min, max]; p50 on/off the
    median of the runs' p50s over the median of the baseline's (caching off) p50s."""
    p50s = [statistics.median(r.latencies_ms) for r in runs]
    shares = [r.cache_hit_share for r in runs if r.cache_hit_share is not None]
    ratio = ratio_spread(p50s, [statistics.median(r.latencies_ms) for r in baseline])
    return [str(level), "on" if caching else "off", spread_cell(p50s, ".0f"),
            spread_cell((pct(r.latencies_ms, 0.99) for r in runs), ".0f"),
            spread_cell((r.decisions_per_s for r in runs), ".2f"),
            f"{statistics.median(r.prompt_tokens for r in runs):.0f}",
            spread_cell(shares, ".0%") if shares else "n/a",
            ratio.cell() if caching else "1.00"]


def main(seconds: float = typer.Option(20.0, help="Seconds of load per level."),
         steps: int = typer.Option(4, help="Steps per episode (the history grows each step)."),
         repeat: int = typer.Option(1, min=1, help="Runs of each level on each server; each "
                                    "figure is the median, its min and max after it."),
         markdown: Path | None = typer.Option(None, help="Append the table to this file.")
         ) -> None:
    if repeat > 1:
        console.width = 200  # a row a line with the ranges
    console.print(describe_machine())
    base = load_settings()
    vllm_server.prepare(base)
    runs = {caching: asyncio.run(measure(base, caching, seconds, steps, repeat))
            for caching in (False, True)}
    columns = ["in flight", "prefix caching", "p50 ms", "p99 ms", "decisions/s",
               "prompt tokens", "cached share", "p50 on/off"]
    rows = [level_row(level, caching, runs[caching][level], runs[False][level])
            for level in LEVELS for caching in (False, True)]
    console.print(console_table("decision latency, SmolLM2-135M on the local CPU vLLM",
                                columns, rows))
    repeated = f" {repeat_note(repeat)}" if repeat > 1 else ""
    if repeated:
        console.print(repeated.strip(), markup=False)
    if markdown is not None:
        append_markdown(markdown, markdown_table(
            "Decision latency on the local vLLM, prefix caching off and on",
            bench_command("bench.decision_latency", ["--seconds", f"{seconds:g}", "--steps",
                                                     str(steps), "--repeat", str(repeat)]),
            columns, rows,
            "The policy's set-of-marks prompt with structured output, episodes of "
            f"{steps} steps; cached share = prompt tokens vLLM served from its prefix cache; "
            "a run is --seconds of load at one level, the levels in turn on each server."
            + repeated))


if __name__ == "__main__":
    typer.run(main)
