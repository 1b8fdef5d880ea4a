"""The history loop goes on when a commit times out or fails, counts a judge failure as no
attempt, and dead-letters scores no evaluator could have given."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial

from aiokafka import TopicPartition
from aiokafka.errors import CommitFailedError

from processors.history import Catalog, fold, on_scored, refusal
from tests.unit.scored import scored
from webgym_common.events import EpisodeScored, Event, TaskHistory
from webgym_common.history import JUDGE_FAILED
from webgym_common.stream.bus import Ownership, Received
from webgym_common.stream.handlers import Memory, handle_each

TP = TopicPartition("t.scored", 0)


class FakeConsumer:
    """Hands out the events; its first commit hangs (a lost coordinator), its second fails
    (a rebalance), the rest succeed."""

    def __init__(self, events: list[Event]) -> None:
        self.received = [Received(TP.topic, TP.partition, i, e.task_id, e, 0)  # type: ignore[attr-defined]
                         for i, e in enumerate(events)]
        self.commits: list[int] = []
        self.refused: list[tuple[int, str]] = []
        self.consumer = self  # for `consumer.consumer.assignment()`
        self.group_id = "history"

    def assignment(self) -> set[TopicPartition]:
        return {TP}

    async def events(self) -> AsyncIterator[Received]:
        for r in self.received:
            yield r

    async def refuse(self, received: Received, error: str) -> None:
        self.refused.append((received.offset, error))

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


async def fold_events(consumer: FakeConsumer, producer: FakeProducer,
                      rebuild: Callable[[], Awaitable[dict[str, TaskHistory]]],
                      catalog: Catalog) -> None:
    """The history worker's loop over fakes of its consumer and producer."""
    await handle_each(consumer, producer, EpisodeScored, lambda s: s.task_id,  # type: ignore[arg-type]
                      partial(on_scored, catalog), Memory(rebuild, Ownership("history")),
                      commit_timeout_s=0.05)


async def test_the_fold_survives_a_commit_timeout_and_a_failed_commit() -> None:
    events = [scored("e1", reward=1.0), scored("e2"), scored("e3", reward=1.0)]
    consumer, producer = FakeConsumer(list(events)), FakeProducer()

    async def rebuild() -> dict[str, TaskHistory]:
        return {}

    await fold_events(consumer, producer, rebuild, catalog_of("task-1"))
    assert consumer.commits == [0, 1, 2]  # every event was folded, then committed
    assert [(h.attempts, h.successes) for h in producer.published] == [(1, 1), (2, 1), (3, 2)]


def test_a_judge_failure_is_no_attempt() -> None:
    h = fold(None, scored("e1", reward=1.0))
    failed = scored("e2").model_copy(update={"evaluation": f"{JUDGE_FAILED}: criterion B"})
    assert fold(h, failed) is None
    assert fold(None, failed) is None


def catalog_of(*task_ids: str) -> Catalog:
    async def load() -> set[str]:
        return set(task_ids)
    return Catalog(load)


def test_a_score_for_no_task_of_the_catalog_or_with_negative_steps_is_refused() -> None:
    assert refusal(scored("e1"), {"task-1"}) is None
    unknown = refusal(scored("e1", task_id="bad-task-3"), {"task-1"})
    assert unknown is not None and "bad-task-3" in unknown
    negative = scored("e1").model_copy(update={"steps": -1})
    assert refusal(negative, {"task-1"}) == "episode e1: -1 steps"


async def test_refused_scores_are_dead_lettered_committed_and_not_counted() -> None:
    events = [scored("e1", reward=1.0), scored("e2", task_id="bad-task"),
              scored("e3", task_id="task-2")]
    consumer, producer = FakeConsumer(list(events)), FakeProducer()
    loads: list[int] = []

    async def load() -> set[str]:
        loads.append(1)
        return {"task-1"} if len(loads) == 1 else {"task-1", "task-2"}

    async def rebuild() -> dict[str, TaskHistory]:
        return {}

    catalog = Catalog(load)
    await fold_events(consumer, producer, rebuild, catalog)
    # task-2 was loaded after the first read, but within CATALOG_REFRESH_S: not read again.
    assert [o for o, _ in consumer.refused] == [1, 2] and len(loads) == 1
    assert consumer.commits == [0, 1, 2]  # refused ones are committed too
    assert [h.task_id for h in producer.published] == ["task-1"]
    catalog.read_at -= 60  # later: a score of a task it lacks reads the catalog again
    assert "task-2" in await catalog.holding("task-2") and len(loads) == 2
