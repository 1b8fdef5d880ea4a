"""A trained version's decision latency on the CPU vLLM, against the base model's.

  .venv/bin/python -m bench.lora_serving [--elements 60] [--inflight 4] [--rounds 3]
                                         [--max-tokens 32] [--markdown docs/benchmarks.md]

Starts the project's CPU vLLM (SmolLM2-135M) twice in the same run: with vLLM's own CPU
LoRA operators (the baseline: our plugin switched off with VLLM_PLUGINS) and with the
CPU LoRA plugin (infra/vllm/cpu_lora, the default). Each server loads a real PEFT adapter
shaped like the trainer's (rank 16 on every linear layer) and answers the same
set-of-marks prompts (--elements marks, of which the page view's budget keeps what fits:
~570 prompt tokens, as the policy sends them) for the base model and for the adapter
(--max-tokens each, about a policy reply), --inflight at a time, --rounds times each. It
prints the p50 decision latency of each, the adapter's p50 over the base model's on the
same server, and the plugin's speed-up of the adapter. Goal: adapter/base <= 1.5 with the
plugin (vLLM's own operators: about 6x on these prompts).
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
from harness.report import append_markdown, console_table, markdown_table
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
                  rounds: int, max_tokens: int) -> dict[str, tuple[list[float], float]]:
    """Model -> (latencies s, mean prompt tokens) on a server with or without the plugin."""
    settings = base.model_copy(update={"vllm": base.vllm.model_copy(
        update={"port": free_port()})})
    proc = ManagedProcess("vllm", Path(tempfile.mkdtemp(prefix="bench-vllm-")))
    venv, model = vllm_server.prepare(settings)
    env = vllm_server.server_env(settings)
    if not plugin:  # vLLM loads only the general plugins VLLM_PLUGINS names
        env["VLLM_PLUGINS"] = "none"
    proc.start(vllm_server.server_command(settings, venv, model), env=env)
    out: dict[str, tuple[list[float], float]] = {}
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
            for name in (settings.policy.model, ADAPTER):
                latencies, tokens = [], []
                for r in range(rounds):
                    with console.status(f"{label}: {name}, round {r + 1}/{rounds}"):
                        done = await asyncio.gather(*(
                            decide(client, name, elements, 1000 * r + k + (500 if plugin else 0),
                                   max_tokens) for k in range(inflight)))
                    latencies += [s for s, _ in done]
                    tokens += [t for _, t in done]
                out[name] = (latencies, statistics.mean(tokens))
    finally:
        proc.stop(20)
    return out


def main(elements: int = typer.Option(60, help="Marks a page (the page view keeps what fits)."),
         inflight: int = typer.Option(4, help="Decisions in flight."),
         rounds: int = typer.Option(3, help="Rounds of --inflight decisions per model."),
         max_tokens: int = typer.Option(32, help="Tokens each reply generates."),
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
                                          max_tokens))
            for plugin in (False, True)}
    columns = ["LoRA operators", "model", "prompt tokens", "p50 s", "adapter / base",
               "plugin speed-up"]
    rows = []
    for plugin in (False, True):
        p50 = {m: statistics.median(lat) for m, (lat, _) in runs[plugin].items()}
        for name, (_, tokens) in runs[plugin].items():
            is_adapter = name == ADAPTER
            speedup = statistics.median(runs[False][name][0]) / p50[name]
            rows.append(["webgym_cpu_lora" if plugin else "vLLM's", name, f"{tokens:.0f}",
                         f"{p50[name]:.1f}",
                         f"{p50[ADAPTER] / p50[base.policy.model]:.2f}" if is_adapter else "",
                         f"{speedup:.2f}" if plugin else "1.00"])
    console.print(console_table("a trained version's latency on the CPU vLLM", columns, rows))
    if markdown is not None:
        append_markdown(markdown, markdown_table(
            "A trained version's decision latency on the CPU vLLM",
            f"python -m bench.lora_serving --elements {elements} --inflight {inflight} "
            f"--rounds {rounds} --max-tokens {max_tokens}", columns, rows,
            f"{inflight} decisions in flight, {rounds} rounds per model, {max_tokens} tokens "
            "a reply; the adapter is rank "
            f"{base.trainer.lora_rank} on every linear layer, as the trainer adapts them."))


if __name__ == "__main__":
    typer.run(main)
