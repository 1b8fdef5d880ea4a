"""Drive episodes with their tasks' reference actions, through Kafka like any policy would.

Publishes EpisodeRequested for each task, answers every StepObserved of those
episodes with the reference action for that step (resolved against the page's
marks) as ActionChosen, and returns when each episode's EpisodeCompleted arrives.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from webgym_common.agent.actions import format_action
from webgym_common.agent.teacher import resolve_reference_action
from webgym_common.choices import Driver
from webgym_common.config import Settings
from webgym_common.events import (
    ActionChosen,
    EpisodeCompleted,
    EpisodeRequested,
    StepObserved,
    Task,
    utc_now,
)
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.tasks import max_steps_for
from webgym_common.topics import Topic

POLICY_VERSION = "reference"


@dataclass
class DrivenEpisode:
    task: Task
    episode_id: str
    observations: list[StepObserved] = field(default_factory=list)
    actions: list[ActionChosen] = field(default_factory=list)
    completed: EpisodeCompleted | None = None


def episode_request(
    task: Task, split: str = "test", timeout_s: float = 300.0, iteration: int = 0,
    max_steps: int | None = None, driver: Driver = Driver.POLICY,
) -> EpisodeRequested:
    """A request for `task`. `drive` answers its observations itself: pass Driver.EXTERNAL
    when a policy processor may be running, so it stays out (tests that let the teacher
    policy answer keep the default)."""
    return EpisodeRequested(
        episode_id=f"{task.task_id}-{uuid.uuid4().hex[:10]}", task=task, iteration=iteration,
        split=split, max_steps=max_steps or task.max_steps or max_steps_for(task.difficulty, split),
        deadline=utc_now() + timedelta(seconds=timeout_s), policy_version=POLICY_VERSION,
        driver=driver,
    )


async def drive(
    settings: Settings,
    requests: Sequence[EpisodeRequested],
    producer: EventProducer,
    timeout_s: float = 300.0,
    on_event: Callable[[DrivenEpisode], None] = lambda _: None,
) -> list[DrivenEpisode]:
    episodes = {r.episode_id: DrivenEpisode(r.task, r.episode_id) for r in requests}
    reader = EventConsumer(settings, [Topic.OBSERVATIONS, Topic.EPISODES_COMPLETED], None,
                           producer, client_id="reference-driver")
    await reader.start(from_end=True)
    try:
        for r in requests:
            await producer.publish(Topic.EPISODES, r.episode_id, r)
        async with asyncio.timeout(timeout_s):
            async for received in reader.events(poll_timeout_ms=100):
                episode = episodes.get(getattr(received.event, "episode_id", ""))
                if episode is None:
                    continue
                if isinstance(received.event, EpisodeCompleted):
                    episode.completed = received.event
                elif isinstance(received.event, StepObserved):
                    await _answer(producer, episode, received.event)
                on_event(episode)
                if all(e.completed for e in episodes.values()):
                    break
    finally:
        await reader.stop()
    return list(episodes.values())


async def _answer(producer: EventProducer, episode: DrivenEpisode, obs: StepObserved) -> None:
    if any(o.step == obs.step for o in episode.observations):
        return  # a resumed episode re-publishes steps already answered
    episode.observations.append(obs)
    refs = episode.task.reference_actions
    if obs.terminal or obs.step >= len(refs):
        return
    action = resolve_reference_action(refs[obs.step], obs.marks)
    chosen = ActionChosen(
        episode_id=episode.episode_id, step=obs.step, action=action,
        action_string=format_action(action), raw_response="", policy_version=POLICY_VERSION,
    )
    episode.actions.append(chosen)
    await producer.publish(Topic.ACTIONS, episode.episode_id, chosen)
