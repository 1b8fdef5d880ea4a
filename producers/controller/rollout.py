"""The rollout controller: one iteration = sample, request, follow, cancel stragglers, close.

Everything it knows is in the log, so a restarted controller resumes an unclosed
iteration: IterationStarted names its episodes (ids are deterministic and carry
the task id), requests already on webgym.episodes are not sent again, missing
ones are, and completions and scores are re-read from their topics.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta

from processors.history import load_task_history
from producers.catalog import load_task_catalog
from producers.controller.sampler import sample_tasks
from webgym_common.bus import EventConsumer, EventProducer, read_compacted, read_to_end
from webgym_common.config import Settings
from webgym_common.events import (
    CancelEpisode,
    DomainBlocked,
    EpisodeCompleted,
    EpisodeRequested,
    EpisodeScored,
    IterationClosed,
    IterationStarted,
    ModelVersion,
    Task,
    utc_now,
)
from webgym_common.tasks import max_steps_for
from webgym_common.topics import Topic

TICK_S = 0.5


@dataclass
class IterationState:
    iteration: int
    split: str
    requests: dict[str, EpisodeRequested] = field(default_factory=dict)
    completed: dict[str, EpisodeCompleted] = field(default_factory=dict)
    scored: dict[str, EpisodeScored] = field(default_factory=dict)
    cancelled: dict[str, float] = field(default_factory=dict)  # episode -> when we asked
    started: float = field(default_factory=time.monotonic)
    grace_started: float | None = None

    @property
    def terminations(self) -> Counter:
        return Counter(c.termination for c in self.completed.values())

    @property
    def running(self) -> int:
        return len(self.requests) - len(self.completed)


def episode_id(split: str, iteration: int, index: int, task_id: str) -> str:
    return f"{split}-it{iteration}-{index:04d}-{task_id}"


def task_id_of(eid: str) -> str:
    return eid.split("-", 3)[3]


async def control_history(settings: Settings, producer: EventProducer) -> list:
    async with EventConsumer(settings, [Topic.CONTROL], None, producer,
                             client_id="controller-control") as c:
        return [r.event for r in await read_to_end(c)]


async def next_iteration(settings: Settings, producer: EventProducer, split: str) -> int:
    """The unclosed iteration of this split if there is one, else one past the last started."""
    events = await control_history(settings, producer)
    started = [e.iteration for e in events if isinstance(e, IterationStarted)]
    closed = {(e.iteration, e.split) for e in events if isinstance(e, IterationClosed)}
    for e in events:
        if isinstance(e, IterationStarted) and e.split == split and (
            (e.iteration, split) not in closed
        ):
            return e.iteration
    return max(started, default=-1) + 1


async def blocked_domains(settings: Settings, producer: EventProducer) -> set[str]:
    table = await read_compacted(settings, Topic.BLOCKLIST, producer)
    now = utc_now()
    return {d for d, e in table.items() if isinstance(e, DomainBlocked) and e.blocked_until > now}


async def policy_version(settings: Settings, producer: EventProducer) -> str:
    models = [m for m in (await read_compacted(settings, Topic.MODELS, producer)).values()
              if isinstance(m, ModelVersion)]
    if not models:
        return settings.policy.version
    latest = max(models, key=lambda m: m.produced_at)
    return f"{latest.model_name}:v{latest.version}"


def make_request(settings: Settings, eid: str, task: Task, iteration: int, split: str,
                 version: str) -> EpisodeRequested:
    timeout = timedelta(minutes=settings.rollout.task_timeout_minutes)
    return EpisodeRequested(
        episode_id=eid, task=task, iteration=iteration, split=split,
        max_steps=max_steps_for(task.difficulty, split), deadline=utc_now() + timeout,
        policy_version=version, interaction_mode=settings.rollout.interaction_mode,
    )


async def start_or_resume(settings: Settings, producer: EventProducer, iteration: int,
                          split: str, n: int) -> IterationState:
    state = IterationState(iteration, split)
    catalog = await load_task_catalog(settings, producer)
    version = await policy_version(settings, producer)
    events = await control_history(settings, producer)
    began = next((e for e in events if isinstance(e, IterationStarted)
                  and e.iteration == iteration and e.split == split), None)
    if began is None:
        rng = random.Random(None if settings.rollout.seed is None
                            else settings.rollout.seed * 1000 + iteration)
        tasks = sample_tasks(
            list(catalog.values()), n, split, settings.rollout.strategy,
            history=await load_task_history(settings, producer),
            blocked_domains=await blocked_domains(settings, producer),
            ratios=settings.rollout.ratios, rng=rng,
        )
        ids = [episode_id(split, iteration, i, t.task_id) for i, t in enumerate(tasks)]
        await producer.publish(Topic.CONTROL, str(iteration), IterationStarted(
            iteration=iteration, split=split, tasks_requested=len(ids), episode_ids=ids,
            policy_version=version))
    else:
        ids = list(began.episode_ids)
    async with EventConsumer(settings, [Topic.EPISODES], None, producer,
                             client_id="controller-episodes") as c:
        wanted = set(ids)
        for r in await read_to_end(c):
            if isinstance(r.event, EpisodeRequested) and r.event.episode_id in wanted:
                state.requests.setdefault(r.event.episode_id, r.event)
    for eid in ids:  # none requested twice, none forgotten
        if eid not in state.requests and task_id_of(eid) in catalog:
            req = make_request(settings, eid, catalog[task_id_of(eid)], iteration, split, version)
            await producer.publish(Topic.EPISODES, eid, req)
            state.requests[eid] = req
    return state


async def follow(settings: Settings, producer: EventProducer, state: IterationState,
                 on_update: Callable[[IterationState], None]) -> None:
    """Track completions and scores; cancel timeouts and stragglers; return when closable."""
    cfg = settings.rollout
    topics = [Topic.EPISODES_COMPLETED, Topic.EPISODES_SCORED]
    all_done_at: float | None = None
    async with EventConsumer(settings, topics, None, producer, client_id="controller") as c:
        while True:
            for r in await c.poll(int(TICK_S * 1000)):
                e = r.event
                if getattr(e, "episode_id", None) not in state.requests:
                    continue
                if isinstance(e, EpisodeCompleted):
                    state.completed.setdefault(e.episode_id, e)
                elif isinstance(e, EpisodeScored):
                    state.scored.setdefault(e.episode_id, e)
            now = time.monotonic()
            await cancel_overdue(producer, state, cfg.cancel_wait_s)
            done = len(state.completed) / max(1, len(state.requests))
            if state.grace_started is None and done >= cfg.completion_threshold:
                state.grace_started = now
            if state.grace_started is not None and now - state.grace_started >= cfg.grace_period_s:
                await cancel(producer, state, "straggler after the grace period")
            on_update(state)
            given_up = [e for e, t in state.cancelled.items()
                        if e not in state.completed and now - t > cfg.cancel_wait_s]
            if len(state.completed) + len(given_up) >= len(state.requests):
                all_done_at = all_done_at or now
                scored = all(e in state.scored for e in state.completed)
                if scored or now - all_done_at > cfg.score_wait_s:
                    return


async def cancel_overdue(producer: EventProducer, state: IterationState, slack_s: float) -> None:
    now = utc_now()
    overdue = [e for e, r in state.requests.items() if e not in state.completed
               and e not in state.cancelled and (now - r.deadline).total_seconds() > slack_s]
    for eid in overdue:
        await _cancel_one(producer, state, eid, "task timeout")


async def cancel(producer: EventProducer, state: IterationState, reason: str) -> None:
    for eid in [e for e in state.requests if e not in state.completed
                and e not in state.cancelled]:
        await _cancel_one(producer, state, eid, reason)


async def _cancel_one(producer: EventProducer, state: IterationState, eid: str, reason: str):
    await producer.publish(Topic.CONTROL, str(state.iteration), CancelEpisode(
        episode_id=eid, iteration=state.iteration, reason=reason))
    state.cancelled[eid] = time.monotonic()


def closing_event(state: IterationState) -> IterationClosed:
    t = state.terminations
    never_reported = sum(1 for e in state.cancelled if e not in state.completed)
    return IterationClosed(
        iteration=state.iteration, split=state.split, requested=len(state.requests),
        completed=len(state.completed), crashed=t["crashed"], blocked=t["blocked"],
        cancelled=t["cancelled"] + never_reported, timed_out=t["timeout"],
        wall_time_s=time.monotonic() - state.started,
    )


async def run_iteration(settings: Settings, producer: EventProducer, iteration: int, split: str,
                        n: int, on_update: Callable[[IterationState], None] = lambda s: None,
                        ) -> tuple[IterationState, IterationClosed]:
    state = await start_or_resume(settings, producer, iteration, split, n)
    await follow(settings, producer, state, on_update)
    closed = closing_event(state)
    await producer.publish(Topic.CONTROL, str(iteration), closed)
    return state, closed
