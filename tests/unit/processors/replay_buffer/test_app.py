"""The replay loop: publish, then commit; redeliveries skipped in a run; a missing prompt
dead-lettered while the other steps go out; MinIO and Kafka failures tried again."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from aiokafka import TopicPartition
from aiokafka.errors import KafkaConnectionError
from minio.error import S3Error

from processors.replay_buffer.app import REMEMBERED, Replayer, transient
from tests.factories import sample_event
from tests.unit.scored import scored
from webgym_common.codec import Codec
from webgym_common.config import ReplaySettings
from webgym_common.events import (
    DeadLetter,
    EpisodeScored,
    Event,
    ReplaySample,
    Task,
    TrajectoryStep,
)
from webgym_common.leaks import LeakGuard
from webgym_common.objectstore import BlobMismatch, ObjectStoreError
from webgym_common.stream import handlers
from webgym_common.stream.bus import EventProducer, Received
from webgym_common.stream.handlers import Memory, handle_each
from webgym_common.topics import Topic

TP = TopicPartition("t.episodes.scored", 0)
PROMPT = json.dumps([{"role": "user", "content": "Task: x"}]).encode()


def s3_error(code: str) -> S3Error:
    return S3Error(None, code, "msg", "res", "req", "host")  # type: ignore[arg-type]


def episode(episode_id: str, steps: int = 2, reward: float = 1.0) -> EpisodeScored:
    trajectory = [TrajectoryStep(step=i, url="http://s/", screenshot_sha256=f"{i}",
                                 raw_response=f"reply {i}", prompt_uri=f"s3://b/{episode_id}-{i}")
                  for i in range(steps)]
    return scored(episode_id, reward=reward).model_copy(update={"trajectory": trajectory})


class FakeConsumer:
    def __init__(self, events: list[Event], log: list[str], producer: FakeProducer) -> None:
        self.received = [Received(TP.topic, TP.partition, i, "task", e, 0)
                         for i, e in enumerate(events)]
        self.log, self.producer = log, producer
        self.consumer = self  # for `consumer.consumer.assignment()`

    def assignment(self) -> set[TopicPartition]:
        return {TP}

    async def events(self) -> AsyncIterator[Received]:
        for r in self.received:
            yield r

    async def commit(self, received: Received) -> None:
        self.log.append(f"commit {received.offset}")

    async def refuse(self, received: Received, error: str) -> None:
        await self.producer.refuse(received, error, "g")


class FakeProducer:
    """Fails its first `fail` publishes as a broker that is down would."""

    def __init__(self, log: list[str], fail: int = 0) -> None:
        self.codec, self.log, self.fail = Codec(), log, fail
        self.events: list[tuple[Topic, str, Event]] = []

    async def publish(self, topic: Topic, key: str, event: Event) -> None:
        if self.fail:
            self.fail -= 1
            raise KafkaConnectionError("broker down")
        self.events.append((topic, key, event))
        self.log.append(f"{topic.value} {key}")

    # The real producer's dead-letter path, over the fake publish above.
    refuse = EventProducer.refuse
    dead_letter = EventProducer.dead_letter


class FakeStore:
    """Prompts by URI; a URI listed in `down` fails that many times first (MinIO down)."""

    def __init__(self, blobs: dict[str, bytes], down: dict[str, int] | None = None,
                 altered: tuple[str, ...] = ()) -> None:
        self.blobs, self.down, self.gets = blobs, dict(down or {}), 0
        self.altered = altered  # URIs whose bytes no longer hash to their key

    async def get_blob(self, uri: str) -> bytes:
        self.gets += 1
        if uri in self.altered:
            raise BlobMismatch(f"{uri}: content hash 00 does not match its key")
        if self.down.get(uri):
            self.down[uri] -= 1
            raise ObjectStoreError("object store did not answer in time")
        if uri not in self.blobs:
            raise s3_error("NoSuchKey")
        return self.blobs[uri]


def task(task_id: str, split: str, answer: str = "x") -> Task:
    return Task.model_validate({
        **sample_event("Task").model_dump(), "task_id": task_id, "split": split,
        "environment": None, "extra_json": None,
        "reference_actions": [{"action": "ANSWER", "text": answer}]})


class FixedCatalog:
    """task-1 may train; held-1 is held out; twin-1 is a train task with held-1's solution."""

    def __init__(self) -> None:
        self.guard = LeakGuard.of([task("task-1", "train"), task("held-1", "test", "secret"),
                                   task("twin-1", "train", "secret")])

    async def guard_for(self, task_id: str) -> LeakGuard:
        return self.guard


