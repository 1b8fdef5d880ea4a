"""Hot-load latency: ModelVersion published -> ModelServed -> first action under the version.

  .venv/bin/python -m bench.hot_load [--versions 3] [--inflight 2] [--replicas 2]

Starts the embedded stack with vLLM (CPU, SmolLM2-135M) if needed, a real model loader
and a real vLLM policy process on fresh topics. `inflight` hand-fed episodes keep the
policy deciding (each action answered by the next observation at once), as rollouts
would. Each version is a real PEFT LoRA adapter (harness/lora.py) put into MinIO
and published as a ModelVersion; measured per version: the loader's own load time (download,
load_lora_adapter, listed by /v1/models), published -> ModelServed, ModelServed -> the
first ActionChosen carrying "v<N>", and published -> that action (the p50 is the number).
The last includes one decision of the model: the first action counted is one whose
observation was sent after ModelServed was read, so it was decided under the new version.
With `--replicas N`, N-1 more vLLM servers like the stack's start (harness/replicas.py)
and policy.replicas names them all: ModelServed then means every replica serves the version,
and "published -> listed by all" is read from each replica's own /v1/models (polled).
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from harness.launch import PipelineProcess
from harness.lora import adapter_files, digests, upload
from harness.machine import describe_machine
from harness.replicas import Replica, listed
from infra import stack
from infra.vllm_server import model_dir
from webgym_common.config import Settings, get_settings
from webgym_common.events import (
    ActionChosen,
    EpisodeRequested,
    ModelServed,
    ModelVersion,
    StepObserved,
    Task,
    Viewport,
    utc_now,
)
from webgym_common.objectstore import ObjectStore
from webgym_common.stream.admin import create_topics
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.topics import Topic

console = Console()


class Clock:
    """When each ModelServed and the first action of each version were read (perf_counter)."""

    def __init__(self) -> None:
        self.served: dict[int, tuple[float, ModelServed]] = {}
        self.observed: dict[tuple[str, int], float] = {}  # when each observation was sent
        self.first_action: dict[str, float] = {}
        self.actions = 0

    def note_action(self, e: ActionChosen, now: float) -> None:
        """The first action of a version whose observation was sent after the version was
        served: decided under it for certain (one the policy was deciding while it switched
        may carry the new tag until its version is taken when the request is made)."""
        self.actions += 1
        n = int(e.policy_version[1:]) if e.policy_version[1:].isdigit() else 0
        if n and n in self.served and self.observed[(e.episode_id, e.step)] > self.served[n][0]:
            self.first_action.setdefault(e.policy_version, now)


async def feed(producer: EventProducer, reader: EventConsumer, clock: Clock,
               inflight: int) -> None:
    """Episodes that answer every action with the next observation, and the clock's reads.

    Training episodes: a held-out one keeps the version it was requested on."""
    steps: dict[str, int] = {}
    for i in range(inflight):
        eid = f"hot-{i}-{uuid.uuid4().hex[:6]}"
        steps[eid] = 0
        await producer.publish(Topic.EPISODES, eid, EpisodeRequested(
            episode_id=eid, iteration=0, split="train", max_steps=10_000, policy_version="base",
            deadline=utc_now() + timedelta(hours=2),
            task=Task(task_id="bench", task_name="Find the price of the blue lamp.",
                      domain="bench", website="http://127.0.0.1/shop/", difficulty=1)))
        await observe(producer, clock, eid, 0)
    async for r in reader.events(poll_timeout_ms=50):
        now, e = time.perf_counter(), r.event
        if isinstance(e, ModelServed):
            clock.served.setdefault(e.version, (now, e))
        elif isinstance(e, ActionChosen) and steps.get(e.episode_id) == e.step:
            clock.note_action(e, now)
            steps[e.episode_id] += 1
            await observe(producer, clock, e.episode_id, steps[e.episode_id])


async def observe(producer: EventProducer, clock: Clock, eid: str, step: int) -> None:
    clock.observed[(eid, step)] = time.perf_counter()
    await producer.publish(Topic.OBSERVATIONS, eid, StepObserved(
        episode_id=eid, task_id="bench", step=step, url="http://127.0.0.1/shop/",
        viewport=Viewport(width=1280, height=720)))


async def wait_for(check: Callable[[], bool], timeout_s: float, what: str) -> None:
    async with asyncio.timeout(timeout_s):
        while not check():  # noqa: ASYNC110 (polls what the feeder saw)
            await asyncio.sleep(0.05)
    console.log(what)


async def listed_by_all(urls: tuple[str, ...], name: str, key: str) -> float:
    """When (perf_counter) every replica's /v1/models lists `name`, polled every 50 ms."""
    while True:
        if all([name in await listed(url, key) for url in urls]):
            return time.perf_counter()
        await asyncio.sleep(0.05)


