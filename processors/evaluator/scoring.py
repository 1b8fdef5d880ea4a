"""What scoring one completed episode changes: its score, a blocked domain, the tables.

Nothing here commits: the effects go out with the completion's offset in one Kafka
transaction (outbox.py), so a killed evaluator redoes the whole of it or none.

`score_or_reject` is app.py's scoring step: it waits for the episode's parts (catchup.py),
then scores it; a trajectory that cannot be judged, or a bug met judging it, makes a dead
letter instead, and a completion whose partition moved meanwhile changes nothing (its new
owner handles it again). `Evaluator`: what app.py's handlers share.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta

import faust
from faust.types import TP

from processors.evaluator.catchup import CatchUp, Moved
from processors.evaluator.decisions import (
    blocked_event,
    forget_episode,
    missing_parts,
    partial_note,
    scored_event,
    scored_key,
    trajectory_error,
)
from processors.evaluator.judge import make_judge
from processors.evaluator.outbox import Evaluated, Outbox, TableWrites
from processors.evaluator.reward import PAGE_VERSION, RULES_VERSION, Judge, evaluate, scored_by_page
from processors.evaluator.trajectory import build_episode, steps_in
from webgym_common.config import EvaluatorSettings, Settings
from webgym_common.events import EpisodeCompleted, utc_now
from webgym_common.stream.handlers import NOTHING, Effects, Origin, Publish
from webgym_common.topics import Topic

log = logging.getLogger("processors.evaluator.app")


@dataclass
class Tables:
    """The evaluator's state, one faust table each, co-partitioned by episode id."""

    requests: faust.Table  # episode -> its task (from webgym.episodes)
    observed: faust.Table  # episode and step -> the observation's evidence
    acted: faust.Table  # episode and step -> the action
    scored: faust.Table  # episode -> when it was scored (kept: a replay publishes nothing)

    def missing(self, done: EpisodeCompleted) -> list[str]:
        return missing_parts(done, self.requests, self.observed, self.acted)


@dataclass
class Scorer:
    cfg: EvaluatorSettings
    judge: Judge | None
    version: str  # the rules' or the judge's

    async def score(self, done: EpisodeCompleted, t: Tables, why_partial: str | None
                    ) -> Evaluated:
        """The score (rules, LLM judge or the page's own reward) and what it changes."""
        note = None
        if why_partial is not None:
            note = partial_note(t.missing(done), why_partial)
            log.warning("episode %s: %s", done.episode_id, note)
        episode = build_episode(done, t.requests.get(done.episode_id), steps_in(t.observed, done),
                                steps_in(t.acted, done))
        judgement = await evaluate(episode, self.judge, self.cfg.max_screenshots,
                                   self.cfg.blocking_sample)
        result = scored_event(done, episode, judgement,
                              PAGE_VERSION if scored_by_page(episode) else self.version, note)
        out = [Publish(Topic.EPISODES_SCORED, scored_key(result), result)]
        blocked = blocked_event(done, episode, judgement,
                                timedelta(hours=self.cfg.blocklist_hours), utc_now())
        if blocked is not None:
            out.append(Publish(Topic.BLOCKLIST, blocked.domain, blocked))
        writes = TableWrites()
        writes.put(t.scored, done.episode_id, int(time.time() * 1000))
        for table, key in forget_episode(done, t.requests, t.observed, t.acted):
            writes.delete(table, key)
        log.info("scored %s: reward %.0f, %s%s", done.episode_id, judgement.reward,
                 done.termination, " (blocked)" if judgement.is_blocked else
                 " (judge failed)" if judgement.judge_failed else "")
        return Effects(out, writes)


def make_scorer(settings: Settings) -> Scorer:
    """The scorer of the configured judge (judge.make_judge), or of the rules without one."""
    judge = make_judge(settings)
    return Scorer(settings.evaluator, judge, judge.version if judge is not None else RULES_VERSION)


@dataclass
class Evaluator:
    """The evaluator's tables, scorer, outbox and catch-up, and what it is scoring now."""

    tables: Tables
    scorer: Scorer
    outbox: Outbox
    catchup: CatchUp
    scoring_now: set[str] = field(default_factory=set)  # being scored by an actor here


async def score_or_reject(ev: Evaluator, done: EpisodeCompleted, at: Origin) -> Evaluated:
    t = ev.tables
    try:
        why_partial = await ev.catchup.wait(TP(at.topic, at.partition), lambda: t.missing(done))
        if (error := trajectory_error(done, t.requests.get(done.episode_id))) is not None:
            return Effects(refuse=error)
        return await ev.scorer.score(done, t, why_partial)
    except Moved as moved:  # the partition's new owner handles the event again
        log.info("episode %s: %s", done.episode_id, moved)
        return NOTHING
    except Exception as err:  # a bug in judging one episode must not stop the rest
        log.exception("cannot score %s", done.episode_id)
        return Effects(refuse=f"evaluator error: {type(err).__name__}: {err}")
