"""The evaluator (faust): completed episodes in, exactly one EpisodeScored each out.

Delivery: exactly once. Each input event's effects (records, table writes, a refusal) commit
in one Kafka transaction with its offset (outbox.py): a killed evaluator redoes what it had
not committed, and readers never see the aborted attempt. A replayed or duplicated completion
finds its episode in the `scored` table (kept after the rest) and publishes nothing.

webgym.episodes, webgym.observations, webgym.actions → `on_part`: fold each episode's
task and steps into changelog-backed tables (co-partitioned by episode id, so the worker
that owns an episode's completion also owns its state);
webgym.episodes.completed → `on_completion`: refuse absurd ones (dead letter: a step
count out of bounds, an unknown episode), wait until its parts are in the tables or can
no longer arrive (catchup.py; a partial trajectory says so in its evaluation), score it
(scoring.py: the rules, the LLM judge or a self-scoring page's own reward; a judge that
keeps failing makes a judge failure, not a 0) → webgym.episodes.scored (keyed by task
id) and, for a blocked domain, webgym.blocklist; then forget the episode's steps.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import faust

from processors.evaluator.catchup import CatchUp
from processors.evaluator.decisions import (
    Entry,
    already_scored,
    collect_action,
    collect_observation,
    collect_request,
    completion_error,
)
from processors.evaluator.outbox import Outbox, TableWrites
from processors.evaluator.scoring import Evaluator, Tables, make_scorer, score_or_reject
from webgym_common.config import Settings
from webgym_common.events import EpisodeCompleted
from webgym_common.stream.faust_app import decode_error, faust_table, faust_topic, make_faust_app
from webgym_common.stream.handlers import NOTHING, Effects
from webgym_common.stream.reliable import ReliableApp, origin_of, run_worker
from webgym_common.topics import Group, Topic, table_owners, topic_name

SOURCES = [Topic.EPISODES, Topic.OBSERVATIONS, Topic.ACTIONS, Topic.EPISODES_COMPLETED]


async def on_part(ev: Evaluator, event: faust.EventT, table: faust.Table,
                  collect: Callable[[Any], Entry | None]) -> None:
    """Fold a part of an episode into its table: `collect(event)` says what goes there."""
    ticket, writes = ev.outbox.arrived(event), TableWrites()
    if (error := decode_error(event)) is not None:
        await ev.outbox.commit(ticket, Effects(refuse=error))
    else:
        if (entry := collect(event.value)) is not None:
            writes.put(table, *entry)
        await ev.outbox.commit(ticket, Effects(state=writes))
    await ev.catchup.handled(event)


async def on_completion(ev: Evaluator, event: faust.EventT) -> None:
    # Anything but a sound EpisodeCompleted is refused by the first test.
    ticket, done = ev.outbox.arrived(event), cast(EpisodeCompleted, event.value)
    if (error := decode_error(event) or completion_error(done)) is not None:
        await ev.outbox.commit(ticket, Effects(refuse=error))
    elif already_scored(done, ev.tables.scored, ev.scoring_now):
        await ev.outbox.commit(ticket, NOTHING)  # a replay or a duplicate: nothing
    else:
        ev.scoring_now.add(done.episode_id)
        try:  # the commit sets `scored` as it publishes the score
            await ev.outbox.commit(ticket, await score_or_reject(ev, done, origin_of(event)))
        finally:
            ev.scoring_now.discard(done.episode_id)


def build_app(settings: Settings) -> faust.App:
    k, cfg = settings.kafka, settings.evaluator
    app = make_faust_app(settings, Group.EVALUATOR, processing_guarantee=cfg.processing_guarantee)
    reliable = ReliableApp(app, settings, SOURCES)
    scorer = make_scorer(settings)
    tables = Tables(*(faust_table(app, k, s) for s, (owner, _) in table_owners().items()
                      if owner is Group.EVALUATOR))  # requests, observed, acted, scored
    catchup = CatchUp(app, settings, [topic_name(k, t) for t in SOURCES[:3]])
    reliable.on_rebalance(catchup.forget)  # what was handled, not committed, may be undone
    outbox = Outbox(app, k)
    ev = Evaluator(t := tables, scorer, outbox, catchup)
    episodes, observations, actions, completed = (faust_topic(app, k, t) for t in SOURCES)

    async def fold(stream: faust.StreamT, table: faust.Table,
                   collect: Callable[[Any], Entry | None]) -> None:
        async for event in reliable.fresh(stream):
            await on_part(ev, event, table, collect)

    @app.agent(episodes)
    async def remember_tasks(stream: faust.StreamT) -> None:
        await fold(stream, t.requests, lambda e: collect_request(e, t.requests, t.scored))

    @app.agent(observations)
    async def remember_observations(stream: faust.StreamT) -> None:
        await fold(stream, t.observed, lambda e: collect_observation(
            e, t.observed, t.scored, cfg.page_text_chars))

    @app.agent(actions)
    async def remember_actions(stream: faust.StreamT) -> None:
        await fold(stream, t.acted, lambda e: collect_action(e, t.acted, t.scored))

    @app.agent(completed, concurrency=cfg.max_inflight)
    async def score(stream: faust.StreamT) -> None:
        async for event in reliable.fresh(stream):
            await on_completion(ev, event)

    @app.on_before_shutdown.connect
    async def stop(*args: Any, **kwargs: Any) -> None:
        await catchup.offsets.stop()

    return app


def run_evaluator_worker(settings: Settings) -> None:
    run_worker(build_app(settings))
