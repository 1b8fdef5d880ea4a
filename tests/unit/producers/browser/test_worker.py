"""A browser worker's story with stand-ins for Kafka and the browser: who runs which episode.

A revoked partition's episodes stop at once and publish nothing; a partition assigned
again starts afresh from the log; an episode the completions log says ended is never
started again, and its actions are committed past, not executed.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import TopicPartition

from producers.browser import worker as worker_module
from producers.browser.session import EpisodeSession
from producers.browser.worker import BrowserWorker
from tests.factories import sample_event
from tests.unit.producers.browser.fakes import FakeProducer, request
from tests.unit.producers.browser.test_commits import FakeConsumer
from webgym_common.config import load_settings
from webgym_common.events import ActionChosen, Event
from webgym_common.stream.bus import Received

EPISODES, ACTIONS = "t.episodes", "t.actions"


class FakeRunner:
    """Episodes that stay inside a long browser call until `done` is set."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.cancelled: list[str] = []
        self.done = asyncio.Event()

    async def run(self, session: EpisodeSession) -> str:
        self.started.append(session.episode_id)
        try:
            await self.done.wait()
        except asyncio.CancelledError:
            self.cancelled.append(session.episode_id)
            raise
        return "answer"


class FakeCompletedLog:
    def __init__(self, ended: dict[int, list[str]]) -> None:
        self.ended = ended
        self.reads: list[tuple[int, int]] = []

    async def ended_since(self, partition: int, since_ms: int, timeout_s: float) -> list[str]:
        self.reads.append((partition, since_ms))
        return self.ended.get(partition, [])


@pytest.fixture
async def worker(monkeypatch: pytest.MonkeyPatch) -> BrowserWorker:
    monkeypatch.setattr(worker_module, "EventProducer", lambda *a, **k: FakeProducer())
    w = BrowserWorker(load_settings(), worker_id="w1")
    w.runner = FakeRunner()  # type: ignore[assignment]
    w.consumer.consumer = FakeConsumer(
        {TopicPartition(t, p) for t in (EPISODES, ACTIONS) for p in range(4)})
    w.completed = FakeCompletedLog({})  # type: ignore[assignment]
    return w


def record(topic: str, partition: int, offset: int, event: Event) -> Received:
    return Received(topic, partition, offset, None, event, timestamp_ms=1_000_000 + offset)


def episode(partition: int, offset: int, eid: str, step: int = 0) -> list[Received]:
    """The request of `eid` and its action of `step`, at `offset` in both topics."""
    return [record(EPISODES, partition, offset, request(eid)),
            record(ACTIONS, partition, offset, action(eid, step))]


def action(eid: str, step: int) -> ActionChosen:
    a = sample_event("ActionChosen").model_copy(update={"episode_id": eid, "step": step})
    assert isinstance(a, ActionChosen)
    return a


async def feed(w: BrowserWorker, *records: Received) -> None:
    for r in records:
        await w._know_who_ended(r)
        w._handle(r)
    await asyncio.sleep(0)  # let the episodes start


def committed(w: BrowserWorker) -> dict[TopicPartition, int]:
    out: dict[TopicPartition, int] = {}
    for commit in w.consumer.consumer.commits:  # type: ignore[attr-defined]
        out.update({tp: meta.offset for tp, meta in commit.items()})
    return out


async def test_a_revoked_episode_stops_at_once_and_starts_afresh_when_assigned_again(
    worker: BrowserWorker,
) -> None:
    runner: FakeRunner = worker.runner  # type: ignore[assignment]
    tps = {TopicPartition(EPISODES, 0), TopicPartition(ACTIONS, 0)}
    await feed(worker, *episode(0, 5, "ep-a"))
    assert runner.started == ["ep-a"]

    async with asyncio.timeout(5):  # the episode is inside a browser call: it is cancelled
        await worker.on_partitions_revoked(tps)
    assert runner.cancelled == ["ep-a"] and not worker.sessions and not worker.tasks
    assert committed(worker).get(TopicPartition(EPISODES, 0), 0) <= 5  # never past its request
    assert committed(worker).get(TopicPartition(ACTIONS, 0), 0) <= 5
    assert worker.producer.producer.sent == []  # type: ignore[attr-defined]

    # The same worker gets the partition back: the log is read again and the episode resumes.
    await worker.on_partitions_assigned(tps)
    await feed(worker, *episode(0, 5, "ep-a"))
    assert runner.started == ["ep-a", "ep-a"]
    assert worker.sessions["ep-a"].inbox.qsize() == 1  # its action, to replay
    runner.done.set()
    await asyncio.sleep(0.01)
    assert not worker.sessions and "ep-a" in worker.finished.of(0)


async def test_an_episode_that_ended_before_a_kill_is_not_run_again(worker: BrowserWorker) -> None:
    runner: FakeRunner = worker.runner  # type: ignore[assignment]
    log = FakeCompletedLog({1: ["ep-done"]})
    worker.completed = log  # type: ignore[assignment]
    await feed(worker,
               record(EPISODES, 1, 3, request("ep-done")),
               record(ACTIONS, 1, 4, action("ep-done", 0)),
               record(ACTIONS, 1, 5, action("ep-done", 1)))
    assert runner.started == [] and not worker.early_actions.waiting
    assert worker.holds.committable() == {
        TopicPartition(EPISODES, 1): 4, TopicPartition(ACTIONS, 1): 6}
    # The log was read once, from before the first record re-read.
    margin = int(worker.cfg.finished_lookback_s * 1000)
    assert log.reads == [(1, 1_000_003 - margin)]


async def test_an_ended_episode_releases_its_offsets_and_is_not_started_twice(
    worker: BrowserWorker,
) -> None:
    runner: FakeRunner = worker.runner  # type: ignore[assignment]
    await feed(worker, *episode(2, 0, "ep-b"))
    assert worker.holds.committable().get(TopicPartition(EPISODES, 2), 0) == 0
    runner.done.set()
    await asyncio.sleep(0.01)
    assert worker.holds.committable()[TopicPartition(EPISODES, 2)] == 1
    await feed(worker, *episode(2, 1, "ep-b", step=1))
    assert runner.started == ["ep-b"]
