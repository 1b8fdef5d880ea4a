"""The history loop goes on when a commit times out or fails, and counts a judge failure
as no attempt."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from aiokafka import TopicPartition
from aiokafka.errors import CommitFailedError

from processors.history import Ownership, fold, fold_events
from tests.unit.scored import scored
from webgym_common.bus import Received
from webgym_common.events import Event, TaskHistory
from webgym_common.history import JUDGE_FAILED

TP = TopicPartition("t.scored", 0)


class FakeConsumer:
    """Hands out the events; its first commit hangs (a lost coordinator), its second fails
    (a rebalance), the rest succeed."""

    def __init__(self, events: list[Event]) -> None:
        self.received = [Received(TP.topic, TP.partition, i, e.task_id, e, 0)  # type: ignore[attr-defined]
                         for i, e in enumerate(events)]
        self.commits: list[int] = []
        self.consumer = self  # for `consumer.consumer.assignment()`
        self.group_id = "history"

    def assignment(self) -> set[TopicPartition]:
        return {TP}

    async def events(self) -> AsyncIterator[Received]:
        for r in self.received:
            yield r

    async def commit(self, received: Received) -> None:
        self.commits.append(received.offset)
        if len(self.commits) == 1:
            await asyncio.Event().wait()  # never returns
        if len(self.commits) == 2:
            raise CommitFailedError("rebalanced")


class FakeProducer:
    def __init__(self) -> None:
        self.published: list[TaskHistory] = []

    def topic(self, topic: object) -> str:
        return str(topic)

    async def publish(self, topic: object, key: str, event: TaskHistory) -> None:
        self.published.append(event)


async def test_the_fold_survives_a_commit_timeout_and_a_failed_commit() -> None:
    events = [scored("e1", reward=1.0), scored("e2"), scored("e3", reward=1.0)]
    consumer, producer = FakeConsumer(list(events)), FakeProducer()

    async def rebuild() -> dict[str, TaskHistory]:
        return {}

    await fold_events(consumer, producer, Ownership(), rebuild, commit_timeout_s=0.05)  # type: ignore[arg-type]
    assert consumer.commits == [0, 1, 2]  # every event was folded, then committed
    assert [(h.attempts, h.successes) for h in producer.published] == [(1, 1), (2, 1), (3, 2)]


def test_a_judge_failure_is_no_attempt() -> None:
    h = fold(None, scored("e1", reward=1.0))
    failed = scored("e2").model_copy(update={"evaluation": f"{JUDGE_FAILED}: criterion B"})
    assert fold(h, failed) is None
    assert fold(None, failed) is None
