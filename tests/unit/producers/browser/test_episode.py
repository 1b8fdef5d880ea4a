"""An episode always ends once, with a reason, unless it is taken away: then it publishes nothing.

The browser is a stand-in (a pool whose contexts never come, or fail); Kafka is a fake
producer, so what was published is read back exactly.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka.errors import KafkaTimeoutError

from producers.browser import retries
from producers.browser.episode import EpisodeRunner
from producers.browser.session import EpisodeSession
from tests.unit.producers.browser.fakes import (
    FailingPool,
    FakeKafka,
    FakeProducer,
    HangingPool,
    request,
)
from webgym_common.config import load_settings
from webgym_common.events import EpisodeCompleted
from webgym_common.topics import Topic


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retries, "backoff_delay", lambda attempt: 0.01)


def runner(pool: Any, producer: FakeProducer) -> EpisodeRunner:
    return EpisodeRunner(load_settings(), pool, producer, None, "w1")  # type: ignore[arg-type]


def completions(producer: FakeProducer) -> list[EpisodeCompleted]:
    out = producer.published(Topic.EPISODES_COMPLETED)
    assert all(isinstance(e, EpisodeCompleted) for e in out)
    return out  # type: ignore[return-value]


async def test_an_unexpected_error_ends_the_episode_as_crashed_with_its_reason() -> None:
    producer = FakeProducer()
    session = EpisodeSession(request("ep-bug"), partition=0)
    async with asyncio.timeout(10):
        termination = await runner(FailingPool(RuntimeError("boom")), producer).run(session)
    assert termination == "crashed"
    (done,) = completions(producer)
    assert done.episode_id == "ep-bug" and done.reason == "worker error: RuntimeError: boom"


async def test_a_stop_reaches_an_episode_that_is_still_opening() -> None:
    opening = asyncio.Event()
    producer = FakeProducer()
    session = EpisodeSession(request("ep-open"), partition=0)
    run = asyncio.create_task(runner(HangingPool(opening.set), producer).run(session))
    async with asyncio.timeout(10):
        await opening.wait()
        session.stop("cancelled", "straggler")
        assert await run == "cancelled"
    (done,) = completions(producer)
    assert (done.termination, done.reason) == ("cancelled", "straggler")


async def test_an_episode_cancelled_before_it_began_opens_nothing() -> None:
    opened: list[bool] = []
    producer = FakeProducer()
    session = EpisodeSession(request("ep-early"), partition=0)
    session.stop("cancelled", "iteration closed")
    async with asyncio.timeout(10):
        termination = await runner(HangingPool(lambda: opened.append(True)), producer).run(session)
    assert termination == "cancelled"
    assert not opened
    assert [d.termination for d in completions(producer)] == ["cancelled"]


async def test_an_episode_taken_away_publishes_nothing() -> None:
    opening = asyncio.Event()
    producer = FakeProducer()
    session = EpisodeSession(request("ep-moved"), partition=0)
    run = asyncio.create_task(runner(HangingPool(opening.set), producer).run(session))
    async with asyncio.timeout(10):
        await opening.wait()
        run.cancel()  # the partition was revoked
        with pytest.raises(asyncio.CancelledError):
            await run
    await asyncio.sleep(0.05)
    assert producer.producer.sent == []


async def test_the_completion_is_published_once_kafka_takes_it() -> None:
    kafka = FakeKafka([KafkaTimeoutError(), KafkaTimeoutError()])
    producer = FakeProducer(kafka=kafka)
    session = EpisodeSession(request("ep-kafka"), partition=0)
    session.stop("cancelled", "straggler")
    async with asyncio.timeout(10):
        assert await runner(HangingPool(), producer).run(session) == "cancelled"
    assert len(kafka.sent) == 3 and len(completions(producer)) == 1
