"""A trained version's decision latency on the CPU vLLM, against the base model's.

  .venv/bin/python -m bench.lora_serving [--elements 60] [--inflight 4] [--rounds 3]
      [--max-tokens 32] [--repeat 1] [--markdown docs/benchmarks.md]

Starts the project's CPU vLLM (SmolLM2-135M) twice in the same run: with vLLM's own CPU
LoRA operators (the baseline: our plugin switched off with VLLM_PLUGINS) and with the
CPU LoRA plugin (infra/vllm/cpu_lora, the default). Each server loads a real PEFT adapter
shaped like the trainer's (rank 16 on every linear layer) and answers the same
set-of-marks prompts (--elements marks, of which the page view's budget keeps what fits:
~570 prompt tokens, as the policy sends them) for the base model and for the adapter
(--max-tokens each, about a policy reply), --inflight at a time, --rounds times each. It
prints the p50 decision latency of each, the adapter's p50 over the base model's on the
same server, and the plugin's speed-up of the adapter. Goal: adapter/base <= 1.5 with the
plugin (vLLM's own operators: about 6x on these prompts). With --repeat N each server runs
the models in turn N times (--rounds rounds each); a p50 is the median of the runs' p50s
with [min, max], a ratio the median over its baseline's median.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import typer
from rich.console import Console

from bench.policy_throughput import TASK
from bench.vllm_cpu_fit import wait_healthy
from harness.lora import ALL_LINEAR, adapter_files
from harness.machine import describe_machine
from harness.report import (
    append_markdown,
    bench_command,
    console_table,
    markdown_table,
    ratio_spread,
    repeat_note,
    speedup_spread,
    spread_cell,
)
from infra import vllm_server
from infra.procs import ManagedProcess, free_port
from webgym_common.agent.prompts import EpisodeContext, build_messages
from webgym_common.config import Settings, load_settings
from webgym_common.events import Mark

console = Console(width=160)
ADAPTER = "bench-lora"
WORDS = ["Search", "Phones", "Cobalt", "Pulse", "Atlas", "Lumen", "price", "Brand", "next",
         "cart", "review", "stock", "ships", "in", "days", "rating", "compare", "deal"]


def marks(n: int, seed: int) -> list[Mark]:
    """`n` distinct marks: each request's page differs, so no prefix cache hides the work."""
    return [Mark(index=i + 1, ref=f"e{i + 1}", role="link",
                 name=" ".join(WORDS[(seed * 7 + i * j) % len(WORDS)] for j in range(1, 6))
                 + f" {seed}-{i}", x=10, y=20 * i, width=100, height=18) for i in range(n)]


async def decide(client: httpx.AsyncClient, model: str, elements: int, seed: int,
                 max_tokens: int) -> tuple[float, int]:
    ctx = EpisodeContext(episode_id=f"bench-{seed}", task_id="bench", task_name=TASK)
    started = time.perf_counter()
    reply = await client.post("/v1/chat/completions", json={
        "model": model, "messages": build_messages(ctx, "http://127.0.0.1/shop/",
                                                   marks(elements, seed)),
        "max_tokens": max_tokens, "temperature": 0.0, "ignore_eos": True})
    reply.raise_for_status()
    return time.perf_counter() - started, reply.json()["usage"]["prompt_tokens"]


