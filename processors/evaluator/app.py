"""The evaluator (faust): completed episodes in, exactly one EpisodeScored each out.

Remember each episode's task (webgym.episodes) and steps (webgym.observations,
webgym.actions) in changelog-backed tables; these topics and
webgym.episodes.completed are co-partitioned by episode_id, so the worker that
owns an episode's completion also owns its state. On EpisodeCompleted: wait
briefly for the trajectory's last events (they travel on other topics), decide
the reward (the rules, or the LLM judge: reward.py), publish EpisodeScored and,
for a blocked domain, DomainBlocked, then forget the episode's steps.

Exactly once: the outputs commit in the same Kafka transaction as the input's
offset (outbox.py), so a killed evaluator re-scores only what it had not
committed and readers never see the aborted attempt. A replayed or duplicated
EpisodeCompleted finds its episode in the `scored` table and publishes nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import timedelta
from typing import Any

import faust

from processors.evaluator.judge import make_judge
from processors.evaluator.outbox import Outbox, Record
from processors.evaluator.reward import RULES_VERSION, Judgement, evaluate
from processors.evaluator.trajectory import (
    Episode,
    action_record,
    build_episode,
    expected_parts,
    observation_record,
    request_record,
    step_key,
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
from webgym_common.topics import Topic, topic_name

log = logging.getLogger(__name__)


def build_app(settings: Settings) -> faust.App:
    k, cfg = settings.kafka, settings.evaluator
    app = faust.App(
        f"{k.topic_prefix}-evaluator",
        broker=f"kafka://{k.bootstrap_servers}",
        store="memory://",
        processing_guarantee=cfg.processing_guarantee,
        topic_partitions=k.partitions,
        topic_replication_factor=k.replication_factor,
        web_enabled=False,
        consumer_auto_offset_reset="earliest",
        broker_session_timeout=k.session_timeout_ms / 1000,
        broker_heartbeat_interval=k.heartbeat_interval_ms / 1000,
        producer_acks=-1,
        producer_compression_type=None if k.compression == "none" else k.compression,
        key_serializer="raw",
        value_serializer="raw",
    )
    codec = Codec()
    judge = make_judge(settings)
    version = judge.version if judge is not None else RULES_VERSION
    outbox = Outbox(app, k.request_timeout_ms / 1000)
    names = {t: topic_name(k, t) for t in Topic}

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

    async def decode(event: faust.EventT) -> Any | None:
        try:
            return codec.decode(event.value)
        except DecodeError as err:
            await dead_letter(event, str(err))
            return None

    async def dead_letter(event: faust.EventT, error: str) -> None:
        msg = event.message
        letter = DeadLetter(source_topic=msg.topic, source_partition=msg.partition,
                            source_offset=msg.offset, source_key=msg.key,
                            raw_value=msg.value or b"", error=error, consumer_group=app.conf.id)
        dlq = Record(names[Topic.DLQ], msg.topic.encode(), codec.encode(letter))
        await outbox.publish_and_ack(event, [dlq])
        log.warning("dead-lettered %s[%d]@%d: %s", msg.topic, msg.partition, msg.offset, error)

    # -- remember each episode's task and steps ---------------------------------------

    @app.agent(episodes)
    async def remember_tasks(stream: faust.StreamT) -> None:
        async for event in stream.events():
            req = await decode(event)
            if isinstance(req, EpisodeRequested) and req.episode_id not in scored:
                requests[req.episode_id] = request_record(req)
                await note_arrival()

    @app.agent(observations)
    async def remember_observations(stream: faust.StreamT) -> None:
        async for event in stream.events():
            obs = await decode(event)
            if isinstance(obs, StepObserved) and obs.episode_id not in scored:
                key = step_key(obs.episode_id, obs.step)
                if key not in observed:  # a resumed episode re-publishes its steps
                    observed[key] = observation_record(obs, cfg.page_text_chars)
                    await note_arrival()

    @app.agent(actions)
    async def remember_actions(stream: faust.StreamT) -> None:
        async for event in stream.events():
            chosen = await decode(event)
            if isinstance(chosen, ActionChosen) and chosen.episode_id not in scored:
                key = step_key(chosen.episode_id, chosen.step)
                if key not in acted:
                    acted[key] = action_record(chosen)
                    await note_arrival()

    # -- score each completed episode once ------------------------------------------

    @app.agent(completed, concurrency=cfg.max_inflight)
    async def score(stream: faust.StreamT) -> None:
        async for event in stream.events():
            done = await decode(event)
            if done is not None and not isinstance(done, EpisodeCompleted):
                await dead_letter(event, f"expected EpisodeCompleted, got {type(done).__name__}")
            if not isinstance(done, EpisodeCompleted):
                continue
            if done.episode_id in scored or done.episode_id in scoring_now:
                continue  # a replay or a duplicate: this episode has (or is getting) its score
            scoring_now.add(done.episode_id)
            try:
                try:
                    episode = await gather_episode(done)
                    judgement = await evaluate(episode, judge, cfg.max_screenshots,
                                               cfg.blocking_sample)
                except Exception as err:  # a bug in judging one episode must not stop the rest
                    log.exception("cannot score %s", done.episode_id)
                    await dead_letter(event, f"evaluator error: {type(err).__name__}: {err}")
                    continue
                await outbox.publish_and_ack(event, outputs(done, episode, judgement))
                scored[done.episode_id] = int(time.time() * 1000)
                forget(done)
                log.info("scored %s: reward %.0f, %s%s", done.episode_id, judgement.reward,
                         done.termination, " (blocked)" if judgement.is_blocked else "")
            finally:
                scoring_now.discard(done.episode_id)

    async def note_arrival() -> None:
        async with arrivals:
            arrivals.notify_all()

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
        return build_episode(done, requests.get(eid), steps_of(observed, done),
                             steps_of(acted, done))

    def steps_of(steps: faust.Table, done: EpisodeCompleted) -> dict[int, dict[str, Any]]:
        """The episode's records in `steps`: 0 .. its ANSWER step, and on while there are more."""
        out, step = {}, 0
        while step <= done.steps + 1 or step_key(done.episode_id, step) in steps:
            if (record := steps.get(step_key(done.episode_id, step))) is not None:
                out[step] = record
            step += 1
        return out

    def forget(done: EpisodeCompleted) -> None:
        for steps in (observed, acted):
            for step in steps_of(steps, done):
                del steps[step_key(done.episode_id, step)]
        if done.episode_id in requests:
            del requests[done.episode_id]

    def outputs(done: EpisodeCompleted, episode: Episode, j: Judgement) -> list[Record]:
        domain = episode.task.domain
        event = EpisodeScored(
            episode_id=done.episode_id, task_id=episode.task.task_id, domain=domain or "unknown",
            iteration=done.iteration, split=done.split, reward=j.reward,
            evaluation=j.evaluation, is_blocked=j.is_blocked, crashed=j.crashed,
            submit=j.submit, submission_judgment=j.submission_judgment, answer=done.answer,
            termination=done.termination, steps=done.steps,
            trajectory=trajectory_steps(episode), evaluator_version=version,
            policy_version=episode.policy_version,
        )
        records = [Record(names[Topic.EPISODES_SCORED], done.episode_id.encode(),
                          codec.encode(event))]
        if j.is_blocked and domain:
            blocked = DomainBlocked(
                domain=domain, blocked_until=utc_now() + timedelta(hours=cfg.blocklist_hours),
                reason=episode.reason or j.evaluation.splitlines()[0],
                episode_id=done.episode_id,
            )
            records.append(Record(names[Topic.BLOCKLIST], domain.encode(),
                                  codec.encode(blocked)))
        return records

    return app


def run_evaluator_worker(settings: Settings) -> None:
    """Run the faust worker in the foreground until SIGTERM/SIGINT."""
    app = build_app(settings)
    worker = faust.Worker(app, loglevel="INFO", quiet=True)
    worker.execute_from_commandline()
