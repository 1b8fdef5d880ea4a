"""Replay benchmark: `webgym reprocess rescore` (rules judge) and `refilter` against a raw consume.

Runs against the embedded stack (started if it is not up) on a fresh topic prefix:
  .venv/bin/python -m bench.replay_rate [--episodes 300] [--steps 8] [--tree-bytes 6000]
      [--marks 0] [--distinct-prompts] [--markdown PATH]
Publishes a scored history as the pipeline logs it (each episode's request, observations
with an accessibility tree of --tree-bytes and --marks marks, actions with a stored prompt,
completion, and its score), then times, on the same topic ranges:
- raw consume: the records fetched with aiokafka and not decoded (the floor of any replay;
  its client finds its topics' partitions as the replays' readers do,
  webgym_common.stream.bus.partitions_of);
- rescore: completions, then the parts topics, decoded, each trajectory rebuilt and scored by
  the rules, written to a new topic in transactions (processors.reprocess.rescore);
- refilter: the scored topic decoded, the replay rules, each sample written to a new topic
  with its prompt by reference (processors.reprocess.refilter; the trainer reads the prompts
  of the samples it draws; a prompt not stored under its hash is read from MinIO).
Prints episodes/s and steps/s of each and its ratio to the raw consume (goal >= 0.5).

Every action refers to one and the same prompt blob by default; the policy stores a prompt
per step, each with its page, so --distinct-prompts measures a history as the pipeline
writes it.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import string
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from harness.machine import describe_machine
from harness.report import append_markdown, bench_command, markdown_table
from infra import stack
from processors.reprocess.agreement import Provenance
from processors.reprocess.refilter import Filters, refilter
from processors.reprocess.rescore import rescore, score_episode
from producers.drive_reference import episode_request
from webgym_common.agent.actions import format_action, parse_action
from webgym_common.codec import Codec
from webgym_common.config import Settings, get_settings
from webgym_common.events import (
    ActionChosen,
    EpisodeCompleted,
    EpisodeScored,
    Event,
    Mark,
    StepObserved,
    Task,
    Viewport,
    utc_now,
)
from webgym_common.logrange.bounds import LogRange, spans
from webgym_common.logrange.episodes import EpisodeLog, collect, select
from webgym_common.objectstore import ObjectStore
from webgym_common.stream.admin import create_topics
from webgym_common.stream.bus import EventProducer, partitions_of
from webgym_common.stream.kafka_clients import make_consumer
from webgym_common.topics import Topic, topic_name

console = Console()
COLUMNS = ["replay", "records", "seconds", "episodes/s", "steps/s", "vs raw fetch",
           "vs fetch + decode"]
RULES = Provenance("rules", "rules-v1", None, None, "bench")


def tree(step: int, size: int) -> str:
    rnd = random.Random(step)
    lines: list[str] = []
    while sum(map(len, lines)) < size:
        name = "".join(rnd.choices(string.ascii_letters + " ", k=rnd.randint(8, 40)))
        lines.append(f'- link "{name}" [ref=e{len(lines)}]')
    return "\n".join(lines)


def page_marks(count: int) -> list[Mark]:
    return [Mark(index=i, ref=f"e{i}", role="link", name=f"link number {i}", x=10.0 * i,
                 y=20.0, width=120.0, height=18.0) for i in range(count)]


def episode(n: int, steps: int, tree_bytes: int, prompt_uri: str | list[str],
            mark_count: int = 0) -> list[tuple[Topic, Event]]:
    """`prompt_uri`: one for every action, or one per step."""
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
            screenshot_sha256=uuid.uuid4().hex, accessibility_tree=tree(step, tree_bytes),
            marks=page_marks(mark_count))))
        action = parse_action(f"ANSWER [{answer}]" if step == steps else "Click [1]")
        out.append((Topic.ACTIONS, ActionChosen(
            episode_id=eid, step=step, action=action, action_string=format_action(action),
            raw_response=f"Thought: go\nAction: {format_action(action)}",
            prompt_uri=prompt_uri if isinstance(prompt_uri, str) else prompt_uri[step],
            policy_version="v1")))
    out.append((Topic.EPISODES_COMPLETED, EpisodeCompleted(
        episode_id=eid, task_id=task.task_id, iteration=n % 3, split="train", steps=steps,
        termination="answer", answer=answer, started_at=utc_now())))
    return out


async def prompts(store: ObjectStore, n: int, steps: int, tree_bytes: int) -> list[str]:
    """Episode n's prompts, one a step, each with its page as the policy's are."""
    blobs = [json.dumps([{"role": "user", "content": f"bench-{n:05d} step {step}\n"
                          + tree(n * 100 + step, tree_bytes)}]).encode()
             for step in range(steps + 1)]
    refs = await asyncio.gather(*(store.put_blob(b, "application/json") for b in blobs))
    return [r.uri for r in refs]


async def publish_history(settings: Settings, episodes: int, steps: int, tree_bytes: int,
                          mark_count: int = 0, distinct_prompts: bool = False) -> None:
    store = ObjectStore(settings.s3)
    await store.ensure_bucket()
    shared = await store.put_blob(json.dumps([{"role": "user", "content": "go"}]).encode(),
                                  "application/json")
    async with EventProducer(settings, client_id="bench") as producer:
        for n in range(episodes):
            uris = (await prompts(store, n, steps, tree_bytes) if distinct_prompts
                    else shared.uri)
            events = episode(n, steps, tree_bytes, uris, mark_count)
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


async def raw_consume(settings: Settings, topics: list[Topic],
                      decode: bool = False) -> tuple[int, float]:
    """Every record of the topics from their beginnings to their ends, fetched, not decoded
    (`decode`: and each decoded whole, as a plain replay reader would)."""
    codec = Codec()
    started = time.perf_counter()  # a replay starts its clients too: so does the floor
    consumer = make_consumer(settings, [], None, "bench-raw")
    await consumer.start()
    try:
        # As the replays' readers find their partitions: asking a fresh client's metadata
        # for every topic of the shared broker (and sleeping 0.1 s, as EventConsumer.start
        # does) made this floor slower than a replay's own reads.
        parts = await partitions_of(consumer, [topic_name(settings.kafka, t) for t in topics])
        consumer.assign(parts)
        ranges = await spans(consumer, parts, LogRange())
        records = 0
        for tp, (lo, _) in ranges.items():
            if await consumer.position(tp) != lo:  # as read_spans: keep what is prefetched
                consumer.seek(tp, lo)
        while any([await consumer.position(tp) < hi for tp, (_, hi) in ranges.items()]):
            batch = await consumer.getmany(timeout_ms=200)
            records += sum(len(rs) for rs in batch.values())
            if decode:
                for rs in batch.values():
                    for r in rs:
                        codec.decode(r.value)
        return records, time.perf_counter() - started
    finally:
        await consumer.stop()


def main(episodes: int = 300, steps: int = 8, tree_bytes: int = 6000, repeat: int = 3,
         marks: int = 0, distinct_prompts: bool = False, markdown: Path | None = None) -> None:
    """Each measure `repeat` times (rescore and refilter into a new topic each time); the
    medians are printed: the machine is shared, single runs vary by 2x. `marks`: marks on
    each observation (tens on a real page); `distinct_prompts`: a prompt per step, as the
    policy stores them (else one for all); `markdown`: append the table to this file."""
    if not console.is_terminal:
        console.width = max(console.width, 150)  # one line per row in a log
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
    notes: list[str] = []

    def note(name: str, count: int, seconds: float) -> None:
        times.setdefault(name, []).append(seconds)
        records[name] = count

    async def run() -> None:
        await create_topics(settings)
        started = time.perf_counter()
        await publish_history(settings, episodes, steps, tree_bytes, marks, distinct_prompts)
        console.print(f"published {episodes} episodes ({total_steps} steps) in "
                      f"{time.perf_counter() - started:.1f} s")
        prefix = settings.kafka.topic_prefix
        for i in range(repeat):
            note("raw consume (rescore's topics)", *await raw_consume(settings, rescore_topics))
            note("raw consume + decode (rescore's topics)",
                 *await raw_consume(settings, rescore_topics, decode=True))
            res = await rescore(settings, f"{prefix}.rescored.bench{i}", LogRange(), None,
                                RULES)
            assert res.written == episodes, res
            note("rescore, rules judge", res.records, res.seconds)
            note("raw consume (scored topic)",
                 *await raw_consume(settings, [Topic.EPISODES_SCORED]))
            note("raw consume + decode (scored topic)",
                 *await raw_consume(settings, [Topic.EPISODES_SCORED], decode=True))
            ref = await refilter(settings, Topic.EPISODES_SCORED, f"{prefix}.replay.bench{i}",
                                 LogRange(), Filters())
            assert ref.episodes == episodes, ref
            note("refilter", ref.records, ref.seconds)
            note("refilter without building and writing its samples", ref.records,
                 ref.seconds - ref.sample_seconds)
        notes.append(f"refilter wrote {ref.written} samples a run ({ref.by_reference} with "
                     f"their prompt by reference, {ref.prompt_reads} prompt reads from MinIO)")

    asyncio.run(run())
    prompts_are = "a prompt per step" if distinct_prompts else "one prompt for all steps"
    title = (f"replay rate: {episodes} episodes x {steps + 1} steps, {tree_bytes:,} B "
             f"accessibility trees, {marks} marks, {prompts_are}, median of {repeat}")
    rows: list[list[str]] = []
    raw_s = decoded_s = 0.0
    for name, secs_list in times.items():
        secs = statistics.median(secs_list)
        if name.startswith("raw consume ("):
            raw_s = secs
        elif name.startswith("raw consume + decode"):
            decoded_s = secs
        rows.append([name, f"{records[name]:,}", f"{secs:.3f}", f"{episodes / secs:,.1f}",
                     f"{total_steps / secs:,.0f}", f"{raw_s / secs:.2f}",
                     f"{decoded_s / secs:.2f}" if not name.startswith("raw consume (")
                     else ""])
    table = Table(title=title)
    for col in COLUMNS:
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(*r)
    for line in notes:
        console.print(line)
    console.print(table)
    if markdown is not None:
        command = bench_command("bench.replay_rate", sys.argv[1:])
        append_markdown(markdown, markdown_table(title, command, COLUMNS, rows,
                                                 "\n".join(f"- {n}" for n in notes),
                                                 when=datetime.now(UTC)))
        console.print(f"appended to {markdown}")


if __name__ == "__main__":
    typer.run(main)