async def measure(base: Settings, versions: int, inflight: int, replicas: tuple[str, ...]
                  ) -> list[dict[str, float]]:
    prefix = f"bench{uuid.uuid4().hex[:6]}"
    model = f"webgym-policy-{prefix}"  # a vLLM that outlived other runs knows other -v1s
    settings = base.model_copy(update={
        "kafka": base.kafka.model_copy(update={"topic_prefix": prefix}),
        "trainer": base.trainer.model_copy(update={"model_name": model}),
        "policy": base.policy.model_copy(update={"replicas": replicas}),
    })
    await create_topics(settings)
    store = ObjectStore(settings.s3)
    await store.ensure_bucket()
    logs = Path(tempfile.mkdtemp(prefix="bench-hot-load-"))
    procs = [PipelineProcess(settings, ["worker", "model-loader"], logs / "loader.log"),
             PipelineProcess(settings, ["worker", "policy", "--kind", "vllm"], logs / "policy.log")]
    console.log(f"logs in {logs}")
    rows = []
    try:
        await wait_for(lambda: all(p.is_ready() for p in procs), 180, "loader and policy ready")
        async with EventProducer(settings, client_id="bench") as producer:
            reader = EventConsumer(settings, [Topic.ACTIONS, Topic.MODELS_SERVED], None,
                                   producer, client_id="bench")
            async with reader:
                clock = Clock()
                feeding = asyncio.create_task(feed(producer, reader, clock, inflight))
                await wait_for(lambda: clock.actions >= inflight, 600, "base model deciding")
                for n in range(1, versions + 1):
                    files = adapter_files(model_dir(settings), seed=n)
                    uri = await asyncio.to_thread(upload, store.client, store.bucket,
                                                  f"checkpoints/{model}/run{n}", files)
                    published = time.perf_counter()
                    everywhere = asyncio.create_task(listed_by_all(
                        settings.policy.replica_urls, f"{model}-v{n}", settings.policy.api_key))
                    await producer.publish(Topic.MODELS, model, ModelVersion(
                        model_name=model, version=n, checkpoint_uri=uri, run_id=f"run{n}",
                        base_model=str(model_dir(settings)), parent_version=n - 1,
                        file_sha256=digests(files)))
                    tag = f"v{n}"
                    await wait_for(lambda: tag in clock.first_action, 900,  # noqa: B023
                                   f"{tag}: first action")
                    served_at, served = clock.served[n]
                    first = clock.first_action[f"v{n}"]
                    listed_at = await asyncio.wait_for(everywhere, 60)
                    rows.append({"load": served.load_ms, "served": (served_at - published) * 1e3,
                                 "listed": (listed_at - published) * 1e3,
                                 "to action": (first - served_at) * 1e3,
                                 "total": (first - published) * 1e3})
                feeding.cancel()
    finally:
        for p in procs:
            p.stop()
    return rows


async def with_replicas(settings: Settings, versions: int, inflight: int, replicas: int
                        ) -> list[dict[str, float]]:
    """`measure` with the stack's vLLM and `replicas` - 1 more, started and stopped here."""
    extra = [Replica(settings, f"vllm-bench-replica-{i}") for i in range(1, replicas)]
    try:
        for replica in extra:  # one at a time: two vLLM starts at once starve 2 cores
            await replica.start()
        urls = (settings.policy.base_url, *(r.url for r in extra)) if extra else ()
        return await measure(settings, versions, inflight, urls)
    finally:
        for replica in extra:
            replica.stop()


def main(versions: int = 3, inflight: int = 2,
         replicas: int = typer.Option(1, min=1, help="vLLM servers (1: the stack's alone)."),
         ) -> None:
    console.print(describe_machine())
    settings = get_settings()
    asyncio.run(stack.up(settings, with_vllm=True))
    cfg = settings.policy
    rows = asyncio.run(with_replicas(settings, versions, inflight, replicas))
    table = Table(title=f"hot-load latency, ms (SmolLM2-135M LoRA r=8 on vLLM CPU, "
                        f"{replicas} replica(s), {inflight} episodes deciding, "
                        f"max_tokens {cfg.max_tokens})")
    cols = {"load": "loader: fetch+load+listed", "served": "published -> ModelServed",
            "listed": "published -> listed by all",
            "to action": "ModelServed -> first v<N> action",
            "total": "published -> first v<N> action"}
    table.add_column("version", justify="right")
    for title in cols.values():
        table.add_column(title, justify="right")
    for n, row in enumerate(rows, 1):
        table.add_row(f"v{n}", *(f"{row[c]:.0f}" for c in cols))
    table.add_row("p50", *(f"{statistics.median(r[c] for r in rows):.0f}" for c in cols))
    console.print(table)


if __name__ == "__main__":
    typer.run(main)
