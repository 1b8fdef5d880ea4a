"""The env server's envs and their episodes, each an ordinary episode of the pipeline.

Delivery: a reset publishes an EpisodeRequested (driver external: the policy processor
leaves it alone), a step publishes the client's action as ActionChosen and waits for the
browser worker's StepObserved (or EpisodeCompleted) and, once the episode has ended, for
the evaluator's EpisodeScored (`follow` takes them from the reader app.py starts). Every
wait has a timeout; a request that runs out of time answers 200 with the error as its
observation and reward 0, as AgentGym's server answers any error inside a step. A reset
of a running episode, a close, and the reaper (envs idle for `idle_timeout_s`) cancel it
with CancelEpisode on webgym.control, so the browser worker closes its context. The
decisions are in envs.py.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

from producers.envserver.envs import (
    ActionError,
    Env,
    Episode,
    catalog_order,
    describe,
    ending,
    extract_action,
    idle_envs,
    next_env_idx,
    observation_text,
    running,
    task_for_idx,
    to_action,
)
from webgym_common.agent.actions import ActionKind, format_action
from webgym_common.choices import Driver
from webgym_common.config import Settings
from webgym_common.events import (
    ActionChosen,
    CancelEpisode,
    EpisodeCompleted,
    EpisodeRequested,
    EpisodeScored,
    StepObserved,
    Task,
    utc_now,
)
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.stream.readers import read_compacted
from webgym_common.tasks import max_steps_for
from webgym_common.topics import Topic

log = logging.getLogger("producers.envserver.app")  # the process's logger, as before

POLICY_VERSION = "envserver"
ITERATION = 0  # env-server episodes belong to no rollout iteration; 0 as `webgym drive`


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class EnvServer:
    def __init__(self, settings: Settings, producer: EventProducer,
                 load_tasks: Callable[[], Awaitable[list[Task]]] | None = None) -> None:
        self.settings = settings
        self.load_tasks = load_tasks or self._read_catalog
        self.cfg = settings.envserver
        self.producer = producer
        self.envs: dict[int, Env] = {}
        self.last_idx = -1
        self.episodes: dict[str, Episode] = {}  # the envs' current episodes, by id
        self.signals: dict[str, asyncio.Event] = {}
        self.tasks: list[Task] = []  # in catalog_order
        self.tasks_read_at = -1e9
        self.catalog_reads = 0
        self.reading = asyncio.Lock()  # one catalog read at a time, however many resets wait

    # -- consume: the pipeline's events of our episodes ---------------------------------

    async def follow(self, reader: EventConsumer) -> None:
        async for received in reader.events(poll_timeout_ms=100):
            event = received.event
            if not isinstance(event, StepObserved | EpisodeCompleted | EpisodeScored):
                continue
            episode = self.episodes.get(event.episode_id)
            if episode is not None and episode.take(event):
                self.signals[event.episode_id].set()

    async def until(self, episode: Episode, done: Callable[[], bool], timeout_s: float) -> bool:
        signal = self.signals[episode.episode_id]
        try:
            async with asyncio.timeout(timeout_s):
                while not done():
                    signal.clear()
                    await signal.wait()
        except TimeoutError:
            return False
        return True

    # -- the env table ------------------------------------------------------------------

    def create(self) -> int:
        if len(self.envs) >= self.cfg.max_envs:
            raise BadRequest(503, f"{len(self.envs)} envs are open, the most this server "
                                  "allows (WEBGYM_ENVSERVER__MAX_ENVS): close some first")
        self.last_idx = next_env_idx(self.envs, self.last_idx)
        self.envs[self.last_idx] = Env(self.last_idx, time.monotonic())
        return self.last_idx

    def env(self, env_idx: int) -> Env:
        env = self.envs.get(env_idx)
        if env is None:
            raise BadRequest(404, f"unknown env_idx {env_idx} (never created, closed, or "
                                  f"reaped after {self.cfg.idle_timeout_s:g} s idle)")
        if env.busy:
            raise BadRequest(409, f"env {env_idx} is serving another request")
        return env

    async def close(self, env: Env, reason: str) -> None:
        self.envs.pop(env.env_idx, None)
        await self._drop_episode(env, reason)

    async def _drop_episode(self, env: Env, reason: str) -> None:
        episode, env.episode = env.episode, None
        if episode is None:
            return
        self.episodes.pop(episode.episode_id, None)
        self.signals.pop(episode.episode_id, None)
        if running(episode):
            await self.producer.publish(Topic.CONTROL, str(ITERATION), CancelEpisode(
                episode_id=episode.episode_id, iteration=ITERATION, reason=reason))

    async def reap(self) -> None:
        while True:
            await asyncio.sleep(self.cfg.reap_interval_s)
            for env_idx in idle_envs(self.envs.values(), time.monotonic(),
                                     self.cfg.idle_timeout_s):
                log.info("env %d idle for %.0f s: closed", env_idx, self.cfg.idle_timeout_s)
                await self.close(self.envs[env_idx], "env server: idle env reaped")

    # -- reset ----------------------------------------------------------------------------

    async def catalog(self, idx: int) -> Task:
        """The idx-th task. The catalog (the whole of webgym.tasks) is read again only once
        it is `catalog_refresh_s` old, by one reset while the others wait for it: an idx out
        of range is answered from the catalog's size, so a client cannot make the server
        read the topic per request (a task published since is seen at the next refresh)."""
        if self._stale():
            async with self.reading:
                if self._stale():  # not read meanwhile by the reset this one waited for
                    self.tasks = catalog_order(await self.load_tasks())
                    self.tasks_read_at = time.monotonic()
                    self.catalog_reads += 1
        try:
            return task_for_idx(self.tasks, idx)
        except IndexError as err:
            raise BadRequest(400, str(err)) from None

    def _stale(self) -> bool:
        return time.monotonic() - self.tasks_read_at >= self.cfg.catalog_refresh_s

    async def _read_catalog(self) -> list[Task]:
        tasks = await read_compacted(self.settings, Topic.TASKS, self.producer)
        return [t for t in tasks.values() if isinstance(t, Task)]

    async def reset(self, env: Env, idx: int) -> dict[str, Any]:
        task = await self.catalog(idx)
        await self._drop_episode(env, "env server: reset")
        eid = f"env{env.env_idx}-{task.task_id}-{uuid.uuid4().hex[:8]}"
        episode = Episode(eid, task)
        self.episodes[eid], self.signals[eid] = episode, asyncio.Event()
        env.episode = episode
        split = task.split or "train"
        await self.producer.publish(Topic.EPISODES, eid, EpisodeRequested(
            episode_id=eid, task=task, iteration=ITERATION, split=split,
            max_steps=self.cfg.max_steps or task.max_steps or max_steps_for(task.difficulty,
                                                                             split),
            deadline=utc_now() + timedelta(seconds=self.cfg.episode_timeout_s),
            policy_version=POLICY_VERSION, driver=Driver.EXTERNAL))
        reply: dict[str, Any] = {"sites": [task.domain], "object": task.task_name}
        started = await self.until(episode, lambda: episode.current is not None
                                   or episode.completed is not None, self.cfg.reset_timeout_s)
        if episode.current is not None:
            return {**reply, "observation": self.text(episode), "object": episode.intent}
        if not started:
            return {**reply, "observation": "TimeoutError", "error": (
                f"no start page within {self.cfg.reset_timeout_s:g} s (episode {eid}; "
                "GET /observation or step later)")}
        assert episode.completed is not None
        return {**reply, "observation": "Error", "error": (
            f"the episode ended before its start page: {episode.completed.termination} "
            f"{episode.completed.reason or ''}".strip())}

    def text(self, episode: Episode) -> str:
        latest = episode.observations[max(episode.observations)]
        return observation_text(latest, episode.intent, episode.previous_action,
                                self.cfg.max_observation_chars)

    # -- step -----------------------------------------------------------------------------

    async def step(self, env: Env, raw: str) -> dict[str, Any]:
        episode = env.episode
        if episode is None:
            raise BadRequest(409, f"env {env.env_idx} has no episode: POST /reset first")
        if episode.acted == episode.step:  # the last step timed out: its outcome first
            return await self.outcome(episode, late=True)
        if episode.completed is None and not await self.until(
                episode, lambda: episode.current is not None or episode.completed is not None,
                self.cfg.step_timeout_s):
            return failed(f"TimeoutError: no observation of step {episode.step} within "
                          f"{self.cfg.step_timeout_s:g} s")
        if episode.completed is not None:
            return await self.ended(episode)
        obs = episode.current
        assert obs is not None
        marks = {m.index: m for m in obs.marks}
        try:
            text = extract_action(raw)
            action = to_action(text, marks)
        except ActionError as err:
            return failed(str(err))
        await self.producer.publish(Topic.ACTIONS, episode.episode_id, ActionChosen(
            episode_id=episode.episode_id, step=episode.step, action=action,
            action_string=format_action(action), raw_response=raw,
            policy_version=POLICY_VERSION))
        episode.acted = episode.step
        episode.previous_action = describe(text, action, marks)
        return await self.outcome(episode, answered=action.kind == ActionKind.ANSWER.value)

    async def outcome(self, episode: Episode, answered: bool = False,
                      late: bool = False) -> dict[str, Any]:
        """What the action published for `episode.step` led to: the next page, or the end."""
        after = episode.step + 1
        moved = await self.until(episode, lambda: after in episode.observations
                                 or episode.completed is not None, self.cfg.step_timeout_s)
        if after in episode.observations and not answered:
            episode.step = after
            new = episode.observations[after]
            if not new.terminal:
                info = {"episode_id": episode.episode_id, "step": after, "url": new.url,
                        "error": new.error}
                if late:
                    info["late"] = ("this action was not taken: the previous step timed out "
                                    "and this is its observation")
                return {"observation": self.text(episode), "reward": 0.0, "terminated": False,
                        "truncated": False, "info": info}
        if not moved or not await self.until(episode, lambda: episode.completed is not None,
                                             self.cfg.step_timeout_s):
            return failed(f"TimeoutError: the browser did not answer step {episode.step} "
                          f"within {self.cfg.step_timeout_s:g} s")
        return await self.ended(episode)

    async def ended(self, episode: Episode) -> dict[str, Any]:
        assert episode.completed is not None
        await self.until(episode, lambda: episode.scored is not None, self.cfg.score_timeout_s)
        reward, truncated, info = ending(episode.completed, episode.scored)
        observation = self.text(episode) if episode.observations else "Error"
        return {"observation": observation, "reward": reward, "terminated": True,
                "truncated": truncated, "info": {"episode_id": episode.episode_id, **info}}

    def observation(self, env: Env) -> str:
        if env.episode is None or not env.episode.observations:
            return ""
        return self.text(env.episode)


def failed(message: str) -> dict[str, Any]:
    """A step that could not be taken: 200, the error as observation, reward 0 (theirs)."""
    return {"observation": message, "reward": 0.0, "terminated": False, "truncated": False,
            "info": {"error": message}}
