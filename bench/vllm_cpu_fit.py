"""Does the local vLLM fit this CPU? Thread binding before/after, at 1, 8 and 16 in flight.

  .venv/bin/python bench/vllm_cpu_fit.py [--seconds 40] [--binds auto,all]

Starts the project's CPU vLLM (SmolLM2-135M) once per thread-binding setting
(`vllm.cpu_threads_bind`: "auto" is vLLM's own choice, the baseline; "all" is the
project's default) and sends the policy's real prompt (a shop page's element
list, the structured-output regex of the action grammar) at 1, 8 and 16 requests
in flight for a fixed time each; one more row at 8 in flight without the regex
shows what structured output costs. Prints output tokens/s, requests/s and the
ratio of each setting to the baseline measured in the same run.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import cast

import typer
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletionMessageParam
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.policy_throughput import MARKS, TASK  # noqa: E402
from harness.machine import describe_machine  # noqa: E402
from infra import vllm_server  # noqa: E402
from infra.procs import ManagedProcess, free_port  # noqa: E402
from webgym_common.agent.actions import reply_regex  # noqa: E402
from webgym_common.agent.prompts import EpisodeContext, build_messages  # noqa: E402
from webgym_common.config import Settings, load_settings  # noqa: E402

console = Console()
LEVELS = (1, 8, 16)


def messages() -> list[ChatCompletionMessageParam]:
    ctx = EpisodeContext(episode_id="bench", task_id="bench", task_name=TASK)
    return cast(list[ChatCompletionMessageParam],
                build_messages(ctx, "http://127.0.0.1/shop/", MARKS))


async def wait_healthy(settings: Settings, proc: ManagedProcess, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not await vllm_server.healthy(settings):
        if proc.pid() is None:
            raise SystemExit(f"vLLM exited:\n{proc.log_tail()}")
        if time.monotonic() > deadline:
            raise SystemExit(f"vLLM not healthy in {timeout_s:.0f}s:\n{proc.log_tail()}")
        await asyncio.sleep(1)


async def load(client: AsyncOpenAI, model: str, inflight: int, seconds: float,
               structured: bool) -> tuple[float, float]:
    """(output tokens/s, requests/s) with `inflight` requests always outstanding."""
    extra = {"structured_outputs": {"regex": reply_regex("set_of_marks")}} if structured else {}
    msgs = messages()
    tokens, done = 0, 0
    stop_at = time.monotonic() + seconds

    async def actor() -> None:
        nonlocal tokens, done
        while time.monotonic() < stop_at:
            reply = await client.chat.completions.create(
                model=model, messages=msgs, max_tokens=64, temperature=0.0, extra_body=extra)
            tokens += reply.usage.completion_tokens if reply.usage else 0
            done += 1

    start = time.monotonic()
    await asyncio.gather(*(actor() for _ in range(inflight)))
    elapsed = time.monotonic() - start
    return tokens / elapsed, done / elapsed


async def measure(base: Settings, bind: str, seconds: float) -> dict[str, tuple[float, float]]:
    settings = base.model_copy(update={"vllm": base.vllm.model_copy(
        update={"port": free_port(), "cpu_threads_bind": bind})})
    data_dir = Path(tempfile.mkdtemp(prefix="bench-vllm-"))
    proc = ManagedProcess("vllm", data_dir)
    vllm_server.start(settings, proc)
    results: dict[str, tuple[float, float]] = {}
    try:
        await wait_healthy(settings, proc, settings.vllm.start_timeout_s)
        client = AsyncOpenAI(base_url=f"http://{settings.infra.host}:{settings.vllm.port}/v1",
                             api_key=settings.vllm.api_key, timeout=300)
        await load(client, settings.policy.model, 1, 3, True)  # warm-up
        for level in LEVELS:
            with console.status(f"bind={bind}: {level} in flight for {seconds:.0f}s"):
                results[f"{level}"] = await load(client, settings.policy.model, level, seconds,
                                                 True)
        with console.status(f"bind={bind}: 8 in flight, no structured output"):
            results["8 (no regex)"] = await load(client, settings.policy.model, 8, seconds, False)
    finally:
        proc.stop(20)
    return results


def main(
    seconds: float = typer.Option(40.0, help="Seconds of load per row."),
    binds: str = typer.Option("auto,all", help="Settings to compare; the first is the baseline."),
) -> None:
    console.print(describe_machine())
    base = load_settings()
    vllm_server.prepare(base)
    names = [b.strip() for b in binds.split(",") if b.strip()]
    runs = {b: asyncio.run(measure(base, b, seconds)) for b in names}
    table = Table(title="local vLLM (SmolLM2-135M, CPU): output tok/s (requests/s)")
    table.add_column("in flight")
    for b in names:
        table.add_column(f"bind={b}")
        if b != names[0]:
            table.add_column(f"ratio {b}/{names[0]}")
    for row in runs[names[0]]:
        cells = [row]
        for b in names:
            tok, req = runs[b][row]
            cells.append(f"{tok:.1f} ({req:.2f})")
            if b != names[0]:
                cells.append(f"{tok / max(runs[names[0]][row][0], 1e-9):.2f}")
        table.add_row(*cells)
    console.print(table)


if __name__ == "__main__":
    typer.run(main)