def run(events: list[Event], store: FakeStore, fail_publishes: int = 0,
        cfg: ReplaySettings | None = None) -> tuple[list[str], FakeProducer]:
    log: list[str] = []
    producer = FakeProducer(log, fail_publishes)
    replayer = Replayer(cfg or ReplaySettings(), store, FixedCatalog())
    asyncio.run(handle_each(FakeConsumer(events, log, producer), producer,  # type: ignore[arg-type]
                            EpisodeScored, lambda s: s.episode_id, replayer.replay,
                            Memory(bound=REMEMBERED), 1.0))
    return log, producer


def prompts(*episode_ids: str, steps: int = 2) -> dict[str, bytes]:
    return {f"s3://b/{e}-{i}": PROMPT for e in episode_ids for i in range(steps)}


def test_samples_are_published_before_their_episode_is_committed_and_redeliveries_skipped(
) -> None:
    e1, e2 = episode("e1"), episode("e2")
    failed = episode("f", reward=0.0)
    store = FakeStore(prompts("e1", "e2"))
    log, producer = run([e1, failed, e1, e2], store)
    assert log == ["replay e1:0", "replay e1:1", "commit 0", "commit 1", "commit 2",
                   "replay e2:0", "replay e2:1", "commit 3"]
    assert store.gets == 4  # the redelivered e1 was not fetched again
    sample = producer.events[0][2]
    assert isinstance(sample, ReplaySample) and sample.messages[0].content == "Task: x"


def test_an_episode_whose_task_may_not_train_gives_no_samples_and_is_committed() -> None:
    twin = episode("twin").model_copy(update={"task_id": "twin-1"})  # a held-out solution
    unknown = episode("unknown").model_copy(update={"task_id": "nobody-knows"})
    ok = episode("ok")
    log, producer = run([twin, unknown, ok], FakeStore(prompts("twin", "unknown", "ok")))
    assert log == ["commit 0", "commit 1", "replay ok:0", "replay ok:1", "commit 2"]
    assert {e.episode_id for _, _, e in producer.events} == {"ok"}


def test_a_missing_prompt_is_dead_lettered_with_the_reason_and_the_other_steps_go_out() -> None:
    e1, e2 = episode("e1", steps=3), episode("e2")
    blobs = {**prompts("e1", "e2", steps=3), "s3://b/e1-2": b"{not json"}
    del blobs["s3://b/e1-1"]
    log, producer = run([e1, e2], FakeStore(blobs))
    assert log == ["replay e1:0", "dlq t.episodes.scored", "commit 0",
                   "replay e2:0", "replay e2:1", "commit 1"]
    letter = producer.events[1][2]
    assert isinstance(letter, DeadLetter)
    assert letter.error == ("step 1: prompt s3://b/e1-1 is missing (NoSuchKey); "
                            "step 2: prompt s3://b/e1-2 is unusable: not JSON: Expecting "
                            "property name enclosed in double quotes: line 1 column 2 (char 1)")
    assert (letter.source_offset, letter.source_key, letter.consumer_group) == (0, b"task", "g")
    assert Codec().decode(letter.raw_value) == e1  # the episode, to replay from the DLQ


def test_an_altered_prompt_is_dead_lettered_at_once_never_trained_on() -> None:
    e1 = episode("e1")
    store = FakeStore(prompts("e1"), altered=("s3://b/e1-1",))
    log, producer = run([e1], store)
    assert log == ["replay e1:0", "dlq t.episodes.scored", "commit 0"]
    assert store.gets == 2  # read once each: a mismatch is not tried again
    letter = producer.events[1][2]
    assert isinstance(letter, DeadLetter) and "does not match its key" in letter.error


def test_a_prompt_uri_that_is_no_s3_reference_is_dead_lettered_not_retried() -> None:
    e = episode("e1", steps=1).model_copy(update={"trajectory": [TrajectoryStep(
        step=0, url="http://s/", raw_response="r", prompt_uri="/tmp/prompt.json")]})
    log, producer = run([e], FakeStore({}))
    assert log == ["dlq t.episodes.scored", "commit 0"]


def test_minio_and_kafka_down_are_waited_out_never_skipped(monkeypatch: Any) -> None:
    monkeypatch.setattr(handlers, "RETRY_MAX_S", 0.01)
    store = FakeStore(prompts("e1"), down={"s3://b/e1-0": 2})
    log, _ = run([episode("e1")], store, fail_publishes=3)
    assert sorted(log[:2]) == ["replay e1:0", "replay e1:1"] and log[2:] == ["commit 0"]
    assert store.gets == 4  # 2 failed tries, then both prompts


def test_what_is_tried_again() -> None:
    for err in (KafkaConnectionError(), ObjectStoreError("slow"), TimeoutError(),
                ConnectionRefusedError(), s3_error("SlowDown"), s3_error("InternalError")):
        assert transient(err), err
    for err in (s3_error("NoSuchKey"), s3_error("NoSuchBucket"), ValueError("x")):
        assert not transient(err), err
