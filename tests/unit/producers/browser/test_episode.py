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
from producers.browser.session import EpisodeAborted, EpisodeSession
from tests.factories import sample_event
from tests.unit.producers.browser.fakes import (
    FailingPool,
    FakeKafka,
    FakeProducer,
    HangingPool,
    request,
)
from webgym_common.choices import Driver
from webgym_common.config import load_settings
from webgym_common.events import ActionChosen, EpisodeCompleted, StepObserved
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


def resending_runner(producer: FakeProducer, resend_s: float) -> EpisodeRunner:
    settings = load_settings()
    browser = settings.browser.model_copy(update={"action_resend_s": resend_s})
    return EpisodeRunner(settings.model_copy(update={"browser": browser}), HangingPool(),  # type: ignore[arg-type]
                         producer, None, "w1")  # type: ignore[arg-type]


def observed(session: EpisodeSession) -> StepObserved:
    obs = sample_event("StepObserved")
    assert isinstance(obs, StepObserved)
    return obs.model_copy(update={"episode_id": session.episode_id, "step": session.step})


def action_for(session: EpisodeSession) -> ActionChosen:
    chosen = sample_event("ActionChosen")
    assert isinstance(chosen, ActionChosen)
    return chosen.model_copy(update={"episode_id": session.episode_id, "step": session.step})


async def test_an_unanswered_observation_is_published_again_until_its_action_comes() -> None:
    producer = FakeProducer()
    session = EpisodeSession(request("ep-lost-obs"), partition=0)
    session.step = 2
    session.last_observation = observed(session)
    waiting = asyncio.create_task(resending_runner(producer, 0.05)._next_action(session, {}))
    await asyncio.sleep(0.18)
    resent = producer.published(Topic.OBSERVATIONS)
    assert len(resent) >= 2  # once per 0.05 s without an action
    assert {e.event_id for e in resent} == {session.last_observation.event_id}
    chosen = action_for(session)
    session.inbox.put_nowait(chosen)
    async with asyncio.timeout(5):
        assert (await waiting).event_id == chosen.event_id
    sent = len(producer.published(Topic.OBSERVATIONS))
    await asyncio.sleep(0.12)
    assert len(producer.published(Topic.OBSERVATIONS)) == sent  # answered: no more resends


@pytest.mark.parametrize("resend_s, driver", [(0.0, Driver.POLICY),
                                              (0.05, Driver.EXTERNAL)])
async def test_no_resend_when_off_or_when_the_actions_come_from_outside(
        resend_s: float, driver: Driver) -> None:
    producer = FakeProducer()
    session = EpisodeSession(request("ep-quiet", deadline_s=0.3).model_copy(
        update={"driver": driver}), partition=0)
    session.last_observation = observed(session)
    with pytest.raises(EpisodeAborted, match="deadline"):
        async with asyncio.timeout(5):
            await resending_runner(producer, resend_s)._next_action(session, {})
    assert producer.published(Topic.OBSERVATIONS) == []


async def test_a_resend_waits_for_the_step_it_would_repeat() -> None:
    """An observation of an earlier step is never published for the step under way."""
    producer = FakeProducer()
    session = EpisodeSession(request("ep-behind", deadline_s=0.3), partition=0)
    session.last_observation = observed(session)
    session.step += 1
    with pytest.raises(EpisodeAborted):
        await resending_runner(producer, 0.05)._next_action(session, {})
    assert producer.published(Topic.OBSERVATIONS) == []
