"""The replay processor against the real broker and MinIO: scored episodes in, the exact
training samples out; poison and missing prompts dead-lettered; SIGKILL mid-stream loses no
sample and never publishes one under another id."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from aiokafka import TopicPartition

from harness.launch import PipelineProcess
from processors.policy.policies import prompt_blob
from processors.replay_buffer.app import replay_scored_episodes
from tests.factories import sample_event
from tests.support.catalog import made_task, publish_tasks, publish_train_tasks
from webgym_common.agent.prompts import EpisodeContext, StepRecord, build_messages
from webgym_common.config import ReplaySettings, Settings
from webgym_common.events import (
    ChatMessage,
    DeadLetter,
    EpisodeScored,
    Mark,
    ReplaySample,
    TrajectoryStep,
)
from webgym_common.objectstore import ObjectStore
from webgym_common.stream.bus import EventConsumer, EventProducer, Received
from webgym_common.stream.kafka_clients import make_consumer
from webgym_common.stream.readers import read_to_end
from webgym_common.topics import Group, Topic, group_id, topic_name, topic_specs

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

MARKS = [Mark(index=1, ref="e1", role="button", name="Buy", x=0, y=0, width=9, height=9)]
DATA_URL = "data:image/jpeg;base64,/9j/4AAQSkZJRgABAQ=="


def prompt_for(task: str, step: int, image: str | None = None) -> list[dict[str, Any]]:
    """What the policy stores for a step: the real prompt builder's messages."""
    ctx = EpisodeContext(episode_id="x", task_id="t", task_name=task,
                         mode="coordinates" if image else "set_of_marks")
    ctx.history = [StepRecord(i, f"thought {i}", "Click [1]", "clicked") for i in range(step)]
    return build_messages(ctx, f"http://shop/{step}", MARKS, image, 3000)


async def put_prompt(store: ObjectStore, messages: list[dict[str, Any]]) -> str:
    return (await store.put_blob(prompt_blob(messages), "application/json")).uri


def step(i: int, sha: str, prompt_uri: str | None, reply: str | None = None) -> TrajectoryStep:
    return TrajectoryStep(step=i, url=f"http://shop/{i}", screenshot_uri=f"s3://webgym/shot-{sha}",
                          screenshot_sha256=sha, action_string="Click [1]",
                          raw_response=reply or f"Thought: t{i}\nAction: Click [1]",
                          prompt_uri=prompt_uri, policy_version="base")


def episode(episode_id: str, steps: list[TrajectoryStep], reward: float = 1.0,
            task_id: str = "task-a", iteration: int = 2) -> EpisodeScored:
    return sample_event("EpisodeScored").model_copy(update={
        "episode_id": episode_id, "task_id": task_id, "iteration": iteration, "split": "train",
        "reward": reward, "crashed": False, "is_blocked": False, "steps": len(steps),
        "evaluation": "judged", "trajectory": steps, "policy_version": "base"})


async def publish_scored(producer: EventProducer, *events: EpisodeScored) -> None:
    for e in events:  # keyed by task, as the evaluator publishes them
        await producer.publish(Topic.EPISODES_SCORED, e.task_id, e)


async def eventually(fetch: Callable[[], Awaitable[Any]], ok: Callable[[Any], bool],
                     what: str, timeout_s: float = 90) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not ok(value := await fetch()):
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what}: still {value!r}")
        await asyncio.sleep(0.5)
    return value


async def ends(settings: Settings, topic: Topic, group: str | None = None) -> tuple[int, int]:
    """(records on `topic`, offsets `group` has committed on it), summed over partitions."""
    consumer = make_consumer(settings, [], group, client_id="count")
    await consumer.start()
    try:
        spec = topic_specs(settings.kafka)[topic]
        parts = [TopicPartition(spec.name, p) for p in range(spec.partitions)]
        consumer.assign(parts)
        end = await asyncio.wait_for(consumer.end_offsets(parts), 30)
        committed = [await consumer.committed(tp) or 0 for tp in parts] if group else [0]
        return sum(end.values()), sum(committed)
    finally:
        await consumer.stop()


async def caught_up(settings: Settings) -> bool:
    total, committed = await ends(settings, Topic.EPISODES_SCORED,
                                  group_id(settings.kafka, Group.REPLAY))
    return total > 0 and committed >= total


