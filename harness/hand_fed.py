"""One episode fed by hand through the broker, as a policy would (tests, benchmarks).

It asserts, as test code does.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

from webgym_common.agent.actions import Mode, format_action, parse_action
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
from webgym_common.topics import Topic


def hand_request(url: str, mode: Mode = "set_of_marks", max_steps: int = 20,
                 timeout_s: float = 120, task_id: str | None = None,
                 driver: Driver = Driver.POLICY) -> EpisodeRequested:
    """The request of a test-split episode on `url` whose actions come by hand (a test's or
    a benchmark's own loop), under a fresh episode id."""
    episode_id = f"hand-{uuid.uuid4().hex[:10]}"
    task = Task(task_id=task_id or f"task-{episode_id}", task_name="hand-fed",
                domain="sandbox-test", website=url, difficulty=1)
    return EpisodeRequested(
        episode_id=episode_id, task=task, iteration=0, split="test", max_steps=max_steps,
        deadline=utc_now() + timedelta(seconds=timeout_s), policy_version="hand",
        interaction_mode=mode, driver=driver,
    )


class HandFedEpisode:
    """`await ep.start()`, then `await ep.act("Click [3]")`, then `await ep.completed()`.

    The hand writes any action of the grammar, the pipeline's own (Visit) too; `driver` is
    the one the request names (a browser worker runs a Visit only for Driver.EXTERNAL)."""

    def __init__(self, settings: Settings, producer: EventProducer, url: str,
                 mode: Mode = "set_of_marks", max_steps: int = 20, timeout_s: float = 120,
                 task_id: str | None = None, driver: Driver = Driver.POLICY) -> None:
        self.settings, self.producer, self.mode = settings, producer, mode
        self.request = hand_request(url, mode, max_steps, timeout_s, task_id, driver)
        self.episode_id, self.task = self.request.episode_id, self.request.task
        self.observations: dict[int, StepObserved] = {}
        self.duplicates = 0
        self.completions: list[EpisodeCompleted] = []
        self.reader = EventConsumer(settings, [Topic.OBSERVATIONS, Topic.EPISODES_COMPLETED],
                                    None, producer, client_id="hand-fed")
        self._task: asyncio.Task | None = None
        self._changed = asyncio.Event()

    async def begin(self) -> None:
        """Request the episode without waiting for its first observation."""
        await self.reader.start(from_end=True)
        self._task = asyncio.create_task(self._read())
        await self.producer.publish(Topic.EPISODES, self.episode_id, self.request)

    async def start(self, wait_s: float = 60) -> StepObserved:
        await self.begin()
        return await self.observation(0, wait_s)

    @property
    def step(self) -> int:
        return max(self.observations)

    async def act(self, action: str, wait_s: float = 60) -> StepObserved:
        step = self.step
        parsed = parse_action(action, self.mode, offered_only=False)
        await self.producer.publish(Topic.ACTIONS, self.episode_id, ActionChosen(
            episode_id=self.episode_id, step=step, action=parsed,
            action_string=format_action(parsed), policy_version="hand",
        ))
        return await self.observation(step + 1, wait_s)

    async def send_only(self, action: str) -> None:
        parsed = parse_action(action, self.mode, offered_only=False)
        await self.producer.publish(Topic.ACTIONS, self.episode_id, ActionChosen(
            episode_id=self.episode_id, step=self.step, action=parsed,
            action_string=format_action(parsed), policy_version="hand",
        ))

    async def observation(self, step: int, wait_s: float = 60) -> StepObserved:
        await self._until(lambda: step in self.observations, wait_s)
        return self.observations[step]

    async def completed(self, wait_s: float = 60) -> EpisodeCompleted:
        await self._until(lambda: bool(self.completions), wait_s)
        return self.completions[0]

    async def _until(self, condition, wait_s: float) -> None:  # noqa: ANN001
        async with asyncio.timeout(wait_s):
            while not condition():
                self._changed.clear()
                await self._changed.wait()

    async def _read(self) -> None:
        async for received in self.reader.events(poll_timeout_ms=100):
            event = received.event
            if getattr(event, "episode_id", None) != self.episode_id:
                continue
            if isinstance(event, StepObserved):
                if event.step in self.observations:
                    self.duplicates += 1
                self.observations.setdefault(event.step, event)
            elif isinstance(event, EpisodeCompleted):
                self.completions.append(event)
            self._changed.set()

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
        await self.reader.stop()

    async def __aenter__(self) -> HandFedEpisode:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def mark_index(obs: StepObserved, role: str, name: str) -> int:
    for m in obs.marks:
        if m.role == role and m.name == name:
            return m.index
    raise AssertionError(f"no {role} {name!r} among {[(m.role, m.name) for m in obs.marks]}")


@dataclass
class EpisodeLog:
    """Everything the log holds about one episode."""

    observations: dict[int, StepObserved] = field(default_factory=dict)
    actions: dict[int, list[ActionChosen]] = field(default_factory=dict)
    completions: list[EpisodeCompleted] = field(default_factory=list)


async def watch_episodes(
    settings: Settings, producer: EventProducer, episode_ids: list[str], timeout_s: float,
    linger_s: float = 3.0, partial_ok: bool = False,
) -> dict[str, EpisodeLog]:
    """Read observations, actions and completions until every episode has ended (+ linger).

    On timeout: raise TimeoutError, or with `partial_ok` return what was read so far.
    """
    logs = {eid: EpisodeLog() for eid in episode_ids}
    topics = [Topic.OBSERVATIONS, Topic.ACTIONS, Topic.EPISODES_COMPLETED]
    async with EventConsumer(settings, topics, None, producer, client_id="watch") as reader:
        ended_at: float | None = None
        clock = asyncio.get_running_loop().time
        give_up = clock() + timeout_s
        while ended_at is None or clock() < ended_at + linger_s:
            if ended_at is None and clock() > give_up:
                if partial_ok:
                    break
                raise TimeoutError(f"episodes still running after {timeout_s:.0f}s")
            for received in await reader.poll(200):
                _record(logs, received.event)
            if ended_at is None and all(v.completions for v in logs.values()):
                ended_at = clock()
    return logs


def _record(logs: dict[str, EpisodeLog], event: object) -> None:
    log = logs.get(getattr(event, "episode_id", ""))
    if log is None:
        return
    if isinstance(event, StepObserved):
        log.observations.setdefault(event.step, event)
    elif isinstance(event, ActionChosen):
        log.actions.setdefault(event.step, []).append(event)
    elif isinstance(event, EpisodeCompleted):
        log.completions.append(event)
