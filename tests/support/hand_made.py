"""Hand-made episodes played on the topics as the controller and a browser would, for the
policy's tests: requests, observations and completions in any order, on chosen partitions."""

from __future__ import annotations

import uuid
from datetime import timedelta

from aiokafka.partitioner import murmur2

from webgym_common.events import (
    EpisodeCompleted,
    EpisodeRequested,
    StepObserved,
    Task,
    Viewport,
    utc_now,
)
from webgym_common.stream.bus import EventProducer
from webgym_common.topics import Topic


class Episodes:
    """Hand-made episodes, played on the topics as the controller and a browser would."""

    def __init__(self, producer: EventProducer, ids: list[str]) -> None:
        self.producer, self.ids = producer, ids
        self.started = utc_now()

    @classmethod
    def make(cls, producer: EventProducer, n: int, partitions: int,
             on_partition: int | None = None) -> Episodes:
        ids: list[str] = []
        while len(ids) < n:
            eid = f"ep-{uuid.uuid4().hex[:10]}"
            if on_partition is None or partition_of(eid, partitions) == on_partition:
                ids.append(eid)
        return cls(producer, ids)

    @staticmethod
    def requested(eid: str) -> EpisodeRequested:
        task = Task(task_id=f"task-{eid}", task_name="hand-made", domain="sandbox-test",
                    website="http://sandbox.invalid/", difficulty=1)
        return EpisodeRequested(
            episode_id=eid, task=task, iteration=0, split="train", max_steps=20,
            deadline=utc_now() + timedelta(minutes=30), policy_version="teacher-forcing")

    @staticmethod
    def observed(eid: str, step: int, terminal: bool = False) -> StepObserved:
        return StepObserved(
            episode_id=eid, task_id=f"task-{eid}", step=step, url="http://sandbox.invalid/",
            viewport=Viewport(width=800, height=600), terminal=terminal)

    async def request(self, eid: str) -> None:
        await self.producer.publish(Topic.EPISODES, eid, self.requested(eid))

    async def observe(self, eid: str, step: int, terminal: bool = False) -> None:
        await self.producer.publish(Topic.OBSERVATIONS, eid, self.observed(eid, step, terminal))

    async def complete(self, eid: str, steps: int) -> None:
        await self.observe(eid, steps, terminal=True)
        await self.producer.publish(Topic.EPISODES_COMPLETED, eid, EpisodeCompleted(
            episode_id=eid, task_id=f"task-{eid}", iteration=0, split="train", steps=steps,
            termination="answer", answer="", started_at=self.started))


def partition_of(key: str, partitions: int) -> int:
    """The partition our producer (aiokafka's default partitioner) puts `key` on."""
    return (murmur2(key.encode()) & 0x7FFFFFFF) % partitions
