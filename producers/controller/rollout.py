"""The rollout controller: one iteration = sample, request, follow, cancel stragglers, close.

Delivery: everything it knows is in the log, and what it publishes is safe to
publish again. A restarted controller resumes an unclosed iteration:
IterationStarted names its episodes (ids are deterministic and carry the task id),
requests already on webgym.episodes are not sent again, missing ones are (all at once, or
with `rollout.iteration_window` that many in flight, each deadline counted from its own
request), and completions and scores are re-read from their topics. The rules it follows are
the pure functions of producers.controller.iteration.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from datetime import timedelta

from producers.catalog import load_task_catalog
from producers.controller.iteration import (
    IterationState,
    Pending,
    active_blocks,
    all_accounted,
    closing_event,
    demonstration_id,
    demonstration_tasks,
    episode_id,
    first_training_iteration,
    grace_begins,
    grace_over,
    iteration_to_run,
    latest_policy_version,
    make_request,
    missing_requests,
    overdue,
    releasable,
    scores_in,
    served_version,
    started_event,
    task_id_of,
    track,
    unfinished,
)
from producers.controller.sampler import sample_tasks, with_attempts
from webgym_common.config import Settings
from webgym_common.events import (
    CancelEpisode,
    EpisodeRequested,
    Event,
    IterationClosed,
    IterationStarted,
    utc_now,
)
from webgym_common.history import load_task_history
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.stream.readers import read_compacted, read_to_end
from webgym_common.topics import Topic

TICK_S = 0.5


async def control_history(settings: Settings, producer: EventProducer) -> list[Event]:
    async with EventConsumer(settings, [Topic.CONTROL], None, producer,
                             client_id="controller-control") as c:
        return [r.event for r in await read_to_end(c)]


async def next_iteration(settings: Settings, producer: EventProducer, split: str) -> int:
    """The unclosed iteration of this split if there is one, else one past the last started."""
    return iteration_to_run(await control_history(settings, producer), split)


async def blocked_domains(settings: Settings, producer: EventProducer) -> set[str]:
    return active_blocks(await read_compacted(settings, Topic.BLOCKLIST, producer), utc_now())


async def policy_version(settings: Settings, producer: EventProducer) -> str:
    served = (await read_compacted(settings, Topic.MODELS_SERVED, producer)).values()
    return latest_policy_version(served, settings.trainer.model_name, settings.policy.version)


async def served_now(settings: Settings, producer: EventProducer) -> int:
    """The newest version of the trained model the model server serves (0: the base)."""
    served = (await read_compacted(settings, Topic.MODELS_SERVED, producer)).values()
    return served_version(served, settings.trainer.model_name)


async def wait_for_version(settings: Settings, producer: EventProducer, needed: int,
                           on_wait: Callable[[str], None] = lambda _: None) -> int:
    """Block until the model server serves version `needed` of the trained model (the loop's
    staleness bound); returns the version served. Gives up with an error after the longest a
    training run, its replay catch-up and the load may take."""
    t = settings.trainer
    load_s = settings.model_loader.load_timeout_s
    give_up = time.monotonic() + t.run_timeout_s + t.replay_wait_s + load_s
    async with EventConsumer(settings, [Topic.MODELS_SERVED], None, producer,
                             client_id="controller-models") as c:
        served = [r.event for r in await read_to_end(c)]
        while (version := served_version(served, t.model_name)) < needed:
            if time.monotonic() > give_up:
                raise TimeoutError(f"version {needed} of {t.model_name} was not served in time "
                                   f"(serving v{version}): is the trainer or model loader down?")
            on_wait(f"waiting for {t.model_name} v{needed} (serving v{version}): "
                    "training, then hot-loading")
            served += [r.event for r in await c.poll(int(TICK_S * 1000))]
    return version


async def start_or_resume(settings: Settings, producer: EventProducer, iteration: int,
                          split: str, n: int) -> IterationState:
    state = IterationState(iteration, split)
    catalog = await load_task_catalog(settings, producer)
    version = await policy_version(settings, producer)
    control = await control_history(settings, producer)
    began = started_event(control, iteration, split)
    if began is None:
        rng = random.Random(None if settings.rollout.seed is None
                            else settings.rollout.seed * 1000 + iteration)
        cfg = settings.rollout
        attempts = cfg.attempts_per_task if split == "train" else 1
        tasks = with_attempts(sample_tasks(
            list(catalog.values()), math.ceil(n / attempts), split, cfg.strategy,
            history=await load_task_history(settings, producer),
            blocked_domains=await blocked_domains(settings, producer),
            ratios=cfg.ratios, rng=rng, train_pool=cfg.train_pool,
        ), attempts, n)
        ids = [episode_id(split, iteration, i, t.task_id) for i, t in enumerate(tasks)]
        if split == "train" and settings.rollout.demonstrations and first_training_iteration(
                control, iteration):
            demos = demonstration_tasks(list(catalog.values()),
                                        settings.rollout.demonstrations, rng)
            ids += [demonstration_id(split, iteration, i, t.task_id)
                    for i, t in enumerate(demos)]
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
    budget = timedelta(minutes=settings.rollout.task_timeout_minutes)
    for eid in missing_requests(ids, state.requests, catalog):
        req = make_request(settings, eid, catalog[task_id_of(eid)], iteration, split, version)
        if settings.rollout.iteration_window is not None:
            state.pending[eid] = Pending(req, budget)  # requested by `follow`, a window at a time
        else:
            await producer.publish(Topic.EPISODES, eid, req)
            state.requests[eid] = req
    return state


async def release(producer: EventProducer, state: IterationState, window: int) -> None:
    """Request pending episodes while fewer than `window` are in flight, each with its
    deadline from now (evaluations and the bank: hundreds of episodes, a few contexts)."""
    for eid in releasable(state, window):
        pending = state.pending.pop(eid)
        req = pending.request.model_copy(update={"deadline": utc_now() + pending.budget})
        await producer.publish(Topic.EPISODES, eid, req)
        state.requests[eid] = req


async def follow(settings: Settings, producer: EventProducer, state: IterationState,
                 on_update: Callable[[IterationState], None], window: int | None = None,
                 ) -> None:
    """Track completions and scores; request pending episodes as others finish (at most
    `window` in flight, by default `rollout.request_window`); cancel timeouts and
    stragglers; return when closable."""
    cfg = settings.rollout
    window = window or cfg.request_window
    topics = [Topic.EPISODES_COMPLETED, Topic.EPISODES_SCORED]
    accounted_at: float | None = None
    async with EventConsumer(settings, topics, None, producer, client_id="controller") as c:
        while True:
            await release(producer, state, window)
            # consume
            for r in await c.poll(int(TICK_S * 1000)):
                track(state, r.event)
            # decide and publish
            now = time.monotonic()
            for eid in overdue(state, utc_now(), cfg.cancel_wait_s):
                await cancel_one(producer, state, eid, "task timeout")
            if grace_begins(state, cfg.completion_threshold):
                state.grace_started = now
            if grace_over(state, now, cfg.grace_period_s):
                for eid in unfinished(state):
                    await cancel_one(producer, state, eid, "straggler after the grace period")
            on_update(state)
            if all_accounted(state, now, cfg.cancel_wait_s):
                accounted_at = accounted_at or now
                if scores_in(state, now, accounted_at, cfg.score_wait_s):
                    return


async def requests_outside_iterations(settings: Settings, producer: EventProducer,
                                      iteration: int) -> dict[str, EpisodeRequested]:
    """The episodes of a pseudo-iteration (evaluations: -1, the demonstration bank: -2)
    requested so far, by id (webgym.episodes read once to its end; the first copy wins)."""
    async with EventConsumer(settings, [Topic.EPISODES], None, producer,
                             client_id="requested-episodes") as c:
        return {r.event.episode_id: r.event for r in reversed(await read_to_end(c))
                if isinstance(r.event, EpisodeRequested) and r.event.iteration == iteration}


async def cancel_one(producer: EventProducer, state: IterationState, eid: str,
                     reason: str) -> None:
    await producer.publish(Topic.CONTROL, str(state.iteration), CancelEpisode(
        episode_id=eid, iteration=state.iteration, reason=reason))
    state.cancelled[eid] = time.monotonic()


async def run_iteration(settings: Settings, producer: EventProducer, iteration: int, split: str,
                        n: int, on_update: Callable[[IterationState], None] = lambda s: None,
                        ) -> tuple[IterationState, IterationClosed]:
    state = await start_or_resume(settings, producer, iteration, split, n)
    await follow(settings, producer, state, on_update, settings.rollout.iteration_window)
    closed = closing_event(state)
    await producer.publish(Topic.CONTROL, str(iteration), closed)
    return state, closed
