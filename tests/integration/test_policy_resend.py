"""The browser's resend (browser.action_resend_s) against a real policy processor.

faust 0.15.3 was seen committing the policy group past an observation it never handed to
its agent, right after a restart: the episode then waited for its deadline. Here that loss
is made on purpose, by committing the group past the step-0 observation before the policy
runs, and the browser worker's resend of it (same event, same event id) must heal it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from aiokafka import TopicPartition

from harness.hand_fed import watch_episodes
from harness.launch import BrowserWorkerProcess
from producers.drive_reference import episode_request
from tests.integration.test_policy import (
    actions_per_step,
    pick,
    read_all,
    ready,
    request_all,
    teacher,
    until,
)
from webgym_common.config import Settings
from webgym_common.events import StepObserved
from webgym_common.stream.bus import EventProducer
from webgym_common.stream.kafka_clients import make_consumer
from webgym_common.topics import Group, Topic, group_id, topic_name

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
RESEND_S = 3.0  # the worker's browser.action_resend_s here (0: the loss is not healed)
DEADLINE_S = 120


async def commit_policy_observations_to_end(settings: Settings) -> None:
    """Commit the policy group on webgym.observations to each partition's end, as a member
    that never handled those records would (faust's lost record); episodes untouched."""
    name = topic_name(settings.kafka, Topic.OBSERVATIONS)
    parts = [TopicPartition(name, p) for p in range(settings.kafka.partitions)]
    consumer = make_consumer(settings, [], group_id(settings.kafka, Group.POLICY), "skipper")
    await consumer.start()
    try:
        consumer.assign(parts)
        await consumer.commit(await consumer.end_offsets(parts))
    finally:
        await consumer.stop()


async def test_an_observation_the_policy_group_committed_past_is_decided_from_its_resend(
    settings: Settings, producer: EventProducer, start_policy, tmp_path: Path
) -> None:
    """The policy group commits past the episode's step-0 observation before the policy ever
    reads it; the browser publishes it again after RESEND_S, and the teacher solves it."""
    browser = settings.browser.model_copy(update={"action_resend_s": RESEND_S})
    worker = BrowserWorkerProcess(settings.model_copy(update={"browser": browser}), 1,
                                  tmp_path / "worker.log")
    try:
        request = episode_request(pick("shop-", per_site=1)[0], timeout_s=DEADLINE_S)
        eid = request.episode_id
        await request_all(producer, [request])

        async def step0() -> list[StepObserved]:
            return [o for o in await read_all(settings, producer, Topic.OBSERVATIONS)
                    if isinstance(o, StepObserved) and o.episode_id == eid and o.step == 0]

        async def observed() -> bool:
            return bool(await step0())
        await until(observed, 90, "the step-0 observation is on the topic")
        await commit_policy_observations_to_end(settings)  # the policy never sees it
        await ready(start_policy("teacher", teacher(settings)))

        log = (await watch_episodes(settings, producer, [eid], DEADLINE_S + 30))[eid]
        assert len(log.completions) == 1
        assert log.completions[0].termination not in ("timeout", "crashed"), log.completions
        copies = await step0()
        assert len(copies) >= 2 and len({o.event_id for o in copies}) == 1, copies
        shown = [s for s, o in log.observations.items() if not o.terminal]
        assert await actions_per_step(settings, producer) == Counter({(eid, s): 1 for s in shown})
    finally:
        worker.stop()
