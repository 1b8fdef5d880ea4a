"""The evaluator (faust): completed episodes in, exactly one EpisodeScored each out.

Remember each episode's task (webgym.episodes) and steps (webgym.observations,
webgym.actions) in changelog-backed tables; these topics and
webgym.episodes.completed are co-partitioned by episode_id, so the worker that
owns an episode's completion also owns its state. On EpisodeCompleted: wait
briefly for the trajectory's last events (they travel on other topics), decide
the reward (the rules, or the LLM judge: reward.py), publish EpisodeScored and,
for a blocked domain, DomainBlocked, then forget the episode's steps.

Exactly once: each input event's table changes and outputs commit in the same
Kafka transaction as its offset (outbox.py), so a killed evaluator redoes only
what it had not committed, and readers never see the aborted attempt. A replayed
or duplicated EpisodeCompleted finds its episode in the `scored` table (kept
after the rest of the episode's state is deleted) and publishes nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta
from typing import Any

import faust

from processors.evaluator.judge import make_judge
from processors.evaluator.outbox import Effects, Outbox, rewind_uncommitted
from processors.evaluator.reward import RULES_VERSION, Judgement, evaluate
from processors.evaluator.trajectory import (
    Episode,
    action_record,
    build_episode,
    expected_parts,
    observation_record,
    request_record,
    step_key,
    steps_in,
    trajectory_steps,
)
from webgym_common.codec import Codec, DecodeError
from webgym_common.config import Settings
from webgym_common.events import (
    ActionChosen,
    DeadLetter,
    DomainBlocked,
    EpisodeCompleted,
    EpisodeRequested,
    EpisodeScored,
    StepObserved,
    utc_now,
)
from webgym_common.faust_app import make_faust_app
from webgym_common.topics import Topic, topic_name

log = logging.getLogger(__name__)


def build_app(settings: Settings) -> faust.App:
    k, cfg = settings.kafka, settings.evaluator
    app = make_faust_app(settings, "evaluator", processing_guarantee=cfg.processing_guarantee)
    codec = Codec()
    judge = make_judge(settings)
    version = judge.version if judge is not None else RULES_VERSION
    outbox = Outbox(app, k.request_timeout_ms / 1000)
    names = {t: topic_name(k, t) for t in Topic}
    sources = {Topic.EPISODES, Topic.OBSERVATIONS, Topic.ACTIONS, Topic.EPISODES_COMPLETED}

    def topic(t: Topic) -> faust.TopicT:
        return app.topic(names[t], key_type=bytes, value_type=bytes, partitions=k.partitions)

    def table(name: str) -> faust.Table:
        # JSON keys and values: they must read back as the same str/dict after recovery.
        return app.Table(name, partitions=k.partitions, schema=faust.Schema(
            key_type=str, key_serializer="json", value_serializer="json"))

    episodes, observations = topic(Topic.EPISODES), topic(Topic.OBSERVATIONS)
    actions, completed = topic(Topic.ACTIONS), topic(Topic.EPISODES_COMPLETED)
    requests = table("requests")  # episode_id -> the task and request facts
    observed = table("observations")  # "episode_id/step" -> the first observation
    acted = table("actions")  # "episode_id/step" -> the first action
    scored = table("scored")  # episode_id -> when it was scored (ms)
    scoring_now: set[str] = set()  # being scored by an actor of this process
    arrivals = asyncio.Condition()  # notified whenever a task or step is remembered

    @app.on_rebalance_complete.connect
    async def rewind(sender: faust.App, **kwargs: Any) -> None:
        await rewind_uncommitted(app, {names[t] for t in sources})

    def decode(event: faust.EventT, effects: Effects) -> Any | None:
        try:
            return codec.decode(event.value)
        except DecodeError as err:
            dead_letter(event, str(err), effects)
            return None

    def dead_letter(event: faust.EventT, error: str, effects: Effects) -> None:
        msg = event.message
        letter = DeadLetter(source_topic=msg.topic, source_partition=msg.partition,
                            source_offset=msg.offset, source_key=msg.key,
                            raw_value=msg.value or b"", error=error, consumer_group=app.conf.id)
        effects.publish(names[Topic.DLQ], msg.topic, codec.encode(letter))
        log.warning("dead-lettered %s[%d]@%d: %s", msg.topic, msg.partition, msg.offset, error)

    async def remember(stream: faust.StreamT, collect: Any) -> None:
        """Fold a state topic into the tables: `collect(decoded, effects)` says what to write."""
        async for event in stream.events():
            ticket, effects = outbox.arrived(event), Effects()
            decoded = decode(event, effects)
            eid = getattr(decoded, "episode_id", None)
            if eid is not None and eid not in scored:
                collect(decoded, effects)
            await outbox.commit(ticket, effects)
            if effects.writes:
                async with arrivals:
                    arrivals.notify_all()

    # -- remember each episode's task and steps ---------------------------------------

    @app.agent(episodes)
    async def remember_tasks(stream: faust.StreamT) -> None:
        def collect(req: Any, effects: Effects) -> None:
            if isinstance(req, EpisodeRequested) and req.episode_id not in requests:
                effects.put(requests, req.episode_id, request_record(req))
        await remember(stream, collect)

    @app.agent(observations)
    async def remember_observations(stream: faust.StreamT) -> None:
        def collect(obs: Any, effects: Effects) -> None:
            key = step_key(obs.episode_id, obs.step) if isinstance(obs, StepObserved) else None
            if key is not None and key not in observed:  # resumed episodes re-publish steps
                effects.put(observed, key, observation_record(obs, cfg.page_text_chars))
        await remember(stream, collect)

    @app.agent(actions)
    async def remember_actions(stream: faust.StreamT) -> None:
        def collect(chosen: Any, effects: Effects) -> None:
            key = step_key(chosen.episode_id, chosen.step) if isinstance(
                chosen, ActionChosen) else None
            if key is not None and key not in acted:
                effects.put(acted, key, action_record(chosen))
        await remember(stream, collect)

    # -- score each completed episode once ------------------------------------------

    @app.agent(completed, concurrency=cfg.max_inflight)
    async def score(stream: faust.StreamT) -> None:
        async for event in stream.events():
            ticket, effects = outbox.arrived(event), Effects()
            done, mine = decode(event, effects), False
            eid = getattr(done, "episode_id", None)
            if done is not None and not isinstance(done, EpisodeCompleted):
                dead_letter(event, f"expected EpisodeCompleted, got {type(done).__name__}",
                            effects)
            elif isinstance(done, EpisodeCompleted) and not (eid in scored or eid in scoring_now):
                scoring_now.add(done.episode_id)  # (else: a replay or duplicate: skipped)
                mine = True
                try:
                    await score_episode(done, effects)
                except Exception as err:  # a bug in judging one episode must not stop the rest
                    log.exception("cannot score %s", done.episode_id)
                    effects = Effects()
                    dead_letter(event, f"evaluator error: {type(err).__name__}: {err}", effects)
            try:
                await outbox.commit(ticket, effects)  # sets `scored` as it publishes the score
            finally:
                if mine:
                    scoring_now.discard(eid)

    async def score_episode(done: EpisodeCompleted, effects: Effects) -> None:
        episode = await gather_episode(done)
        judgement = await evaluate(episode, judge, cfg.max_screenshots, cfg.blocking_sample)
        publish_outputs(done, episode, judgement, effects)
        effects.put(scored, done.episode_id, int(time.time() * 1000))
        for steps in (observed, acted):  # the episode's state goes, its `scored` mark stays
            for step in steps_in(steps, done):
                effects.delete(steps, step_key(done.episode_id, step))
        if done.episode_id in requests:
            effects.delete(requests, done.episode_id)
        log.info("scored %s: reward %.0f, %s%s", done.episode_id, judgement.reward,
                 done.termination, " (blocked)" if judgement.is_blocked else "")

    async def gather_episode(done: EpisodeCompleted) -> Episode:
        """The episode as the tables hold it, once its expected steps are there (or time's up)."""
        eid = done.episode_id
        want_observed, want_acted = expected_parts(done)

        def missing() -> bool:
            return (eid not in requests
                    or any(step_key(eid, s) not in observed for s in want_observed)
                    or any(step_key(eid, s) not in acted for s in want_acted))

        try:
            async with asyncio.timeout(cfg.trajectory_wait_s), arrivals:
                await arrivals.wait_for(lambda: not missing())
        except TimeoutError:
            log.warning("episode %s: judged without part of its trajectory", eid)
        return build_episode(done, requests.get(eid), steps_in(observed, done),
                             steps_in(acted, done))

    def publish_outputs(done: EpisodeCompleted, episode: Episode, j: Judgement,
                        effects: Effects) -> None:
        domain = episode.task.domain
        effects.publish(names[Topic.EPISODES_SCORED], done.episode_id, codec.encode(EpisodeScored(
            episode_id=done.episode_id, task_id=episode.task.task_id, domain=domain or "unknown",
            iteration=done.iteration, split=done.split, reward=j.reward,
            evaluation=j.evaluation, is_blocked=j.is_blocked, crashed=j.crashed,
            submit=j.submit, submission_judgment=j.submission_judgment, answer=done.answer,
            termination=done.termination, steps=done.steps,
            trajectory=trajectory_steps(episode), evaluator_version=version,
            policy_version=episode.policy_version,
        )))
        if j.is_blocked and domain:
            effects.publish(names[Topic.BLOCKLIST], domain, codec.encode(DomainBlocked(
                domain=domain, blocked_until=utc_now() + timedelta(hours=cfg.blocklist_hours),
                reason=episode.reason or j.evaluation.splitlines()[0],
                episode_id=done.episode_id,
            )))

    return app


def run_evaluator_worker(settings: Settings) -> None:
    """Run the faust worker in the foreground until SIGTERM/SIGINT."""
    app = build_app(settings)
    worker = faust.Worker(app, loglevel="INFO", quiet=True)
    worker.execute_from_commandline()
