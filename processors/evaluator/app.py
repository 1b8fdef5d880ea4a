"""The evaluator (faust): completed episodes in, exactly one EpisodeScored each out.

Exactly once: each input event's table changes and outputs commit in the same
Kafka transaction as its offset (outbox.py), so a killed evaluator redoes only
what it had not committed, and readers never see the aborted attempt. A replayed
or duplicated EpisodeCompleted finds its episode in the `scored` table (kept
after the rest of the episode's state is deleted) and publishes nothing.

Remember each episode's task (webgym.episodes) and steps (webgym.observations,
webgym.actions) in changelog-backed tables; these topics and
webgym.episodes.completed are co-partitioned by episode_id, so the worker that
owns an episode's completion also owns its state. On EpisodeCompleted: refuse
absurd ones (dead letter: a step count out of bounds, an unknown episode), wait
until its parts are in the tables or can no longer arrive (catchup.py: the agents
folding the other topics have read past the completion; a partial trajectory
says so in its evaluation), decide the reward (the rules, the LLM judge, or a
self-scoring page's own reward: reward.py; a judge that keeps failing makes a judge
failure, not a 0), publish EpisodeScored (keyed by task_id) and, for a blocked domain,
DomainBlocked, then forget the episode's steps. The decisions are in decisions.py.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import faust

from processors.evaluator.catchup import CatchUp, Moved
from processors.evaluator.decisions import (
    Entry,
    already_scored,
    blocked_event,
    collect_action,
    collect_observation,
    collect_request,
    completion_error,
    forget_episode,
    missing_parts,
    partial_note,
    scored_event,
    scored_key,
    trajectory_error,
)
from processors.evaluator.judge import make_judge
from processors.evaluator.outbox import Effects, Outbox, rewind_uncommitted
from processors.evaluator.reward import PAGE_VERSION, RULES_VERSION, evaluate, scored_by_page
from processors.evaluator.trajectory import build_episode, steps_in
from webgym_common.codec import Codec
from webgym_common.config import Settings
from webgym_common.deadletters import dead_letter
from webgym_common.events import EpisodeCompleted, Event, utc_now
from webgym_common.faust_app import (
    FirstReads,
    decode_error,
    faust_table,
    faust_topic,
    make_faust_app,
)
from webgym_common.topics import Group, StateTable, Topic, topic_name

log = logging.getLogger(__name__)


def build_app(settings: Settings) -> faust.App:
    k, cfg = settings.kafka, settings.evaluator
    app = make_faust_app(settings, Group.EVALUATOR,
                         processing_guarantee=cfg.processing_guarantee)
    codec, judge = Codec(), make_judge(settings)
    version = judge.version if judge is not None else RULES_VERSION
    sources = [Topic.EPISODES, Topic.OBSERVATIONS, Topic.ACTIONS, Topic.EPISODES_COMPLETED]
    episodes, observations, actions, completed = (faust_topic(app, k, t) for t in sources)
    requests, observed, acted, scored = (faust_table(app, k, t) for t in (
        StateTable.REQUESTS, StateTable.OBSERVATIONS, StateTable.ACTIONS, StateTable.SCORED))
    scoring_now: set[str] = set()  # being scored by an actor of this process
    catchup = CatchUp(app, settings, [topic_name(k, t) for t in sources[:3]])
    first_reads = FirstReads(app)

    @app.on_rebalance_complete.connect
    async def rewind(*args: Any, **kwargs: Any) -> None:
        catchup.forget()
        first_reads.starting_at(await rewind_uncommitted(app, {topic_name(k, t) for t in sources}))

    @app.on_before_shutdown.connect
    async def stop(*args: Any, **kwargs: Any) -> None:
        await catchup.offsets.stop()

    def emit(effects: Effects, topic: Topic, key: str, event: Event) -> None:
        effects.publish(topic_name(k, topic), key, codec.encode(event))

    def rejected(event: faust.EventT, error: str) -> Effects:
        """The effects of an event nobody can handle: its dead letter, nothing else."""
        effects, letter = Effects(), dead_letter(event.message, error, app.conf.id)
        emit(effects, Topic.DLQ, letter.source_topic, letter)
        return effects

    outbox = Outbox(app, k.request_timeout_ms / 1000, k.max_request_size, rejected)

    async def remember(stream: faust.StreamT, table: faust.Table,
                       collect: Callable[[Any], Entry | None]) -> None:
        """Fold a state topic into a table: `collect(event)` says what to put there."""
        async for event in stream.events():
            if await first_reads.check(event):
                continue  # it comes again after its partition's start (see FirstReads)
            ticket, effects = outbox.arrived(event), Effects()
            if (error := decode_error(event)) is not None:
                effects = rejected(event, error)
            elif (entry := collect(event.value)) is not None:
                effects.put(table, *entry)
            await outbox.commit(ticket, effects)
            await catchup.handled(event)

    @app.agent(episodes)
    async def remember_tasks(stream: faust.StreamT) -> None:
        await remember(stream, requests, lambda e: collect_request(e, requests, scored))

    @app.agent(observations)
    async def remember_observations(stream: faust.StreamT) -> None:
        await remember(stream, observed, lambda e: collect_observation(
            e, observed, scored, cfg.page_text_chars))

    @app.agent(actions)
    async def remember_actions(stream: faust.StreamT) -> None:
        await remember(stream, acted, lambda e: collect_action(e, acted, scored))

    @app.agent(completed, concurrency=cfg.max_inflight)
    async def score(stream: faust.StreamT) -> None:
        async for event in stream.events():
            if await first_reads.check(event):
                continue  # it comes again after its partition's start (see FirstReads)
            ticket, done = outbox.arrived(event), event.value
            if (error := decode_error(event) or completion_error(done)) is not None:
                await outbox.commit(ticket, rejected(event, error))
            elif already_scored(done, scored, scoring_now):
                await outbox.commit(ticket, Effects())  # a replay or a duplicate: nothing
            else:
                scoring_now.add(done.episode_id)
                try:  # the commit sets `scored` as it publishes the score
                    await outbox.commit(ticket, await score_or_reject(event, done))
                finally:
                    scoring_now.discard(done.episode_id)

    async def score_or_reject(event: faust.EventT, done: EpisodeCompleted) -> Effects:
        effects = Effects()
        try:
            why_partial = await catchup.wait(event.message.tp, lambda: missing_parts(
                done, requests, observed, acted))
            if (error := trajectory_error(done, requests.get(done.episode_id))) is not None:
                return rejected(event, error)
            await score_episode(done, effects, why_partial)
        except Moved as moved:  # the partition's new owner handles the event again
            log.info("episode %s: %s", done.episode_id, moved)
            return Effects()
        except Exception as err:  # a bug in judging one episode must not stop the rest
            log.exception("cannot score %s", done.episode_id)
            return rejected(event, f"evaluator error: {type(err).__name__}: {err}")
        return effects

    async def score_episode(done: EpisodeCompleted, effects: Effects,
                            why_partial: str | None) -> None:
        note = None
        if why_partial is not None:
            note = partial_note(missing_parts(done, requests, observed, acted), why_partial)
            log.warning("episode %s: %s", done.episode_id, note)
        episode = build_episode(done, requests.get(done.episode_id), steps_in(observed, done),
                                steps_in(acted, done))
        judgement = await evaluate(episode, judge, cfg.max_screenshots, cfg.blocking_sample)
        result = scored_event(done, episode, judgement,
                              PAGE_VERSION if scored_by_page(episode) else version, note)
        emit(effects, Topic.EPISODES_SCORED, scored_key(result), result)
        blocked = blocked_event(done, episode, judgement, timedelta(hours=cfg.blocklist_hours),
                                utc_now())
        if blocked is not None:
            emit(effects, Topic.BLOCKLIST, blocked.domain, blocked)
        effects.put(scored, done.episode_id, int(time.time() * 1000))
        for table, key in forget_episode(done, requests, observed, acted):
            effects.delete(table, key)
        log.info("scored %s: reward %.0f, %s%s", done.episode_id, judgement.reward,
                 done.termination, " (blocked)" if judgement.is_blocked else
                 " (judge failed)" if judgement.judge_failed else "")

    return app


def run_evaluator_worker(settings: Settings) -> None:
    """Run the faust worker in the foreground until SIGTERM/SIGINT."""
    app = build_app(settings)
    worker = faust.Worker(app, loglevel="INFO", quiet=True)
    worker.execute_from_commandline()
