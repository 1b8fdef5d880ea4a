"""The evaluator's decisions, as pure functions over its tables (any mappings).

app.py consumes, calls these, and commits their results through the outbox;
nothing here touches Kafka or a judge.
"""

from __future__ import annotations

from collections.abc import Container, Mapping
from datetime import datetime, timedelta
from typing import Any, TypeVar

from processors.evaluator.reward import Judgement
from processors.evaluator.trajectory import (
    Episode,
    action_record,
    expected_parts,
    observation_record,
    request_record,
    step_key,
    steps_in,
    trajectory_steps,
)
from webgym_common.events import (
    ActionChosen,
    DomainBlocked,
    EpisodeCompleted,
    EpisodeRequested,
    EpisodeScored,
    Event,
    StepObserved,
)

M = TypeVar("M", bound=Mapping[str, Any])
K = TypeVar("K")
Entry = tuple[str, dict[str, Any]]  # a table key and the record to put there

# -- what to remember -------------------------------------------------------------------
# The first record of a key wins (resumed episodes re-publish steps), and nothing is
# remembered of an episode already scored (its state was deleted: a replay must not
# bring it back).


def collect_request(event: Event, requests: Container[str],
                    scored: Container[str]) -> Entry | None:
    """What an event on webgym.episodes adds to the `requests` table, if anything."""
    if not isinstance(event, EpisodeRequested):
        return None
    if event.episode_id in scored or event.episode_id in requests:
        return None
    return event.episode_id, request_record(event)


def collect_observation(event: Event, observed: Container[str], scored: Container[str],
                        text_chars: int) -> Entry | None:
    """What an event on webgym.observations adds to the `observations` table, if anything."""
    if not isinstance(event, StepObserved):
        return None
    key = step_key(event.episode_id, event.step)
    if event.episode_id in scored or key in observed:
        return None
    return key, observation_record(event, text_chars)


def collect_action(event: Event, acted: Container[str], scored: Container[str]) -> Entry | None:
    """What an event on webgym.actions adds to the `actions` table, if anything."""
    if not isinstance(event, ActionChosen):
        return None
    key = step_key(event.episode_id, event.step)
    if event.episode_id in scored or key in acted:
        return None
    return key, action_record(event)


# -- whether and when to score ------------------------------------------------------------


# No episode is longer than this, whatever its request says: a completion claiming more
# steps is poison (a step count is iterated over; 10**9 of them would freeze the evaluator).
STEPS_CAP = 1000


def completion_error(event: Event) -> str | None:
    """Why an event on webgym.episodes.completed cannot be scored (dead-lettered).

    Checked before anything iterates over the episode's steps."""
    if not isinstance(event, EpisodeCompleted):
        return f"expected EpisodeCompleted, got {type(event).__name__}"
    if event.steps < 0:
        return f"absurd EpisodeCompleted: steps={event.steps} is negative"
    if event.steps > STEPS_CAP:
        return f"absurd EpisodeCompleted: steps={event.steps} exceeds the cap of {STEPS_CAP}"
    return None


def trajectory_error(done: EpisodeCompleted, request: Mapping[str, Any] | None) -> str | None:
    """Why a completion cannot be scored once its parts can no longer arrive (dead-lettered):
    no EpisodeRequested precedes it, or it claims more steps than the request allowed."""
    if request is None:
        return (f"unknown episode {done.episode_id!r}: no EpisodeRequested precedes its "
                "completion")
    max_steps = request.get("max_steps")
    if isinstance(max_steps, int) and done.steps > max_steps:
        return (f"absurd EpisodeCompleted: steps={done.steps} exceeds the episode's "
                f"max_steps={max_steps}")
    return None


def already_scored(done: EpisodeCompleted, scored: Container[str],
                   scoring_now: Container[str]) -> bool:
    """A replay or a duplicate: scored before, or being scored by another actor now."""
    return done.episode_id in scored or done.episode_id in scoring_now


def missing_parts(done: EpisodeCompleted, requests: Container[str], observed: Container[str],
                  acted: Container[str]) -> list[str]:
    """The parts of the trajectory not in the tables yet (they travel on other topics)."""
    eid = done.episode_id
    want_observed, want_acted = expected_parts(done)
    return [
        *(["request"] if eid not in requests else []),
        *(f"observation {s}" for s in want_observed if step_key(eid, s) not in observed),
        *(f"action {s}" for s in want_acted if step_key(eid, s) not in acted),
    ]


def lagging(targets: Mapping[K, int], handled: Mapping[K, int]) -> list[K]:
    """State partitions whose agent has not handled every record below its target offset.

    A target is the partition's end offset measured after the completion arrived; an
    episode's parts are appended before its completion is (the browser publishes its
    observations and executes the actions it read before it completes), so once no
    partition lags, a part still missing can no longer arrive."""
    return [tp for tp, end in targets.items() if handled.get(tp, 0) < end]


def partial_note(missing: list[str], why: str) -> str:
    """The evaluation's first line when an episode is scored without some of its parts."""
    shown = ", ".join(missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10
                                       else "")
    return f"partial trajectory: {shown} never arrived ({why}); judged with what is there"


# -- what to publish ---------------------------------------------------------------------


def scored_event(done: EpisodeCompleted, episode: Episode, j: Judgement,
                 evaluator_version: str, note: str | None = None) -> EpisodeScored:
    """The score; `note` (a partial trajectory) goes first in the evaluation text, unless the
    judge failed: that prefix must stay first, readers recognize it (webgym_common.history)."""
    evaluation = j.evaluation if note is None else (
        f"{j.evaluation}\n{note}" if j.judge_failed else f"{note}\n{j.evaluation}")
    return EpisodeScored(
        episode_id=done.episode_id, task_id=episode.task.task_id,
        domain=episode.task.domain or "unknown", iteration=done.iteration, split=done.split,
        reward=j.reward, evaluation=evaluation, is_blocked=j.is_blocked, crashed=j.crashed,
        submit=j.submit, submission_judgment=j.submission_judgment, answer=done.answer,
        termination=done.termination, steps=done.steps, trajectory=trajectory_steps(episode),
        evaluator_version=evaluator_version, policy_version=episode.policy_version,
    )


def scored_key(scored: EpisodeScored) -> str:
    """EpisodeScored is keyed by task: a task's episodes share a partition, so history
    workers fold disjoint sets of tasks, each in order. Exactly once per episode does
    not depend on the key: the `scored` table (by episode) skips replays."""
    return scored.task_id


def blocked_event(done: EpisodeCompleted, episode: Episode, j: Judgement,
                  blocked_for: timedelta, now: datetime) -> DomainBlocked | None:
    """The blocklist entry (key: domain) for an episode that found its domain blocked."""
    domain = episode.task.domain
    if not (j.is_blocked and domain) or j.judge_failed:
        return None
    return DomainBlocked(
        domain=domain, blocked_until=now + blocked_for, episode_id=done.episode_id,
        reason=episode.reason or j.evaluation.splitlines()[0],
    )


def forget_episode(done: EpisodeCompleted, requests: M, observed: M, acted: M
                   ) -> list[tuple[M, str]]:
    """(table, key) of every record of a scored episode: its state goes, the mark stays."""
    doomed = [(table, step_key(done.episode_id, step))
              for table in (observed, acted) for step in steps_in(table, done)]
    if done.episode_id in requests:
        doomed.append((requests, done.episode_id))
    return doomed