async def rewind(settings: Settings) -> None:
    """Commit offset 0 on every scored partition, as if nothing had ever been committed."""
    consumer = make_consumer(settings, [], group_id(settings.kafka, Group.REPLAY), "rewind")
    await consumer.start()
    try:
        spec = topic_specs(settings.kafka)[Topic.EPISODES_SCORED]
        parts = [TopicPartition(spec.name, p) for p in range(spec.partitions)]
        consumer.assign(parts)
        await asyncio.wait_for(consumer.commit({tp: 0 for tp in parts}), 30)
    finally:
        await consumer.stop()


async def read_all(settings: Settings, producer: EventProducer, topic: Topic) -> list[Received]:
    async with EventConsumer(settings, [topic], None, producer, client_id="reader") as c:
        return await read_to_end(c)


@contextlib.asynccontextmanager
async def replay_running(settings: Settings):  # type: ignore[no-untyped-def]
    task = asyncio.create_task(replay_scored_episodes(settings))
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_scored_episodes_become_exactly_their_training_samples(
    settings: Settings, producer: EventProducer
) -> None:
    store = ObjectStore(settings.s3)
    text = [prompt_for("buy the lamp", i) for i in range(3)]
    vision = prompt_for("buy the lamp", 1, image=DATA_URL)
    uris = [await put_prompt(store, m) for m in (text[0], vision, text[2])]
    ok = episode("ok", [step(0, "a", uris[0]), step(1, "b", uris[1]),
                        step(2, "c", uris[2], "Thought: done\nAction: ANSWER [lamp]")])
    same = episode("same", [step(0, "a", uris[0]), step(1, "a", uris[0]), step(2, "b", uris[2])])
    failed = episode("failed", [step(0, "a", uris[0]), step(1, "b", uris[2])], reward=0.0)
    missing = episode("missing", [step(0, "a", "s3://webgym/sha256/00/gone.json"),
                                  step(1, "b", uris[2])], task_id="task-b")
    after = episode("after", [step(0, "a", uris[0])], task_id="task-c")
    await publish_train_tasks(producer, ["task-a", "task-b", "task-c"])
    await publish_scored(producer, ok, same, failed, missing)
    # poison on the partition of the episode after it
    await producer.publish_raw(topic_name(settings.kafka, Topic.EPISODES_SCORED),
                               b"task-c", b"\x00not avro")
    await publish_scored(producer, after)

    async with replay_running(settings):
        await eventually(lambda: caught_up(settings), bool, "replay caught up")
    samples = {r.key: r.event for r in await read_all(settings, producer, Topic.REPLAY)}
    assert sorted(samples) == ["after:0", "missing:1", "ok:0", "ok:1", "ok:2", "same:1",
                               "same:2"]
    for key, s in samples.items():
        assert isinstance(s, ReplaySample) and s.sample_id == key
        assert (s.reward, s.iteration, s.success, s.split, s.policy_version) == (
            1.0, 2, True, "train", "base")

    def expected(messages: list[dict[str, Any]], images: list[str]) -> list[ChatMessage]:
        system, user = messages
        text = user["content"] if isinstance(user["content"], str) else user["content"][0]["text"]
        return [ChatMessage(role="system", content=system["content"]),
                ChatMessage(role="user", content=text, images=images)]

    got = {k: samples[k] for k in ("ok:0", "ok:1", "ok:2")}
    assert got["ok:0"].messages == expected(text[0], [])
    # the inline screenshot became the step's screenshot reference: no bytes in the sample
    assert got["ok:1"].messages == expected(vision, ["s3://webgym/shot-b"])
    assert "Step 0:\nThought: thought 0" in got["ok:1"].messages[1].content
    assert got["ok:2"].response == "Thought: done\nAction: ANSWER [lamp]"
    assert [got[k].step for k in got] == [0, 1, 2] and got["ok:1"].episode_id == "ok"

    letters = [r.event for r in await read_all(settings, producer, Topic.DLQ)]
    assert all(isinstance(d, DeadLetter) for d in letters) and len(letters) == 2
    by_key = {d.source_key: d for d in letters}  # type: ignore[union-attr]
    assert by_key[b"task-c"].raw_value == b"\x00not avro"
    assert by_key[b"task-b"].error == (
        "step 0: prompt s3://webgym/sha256/00/gone.json is missing (NoSuchKey)")


