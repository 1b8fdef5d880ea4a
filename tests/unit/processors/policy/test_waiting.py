"""Waiting for an observation's request (waiting.py): never by age, until it cannot come."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

import pytest

from processors.policy.decisions import Ended, Entry, Live, Verdict
from processors.policy.waiting import RequestWatch
from webgym_common.agent.prompts import EpisodeContext
from webgym_common.events import StepObserved, Viewport
from webgym_common.stream.faust_app import InOrderAcks
from webgym_common.stream.handlers import Origin


class TP(NamedTuple):
    topic: str
    partition: int


@dataclass
class Message:
    tp: TP
    timestamp: float  # seconds, as faust's
    offset: int = 0


@dataclass
class RequestEvent:
    message: Message

    def ack(self) -> None:  # as faust's Event.ack
        pass


def at(timestamp: float) -> Origin:
    """Where an observation was read: partition 2, at `timestamp` (seconds)."""
    return Origin("t.observations", 2, 0, int(timestamp * 1000))


OBS = StepObserved(episode_id="ep", task_id="t", step=0, url="http://x/",
                   viewport=Viewport(width=1, height=1))
EPISODES = TP("t.episodes", 2)


def watch(end: int, grace_s: float = 30) -> RequestWatch:
    async def highwaters(tp: TP) -> Mapping[TP, int]:
        return {tp: end}
    return RequestWatch("t.episodes", grace_s, highwaters)


async def test_an_hour_old_observation_waits_for_its_request_then_is_decided() -> None:
    w, table = watch(end=10), {}
    w.starting_at({EPISODES: 3})  # requests from 3 on are not read yet
    old = at(time.time() - 3600)
    waiting = asyncio.create_task(w.triaged(old, OBS, table.get, lambda tp: True))
    await asyncio.sleep(0.05)
    assert not waiting.done()  # not skipped by age: the request may be among 3..9
    table["ep"] = Live(EpisodeContext(episode_id="ep", task_id="t", task_name="x"))
    await w.read(EPISODES, 8)
    verdict, _, entry = await asyncio.wait_for(waiting, 2)
    assert verdict is Verdict.DECIDE and entry is table["ep"]


async def test_an_observation_whose_request_cannot_come_any_more_is_an_orphan() -> None:
    w, table = watch(end=10), {}
    w.starting_at({EPISODES: 3})
    old = at(time.time() - 3600)
    waiting = asyncio.create_task(w.triaged(old, OBS, table.get, lambda tp: True))
    await w.read(EPISODES, 10)  # read to the end it had: the request is not there
    verdict, _, _ = await asyncio.wait_for(waiting, 3)
    assert verdict is Verdict.ORPHAN


async def test_ended_episodes_are_skipped_and_moved_partitions_let_go() -> None:
    w = watch(end=0)
    table: dict[str, Entry] = {"ep": Ended(1, 2)}
    fresh = at(time.time())
    assert (await w.triaged(fresh, OBS, table.get, lambda tp: True))[0] is Verdict.SKIP
    verdict, why, _ = await asyncio.wait_for(w.triaged(fresh, OBS, {}.get, lambda tp: False), 2)
    assert verdict is Verdict.SKIP and "moved" in why


async def test_a_request_done_out_of_order_does_not_orphan_an_earlier_one_in_flight() -> None:
    # Two readers: the request at 9 is written down before the one at 8 (ep's) is.
    acks, w, table = InOrderAcks(), watch(end=10, grace_s=0), {}
    w.starting_at({EPISODES: 8})
    ep_request, other = (acks.arrived(RequestEvent(Message(EPISODES, 0, o)))  # type: ignore[arg-type]
                         for o in (8, 9))
    waiting = asyncio.create_task(w.triaged(
        at(time.time() - 60), OBS, table.get, lambda tp: True))
    acks.done(other)
    await w.read(EPISODES, acks.done_below(EPISODES))
    await asyncio.sleep(1.2)  # the watch has measured the end (10) and looked again
    assert not waiting.done()  # 8 is still being written down: it may yet come
    table["ep"] = Live(EpisodeContext(episode_id="ep", task_id="t", task_name="x"))
    acks.done(ep_request)
    await w.read(EPISODES, acks.done_below(EPISODES))
    assert (await asyncio.wait_for(waiting, 2))[0] is Verdict.DECIDE
    assert acks.done_below(EPISODES) == 10


async def test_a_wait_past_the_grace_is_logged_once_with_where_the_requests_stand(
        caplog: pytest.LogCaptureFixture) -> None:
    # A silent wait is indistinguishable from a hang: the one line names the partition,
    # how far its requests are read and the end offset they must reach.
    w, table = watch(end=10), {}
    w.starting_at({EPISODES: 3})
    old = at(time.time() - 3600)
    with caplog.at_level(logging.INFO, logger="processors.policy.waiting"):
        waiting = asyncio.create_task(w.triaged(old, OBS, table.get, lambda tp: True))
        for _ in range(3):
            await w.wake()  # each wake is another round of the wait
            await asyncio.sleep(0.02)
        table["ep"] = Live(EpisodeContext(episode_id="ep", task_id="t", task_name="x"))
        await w.read(EPISODES, 10)
        await asyncio.wait_for(waiting, 2)
    lines = [r.getMessage() for r in caplog.records if "waiting for its request" in r.message]
    assert len(lines) == 1 and "below offset 3 of end 10" in lines[0], lines
