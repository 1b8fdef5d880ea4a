"""What a chaos run left, as `Observed`: its topics (harness.topic_reads) for this run's
prefix, and the sandbox's per-episode post counter.
"""

from __future__ import annotations

from collections import Counter

import httpx

from environments.posts import POSTS_PATH, reference_posts
from harness.outcomes import Completion, Observed
from harness.topic_reads import read_events
from processors.replay_buffer.decisions import sample_id, training_steps
from tests.chaos.scenario import Options, all_tasks
from webgym_common.config import Settings
from webgym_common.events import (
    DeadLetter,
    EpisodeCompleted,
    EpisodeRequested,
    EpisodeScored,
    IterationStarted,
    ReplaySample,
    RolloutMetrics,
    StepObserved,
    TaskHistory,
)
from webgym_common.stream.deadletters import Letter
from webgym_common.topics import Topic


async def sandbox_posts(settings: Settings) -> tuple[dict[str, int], dict[str, int]] | None:
    """The sandbox's form posts per episode, and its re-run ones (None: it cannot say)."""
    try:
        async with httpx.AsyncClient(timeout=10) as client:
            resp = await client.get(settings.sandbox_url + POSTS_PATH)
        body = resp.json() if resp.status_code == 200 else None
        return (dict(body["posts"]), dict(body.get("reruns", {}))) if body else None
    except (httpx.HTTPError, ValueError, KeyError):
        return None


async def observe(settings: Settings, options: Options, injected: set[tuple[str, int, int]],
                  posts_before: tuple[dict[str, int], dict[str, int]]) -> Observed:
    """What the topics (and the sandbox) hold for this run's prefix."""
    obs = Observed()
    tasks = all_tasks()
    obs.expected_posts = {t: reference_posts(tasks[t]["reference_actions"])
                          for t in options.tasks}
    for ev in await read_events(settings, Topic.CONTROL, injected):
        if isinstance(ev, IterationStarted):
            for eid in ev.episode_ids:
                obs.episode_task.setdefault(eid, eid.split("-", 3)[-1])
    for ev in await read_events(settings, Topic.EPISODES, injected):
        if isinstance(ev, EpisodeRequested):
            obs.episode_task[ev.episode_id] = ev.task.task_id
    copies = Counter((ev.episode_id, ev.event_id) for ev in await read_events(
        settings, Topic.OBSERVATIONS, injected) if isinstance(ev, StepObserved))
    for (episode, _), n in copies.items():
        if n > 1:  # one event published again (a resumed episode's steps get new ids)
            obs.resent[episode] = obs.resent.get(episode, 0) + n - 1
    for ev in await read_events(settings, Topic.EPISODES_COMPLETED, injected):
        if isinstance(ev, EpisodeCompleted):
            obs.completed.setdefault(ev.episode_id, []).append(
                Completion(ev.termination, ev.reason))
    if options.replay:
        obs.samples_due = {}
        for ev in await read_events(settings, Topic.REPLAY, injected):
            if isinstance(ev, ReplaySample):
                obs.samples.setdefault(ev.episode_id, []).append(ev.sample_id)
    for ev in await read_events(settings, Topic.EPISODES_SCORED, injected):
        if isinstance(ev, EpisodeScored):
            if obs.samples_due is not None and ev.episode_id not in obs.samples_due:
                obs.samples_due[ev.episode_id] = {sample_id(ev.episode_id, k.step) for k in
                                                  training_steps(ev, settings.replay)}
            obs.scored[ev.episode_id] = obs.scored.get(ev.episode_id, 0) + 1
            obs.scored_task[ev.episode_id] = ev.task_id
            obs.scored_iteration[ev.episode_id] = ev.iteration
    for ev in await read_events(settings, Topic.TASK_HISTORY, injected):
        if isinstance(ev, TaskHistory):  # later offsets are newer: the last one wins
            obs.history[ev.task_id] = (ev.attempts, list(ev.recent_episode_ids))
    for ev in await read_events(settings, Topic.METRICS, injected):
        if isinstance(ev, RolloutMetrics):
            obs.metrics_episodes[ev.iteration] = ev.episodes
    for ev in await read_events(settings, Topic.DLQ, set()):
        if isinstance(ev, DeadLetter) and (
                ev.source_topic, ev.source_partition, ev.source_offset) not in injected:
            obs.dlq.append(Letter.of(ev))
    now = await sandbox_posts(settings)
    if now is not None:
        posts, reruns = ({k: n - before.get(k, 0) for k, n in counts.items()}
                          for counts, before in zip(now, posts_before, strict=True))
        attributed = {k: n for k, n in posts.items() if k and n}
        if attributed or not posts.get(""):
            obs.posts = attributed
        obs.rerun_posts = {k: n for k, n in reruns.items() if n}
    return obs