async def test_an_episode_of_a_task_the_leak_guard_refuses_never_becomes_a_sample(
    settings: Settings, producer: EventProducer
) -> None:
    # labelled train and successful, but: a held-out task itself, a train task with a held-out
    # task's solution, a task loaded after the replay processor started, and one never loaded
    store = ObjectStore(settings.s3)
    uri = await put_prompt(store, prompt_for("find the lamp", 0))
    await publish_tasks(producer, [made_task("held", "test", answer="lamp"),
                                   made_task("twin", "train", answer="lamp"),
                                   made_task("fine", "train", answer="chair")])
    steps = [step(0, "a", uri), step(1, "b", uri)]
    await publish_scored(producer, episode("e-held", steps, task_id="held"),
                         episode("e-twin", steps, task_id="twin"),
                         episode("e-fine", steps, task_id="fine"),
                         episode("e-nobody", steps, task_id="nobody"))
    async with replay_running(settings):
        await eventually(lambda: caught_up(settings), bool, "replay caught up")
        await publish_tasks(producer, [made_task("late", "train")])
        await publish_scored(producer, episode("e-late", steps, task_id="late"))
        await eventually(lambda: caught_up(settings), bool, "replay caught up again")
    samples = [r.event for r in await read_all(settings, producer, Topic.REPLAY)]
    assert sorted(s.sample_id for s in samples) == [  # type: ignore[union-attr]
        "e-fine:0", "e-fine:1", "e-late:0", "e-late:1"]
    assert not await read_all(settings, producer, Topic.DLQ)  # sound events: no dead letters


async def test_with_include_failures_a_failure_becomes_labelled_samples(
    settings: Settings, producer: EventProducer
) -> None:
    settings = settings.model_copy(update={"replay": ReplaySettings(include_failures=True)})
    store = ObjectStore(settings.s3)
    uri = await put_prompt(store, prompt_for("find the lamp", 0))
    await publish_train_tasks(producer, ["task-a"])
    await publish_scored(producer, episode("f", [step(0, "a", uri), step(1, "b", uri)],
                                           reward=0.0))
    async with replay_running(settings):
        await eventually(lambda: caught_up(settings), bool, "replay caught up")
    samples = [r.event for r in await read_all(settings, producer, Topic.REPLAY)]
    assert sorted((s.sample_id, s.success, s.reward) for s in samples  # type: ignore[union-attr]
                  ) == [("f:0", False, 0.0), ("f:1", False, 0.0)]


async def test_a_replay_processor_killed_mid_stream_loses_no_sample_and_renames_none(
    settings: Settings, producer: EventProducer, tmp_path: Path
) -> None:
    store = ObjectStore(settings.s3)
    episodes = []
    for n in range(40):
        uris = [await put_prompt(store, prompt_for(f"task {n}", i)) for i in range(3)]
        episodes.append(episode(f"ep{n:02d}", [step(i, f"{n}-{i}", uris[i]) for i in range(3)],
                                task_id=f"task-{n % 7}"))
    expected = {f"ep{n:02d}:{i}" for n in range(40) for i in range(3)}
    await publish_train_tasks(producer, [f"task-{k}" for k in range(7)])

    first = PipelineProcess(settings, ["worker", "replay"], tmp_path / "replay1.log")
    await eventually(lambda: asyncio.to_thread(first.is_ready), bool, "first replay ready")

    async def feed() -> None:
        for e in episodes:  # a steady stream, so the kill lands in the middle of it
            await publish_scored(producer, e)
            await asyncio.sleep(0.1)

    feeding = asyncio.create_task(feed())
    try:
        await eventually(lambda: ends(settings, Topic.REPLAY), lambda c: c[0] >= 30,
                         "samples before the kill", timeout_s=60)
    finally:
        first.kill()
    published_before_kill = (await ends(settings, Topic.REPLAY))[0]
    await feeding
    second = PipelineProcess(settings, ["worker", "replay"], tmp_path / "replay2.log")
    try:
        await eventually(lambda: caught_up(settings), bool, "replay caught up after restart",
                         timeout_s=120)
    finally:
        second.stop()
    records = await read_all(settings, producer, Topic.REPLAY)
    ids = Counter(r.key for r in records)
    assert set(ids) == expected, second.log_text()  # none missing, none under another id
    for r in records:
        s = r.event
        assert isinstance(s, ReplaySample) and s.sample_id == r.key
    republished = sum(ids.values()) - len(ids)
    print(f"\nkill after {published_before_kill} of {len(expected)} samples; "
          f"{republished} re-published under their own id (readers dedupe)")

    # The widest window a crash can leave: everything published, nothing committed.
    await rewind(settings)
    third = PipelineProcess(settings, ["worker", "replay"], tmp_path / "replay3.log")
    try:
        await eventually(lambda: caught_up(settings), bool, "replay caught up after rewind",
                         timeout_s=120)
    finally:
        third.stop()
    again = Counter(r.key for r in await read_all(settings, producer, Topic.REPLAY))
    assert set(again) == expected, third.log_text()  # the same ids, nothing new
    assert sum(again.values()) == sum(ids.values()) + len(expected)