async def measure(base: Settings, plugin: bool, adapter: Path, elements: int, inflight: int,
                  rounds: int, max_tokens: int, repeat: int = 1
                  ) -> dict[str, tuple[list[list[float]], float]]:
    """Model -> (each run's latencies s, mean prompt tokens) on a server with or without the
    plugin; a run is --rounds rounds of each model, the base model's first, the models in
    turn each run."""
    settings = base.model_copy(update={"vllm": base.vllm.model_copy(
        update={"port": free_port()})})
    proc = ManagedProcess("vllm", Path(tempfile.mkdtemp(prefix="bench-vllm-")))
    venv, model = vllm_server.prepare(settings)
    env = vllm_server.server_env(settings)
    if not plugin:  # vLLM loads only the general plugins VLLM_PLUGINS names
        env["VLLM_PLUGINS"] = "none"
    proc.start(vllm_server.server_command(settings, venv, model), env=env)
    out: dict[str, tuple[list[list[float]], float]] = {}
    tokens: dict[str, list[int]] = {}
    label = "with the plugin" if plugin else "vLLM's operators"
    try:
        with console.status(f"starting vLLM ({label})"):
            await wait_healthy(settings, proc, settings.vllm.start_timeout_s)
        root = f"http://{settings.infra.host}:{settings.vllm.port}"
        key = {"Authorization": f"Bearer {settings.vllm.api_key}"}  # the server requires it
        async with httpx.AsyncClient(base_url=root, timeout=1800, headers=key) as client:
            loaded = await client.post("/v1/load_lora_adapter",
                                       json={"lora_name": ADAPTER, "lora_path": str(adapter)})
            loaded.raise_for_status()
            await decide(client, ADAPTER, 4, 0, 4)  # warm-up
            for run in range(repeat):
                for name in (settings.policy.model, ADAPTER):
                    latencies: list[float] = []
                    for r in range(rounds):
                        with console.status(f"{label}: {name}, run {run + 1}/{repeat}, "
                                            f"round {r + 1}/{rounds}"):
                            seed = 1000 * (run * rounds + r) + (500 if plugin else 0)
                            done = await asyncio.gather(*(
                                decide(client, name, elements, seed + k, max_tokens)
                                for k in range(inflight)))
                        latencies += [s for s, _ in done]
                        tokens.setdefault(name, []).extend(t for _, t in done)
                    out.setdefault(name, ([], 0.0))[0].append(latencies)
        out = {name: (lat, statistics.mean(tokens[name])) for name, (lat, _) in out.items()}
    finally:
        proc.stop(20)
    return out


def rows_of(runs: dict[bool, dict[str, tuple[list[list[float]], float]]], base_model: str
            ) -> list[list[str]]:
    """Per server and model: its runs' p50 (median [min, max]), the adapter's p50 over the
    base model's on the same server, and the plugin's speed-up over vLLM's operators (each
    a median over the baseline's median)."""
    rows = []
    p50s = {plugin: {m: [statistics.median(lat) for lat in runs_]
                     for m, (runs_, _) in models.items()} for plugin, models in runs.items()}
    for plugin in (False, True):
        for name, (_, tokens) in runs[plugin].items():
            mine = p50s[plugin][name]
            over_base = ratio_spread(mine, p50s[plugin][base_model]).cell()
            rows.append(["webgym_cpu_lora" if plugin else "vLLM's", name, f"{tokens:.0f}",
                         spread_cell(mine, ".1f"), over_base if name == ADAPTER else "",
                         speedup_spread(mine, p50s[False][name]).cell() if plugin else "1.00"])
    return rows


def main(elements: int = typer.Option(60, help="Marks a page (the page view keeps what fits)."),
         inflight: int = typer.Option(4, help="Decisions in flight."),
         rounds: int = typer.Option(3, help="Rounds of --inflight decisions per model and run."),
         max_tokens: int = typer.Option(32, help="Tokens each reply generates."),
         repeat: int = typer.Option(1, min=1, help="Runs on each server; each p50 is the "
                                    "median of the runs' p50s, their min and max after it."),
         markdown: Path | None = typer.Option(None, help="Append the table to this file.")
         ) -> None:
    console.print(describe_machine())
    base = load_settings()
    _, model = vllm_server.prepare(base)
    adapter = Path(tempfile.mkdtemp(prefix="bench-lora-"))
    for name, data in adapter_files(model, seed=1, rank=base.trainer.lora_rank,
                                    modules=ALL_LINEAR).items():
        (adapter / name).write_bytes(data)
    runs = {plugin: asyncio.run(measure(base, plugin, adapter, elements, inflight, rounds,
                                          max_tokens, repeat))
            for plugin in (False, True)}
    columns = ["LoRA operators", "model", "prompt tokens", "p50 s", "adapter / base",
               "plugin speed-up"]
    rows = rows_of(runs, base.policy.model)
    console.print(console_table("a trained version's latency on the CPU vLLM", columns, rows))
    repeated = f" {repeat_note(repeat)}" if repeat > 1 else ""
    if repeated:
        console.print(repeated.strip(), markup=False)
    if markdown is not None:
        append_markdown(markdown, markdown_table(
            "A trained version's decision latency on the CPU vLLM",
            bench_command("bench.lora_serving", [
                "--elements", str(elements), "--inflight", str(inflight), "--rounds",
                str(rounds), "--max-tokens", str(max_tokens), "--repeat", str(repeat)]),
            columns, rows,
            f"{inflight} decisions in flight, {rounds} round(s) per model and run, "
            f"{max_tokens} tokens a reply; the adapter is rank "
            f"{base.trainer.lora_rank} on every linear layer, as the trainer adapts them."
            + repeated))


if __name__ == "__main__":
    typer.run(main)
