"""Replay benchmark: `webgym reprocess rescore` (rules judge) and `refilter` against a raw consume.

Runs against the embedded stack (started if it is not up) on a fresh topic prefix:
  .venv/bin/python -m bench.replay_rate [--episodes 300] [--steps 8] [--tree-bytes 6000]
Publishes a scored history as the pipeline logs it (each episode's request, observations
with an accessibility tree of --tree-bytes, actions with a stored prompt, completion, and
its score), then times, on the same topic ranges:
- raw consume: the records fetched with aiokafka and not decoded (the floor of any replay);
- rescore: completions, then the parts topics, decoded, each trajectory rebuilt and scored by
  the rules, written to a new topic in transactions (processors.reprocess.rescore);
- refilter: the scored topic decoded, the replay rules, each sample's prompt read from MinIO,
  written to a new topic (processors.reprocess.refilter).
Prints episodes/s and steps/s of each and its ratio to the raw consume (goal >= 0.5).
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import string
import time
import uuid

import typer
from aiokafka import TopicPartition
from rich.console import Console
from rich.table import Table

from bench.machine import describe_machine
from infra import stack
from processors.reprocess.agreement import Provenance
from processors.reprocess.refilter import Filters, refilter
from processors.reprocess.rescore import rescore, score_episode
from producers.drive_reference import episode_request
from webgym_common.agent.actions import format_action, parse_action
from webgym_common.config import Settings, get_settings
from webgym_common.events import (
    ActionChosen,
    EpisodeCompleted,
    EpisodeScored,
    Event,
    StepObserved,
    Task,
    Viewport,
    utc_now,
)
from webgym_common.logrange.bounds import LogRange, spans
from webgym_common.logrange.episodes import EpisodeLog, collect, select
from webgym_common.objectstore import ObjectStore
from webgym_common.stream.admin import create_topics
from webgym_common.stream.bus import EventProducer
from webgym_common.stream.kafka_clients import make_consumer
from webgym_common.topics import Topic, topic_name

console = Console()
RULES = Provenance("rules", "rules-v1", None, None, "bench")


def tree(step: int, size: int) -> str:
    rnd = random.Random(step)
    lines: list[str] = []
    while sum(map(len, lines)) < size:
        name = "".join(rnd.choices(string.ascii_letters + " ", k=rnd.randint(8, 40)))
        lines.append(f'- link "{name}" [ref=e{len(lines)}]')
    return "\n".join(lines)


def episode(n: int, steps: int, tree_bytes: int, prompt_uri: str) -> list[tuple[Topic, Event]]:
    task = Task(task_id=f"bench-{n % 50}", task_name="find the price", domain="bench",
                website="http://shop.test/", difficulty=2, definite_answer="42")
    request = episode_request(task, split="train", iteration=n % 3).model_copy(
        update={"episode_id": f"bench-{n:05d}"})
    eid, answer = request.episode_id, "42" if n % 2 else "41"
    out: list[tuple[Topic, Event]] = [(Topic.EPISODES, request)]
    for step in range(steps + 1):
        out.append((Topic.OBSERVATIONS, StepObserved(
            episode_id=eid, task_id=task.task_id, step=step, url=f"http://shop.test/{step}",
            title="shop", viewport=Viewport(width=1280, height=720),
            screenshot_uri=f"s3://webgym/sha256/{uuid.uuid4().hex}.jpg",
            screenshot_sha256=uuid.uuid4().hex, accessibility_tree=tree(step, tree_bytes))))
        action = parse_action(f"ANSWER [{answer}]" if step == steps else "Click [1]")
        out.append((Topic.ACTIONS, ActionChosen(
            episode_id=eid, step=step, action=action, action_string=format_action(action),
            raw_response=f"Thought: go\nAction: {format_action(action)}", prompt_uri=prompt_uri,
            policy_version="v1")))
    out.append((Topic.EPISODES_COMPLETED, EpisodeCompleted(
        episode_id=eid, task_id=task.task_id, iteration=n % 3, split="train", steps=steps,
        termination="answer", answer=answer, started_at=utc_now())))
    return out


async def publish_history(settings: Settings, episodes: int, steps: int, tree_bytes: int
                          ) -> None:
    store = ObjectStore(settings.s3)
    await store.ensure_bucket()
    prompt = await store.put_blob(json.dumps([{"role": "user", "content": "go"}]).encode(),
                                  "application/json")
    async with EventProducer(settings, client_id="bench") as producer:
        for n in range(episodes):
            events = episode(n, steps, tree_bytes, prompt.uri)
            sent = [await producer.producer.send(producer.topic(t), producer.codec.encode(e),
                                                 key=e.episode_id.encode())  # type: ignore[attr-defined]
                    for t, e in events]
            log = EpisodeLog()
            select(log, events[-1][1], LogRange())
            for _, e in events[:-1]:
                collect(log, e)
            score = await score_episode(log, f"bench-{n:05d}", None, RULES, settings.evaluator)
            assert isinstance(score, EpisodeScored)
            sent.append(await producer.producer.send(
                producer.topic(Topic.EPISODES_SCORED), producer.codec.encode(score),
                key=score.task_id.encode()))
            await asyncio.gather(*sent)


async def raw_consume(settings: Settings, topics: list[Topic]) -> tuple[int, float]:
    """Every record of the topics from their beginnings to their ends, fetched, not decoded."""
    started = time.perf_counter()  # a replay starts its clients too: so does the floor
    consumer = make_consumer(settings, [], None, "bench-raw")
    await consumer.start()
    try:
        names = [topic_name(settings.kafka, t) for t in topics]
        for _ in range(50):  # a fresh client knows no topic until its metadata is updated
            if all(consumer.partitions_for_topic(n) for n in names):
                break
            await consumer._client.force_metadata_update()
            await asyncio.sleep(0.1)
        parts = [TopicPartition(n, p) for n in names
                 for p in sorted(consumer.partitions_for_topic(n) or ())]
        consumer.assign(parts)
        ranges = await spans(consumer, parts, LogRange())
        records = 0
        for tp, (lo, _) in ranges.items():
            consumer.seek(tp, lo)
        while any([await consumer.position(tp) < hi for tp, (_, hi) in ranges.items()]):
            batch = await consumer.getmany(timeout_ms=200)
            records += sum(len(rs) for rs in batch.values())
        return records, time.perf_counter() - started
    finally:
        await consumer.stop()


def main(episodes: int = 300, steps: int = 8, tree_bytes: int = 6000, repeat: int = 3) -> None:
    """Each measure `repeat` times (rescore and refilter into a new topic each time); the
    medians are printed: the machine is shared, single runs vary by 2x."""
    console.print(describe_machine())
    base = get_settings()
    asyncio.run(stack.up(base, only=["kafka", "minio"]))
    settings = base.model_copy(update={"kafka": base.kafka.model_copy(
        update={"topic_prefix": f"breplay{uuid.uuid4().hex[:6]}"})})
    total_steps = episodes * (steps + 1)
    rescore_topics = [Topic.EPISODES_COMPLETED, Topic.EPISODES, Topic.OBSERVATIONS,
                      Topic.ACTIONS, Topic.EPISODES_SCORED]
    times: dict[str, list[float]] = {}
    records: dict[str, int] = {}

    def note(name: str, count: int, seconds: float) -> None:
        times.setdefault(name, []).append(seconds)
        records[name] = count

    async def run() -> None:
        await create_topics(settings)
        started = time.perf_counter()
        await publish_history(settings, episodes, steps, tree_bytes)
        console.print(f"published {episodes} episodes ({total_steps} steps) in "
                      f"{time.perf_counter() - started:.1f} s")
        prefix = settings.kafka.topic_prefix
        for i in range(repeat):
            note("raw consume (rescore's topics)", *await raw_consume(settings, rescore_topics))
            res = await rescore(settings, f"{prefix}.rescored.bench{i}", LogRange(), None,
                                RULES)
            assert res.written == episodes, res
            note("rescore, rules judge", res.records, res.seconds)
            note("raw consume (scored topic)",
                 *await raw_consume(settings, [Topic.EPISODES_SCORED]))
            ref = await refilter(settings, Topic.EPISODES_SCORED, f"{prefix}.replay.bench{i}",
                                 LogRange(), Filters())
            assert ref.episodes == episodes, ref
            note("refilter", ref.records, ref.seconds)
            note("refilter without the samples' prompt reads", ref.records,
                 ref.seconds - ref.sample_seconds)
        console.print(f"refilter wrote {ref.written} samples a run ({ref.written} prompt "
                      "reads from MinIO)")

    asyncio.run(run())
    table = Table(title=f"{episodes} episodes x {steps + 1} steps, {tree_bytes:,} B "
                        f"accessibility trees, median of {repeat}")
    for col in ("replay", "records", "seconds", "episodes/s", "steps/s", "vs raw consume"):
        table.add_column(col, justify="right")
    raw_s = 0.0
    for name, secs_list in times.items():
        secs = statistics.median(secs_list)
        raw_s = secs if name.startswith("raw") else raw_s
        table.add_row(name, f"{records[name]:,}", f"{secs:.2f}", f"{episodes / secs:,.1f}",
                      f"{total_steps / secs:,.0f}", f"{raw_s / secs:.2f}")
    console.print(table)


if __name__ == "__main__":
    typer.run(main)
