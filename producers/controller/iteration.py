"""What the rollout controller decides, as pure functions of what it has read.

An iteration's episode ids are deterministic and carry the task id, so a restarted
controller can tell from the log which requests are missing. The follow loop's
rules: an episode is cancelled once its deadline has passed by `slack_s`; once the
completion threshold is reached a grace period starts, after which every episode
still running is cancelled as a straggler; the iteration may close when every
episode has completed or was cancelled long enough ago, and either every completed
one is scored or the scores have been waited for long enough.
"""

from __future__ import annotations

import hashlib
import random
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from webgym_common.config import Settings
from webgym_common.demonstrations import bank_tasks
from webgym_common.events import (
    DomainBlocked,
    EpisodeCompleted,
    EpisodeRequested,
    EpisodeScored,
    Event,
    IterationClosed,
    IterationStarted,
    ModelServed,
    Task,
    utc_now,
)
from webgym_common.history import is_judged, is_success
from webgym_common.tasks import in_rollout_pool, step_limit
from webgym_common.versions import DEMONSTRATION_VERSION, is_demonstration_version


@dataclass(frozen=True)
class Pending:
    """An episode to request once fewer than the window are in flight; its deadline is set
    then (`budget` from its request), so waiting behind the others costs it nothing."""

    request: EpisodeRequested
    budget: timedelta


@dataclass
class IterationState:
    iteration: int
    split: str
    requests: dict[str, EpisodeRequested] = field(default_factory=dict)
    pending: dict[str, Pending] = field(default_factory=dict)  # not requested yet, in order
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

    @property
    def total(self) -> int:
        return len(self.requests) + len(self.pending)


def releasable(state: IterationState, window: int) -> list[str]:
    """The pending episodes to request now: as many as keep `window` in flight, in order."""
    return list(state.pending)[:max(0, window - state.running)]


def episode_id(split: str, iteration: int, index: int, task_id: str) -> str:
    return f"{split}-it{iteration}-{index:04d}-{task_id}"


def task_id_of(eid: str) -> str:
    return eid.split("-", 3)[3]


def demonstration_id(split: str, iteration: int, index: int, task_id: str) -> str:
    """An extra teacher-forced episode of the first training iteration (`--demos N`)."""
    return f"{split}-it{iteration}-d{index:03d}-{task_id}"


def is_seeded_demonstration(eid: str) -> bool:
    return eid.split("-", 3)[2].startswith("d")


def demonstration_tasks(tasks: Sequence[Task], n: int, rng: random.Random) -> list[Task]:
    """`n` training tasks with reference actions the bank may hold, to demonstrate (drawn
    again when fewer)."""
    pool = bank_tasks(tasks)  # what the bank may hold is what may be teacher-forced
    out: list[Task] = []
    while pool and len(out) < n:
        out += rng.sample(pool, min(n - len(out), len(pool)))
    return out


def first_training_iteration(control: Sequence[Event], iteration: int) -> bool:
    """No training iteration started before this one: `--demos` seeds only the first."""
    return not any(isinstance(e, IterationStarted) and e.split == "train"
                   and e.iteration < iteration for e in control)


# -- starting or resuming -----------------------------------------------------------


def iteration_to_run(control: Sequence[Event], split: str) -> int:
    """The unclosed iteration of this split if there is one, else one past the last started."""
    started = [e.iteration for e in control if isinstance(e, IterationStarted)]
    closed = {(e.iteration, e.split) for e in control if isinstance(e, IterationClosed)}
    for e in control:
        if isinstance(e, IterationStarted) and e.split == split and (
            (e.iteration, split) not in closed
        ):
            return e.iteration
    return max(started, default=-1) + 1


def started_event(control: Sequence[Event], iteration: int, split: str) -> IterationStarted | None:
    return next((e for e in control if isinstance(e, IterationStarted)
                 and e.iteration == iteration and e.split == split), None)


def active_blocks(blocklist: Mapping[str, Event], now: datetime) -> set[str]:
    """Domains still blocked at `now` (the blocklist table is keyed by domain)."""
    return {d for d, e in blocklist.items()
            if isinstance(e, DomainBlocked) and e.blocked_until > now}


def served_version(served: Iterable[Event], model_name: str) -> int:
    """The newest version of `model_name` the model server serves (0: the base model)."""
    return max((m.version for m in served
                if isinstance(m, ModelServed) and m.model_name == model_name), default=0)


def latest_policy_version(served: Iterable[Event], model_name: str, default: str) -> str:
    """The version tag the policy's actions carry now: "v<N>", or `default` for the base."""
    version = served_version(served, model_name)
    return f"v{version}" if version else default


def version_needed(iteration: int, max_staleness: int) -> int:
    """The served version iteration `iteration` waits for when the loop trains: the trainer
    makes version i+1 from iteration i, so k = 0 runs every iteration on the version trained
    on all before it (WebGym's synchronous loop) and k > 0 lets rollouts run up to k versions
    behind the trainer (the asynchronous loop of AReaL / AsyncWebRL)."""
    return max(0, iteration - max_staleness)


def is_warm_start_iteration(iteration: int, train: bool, warm_start_first: bool) -> bool:
    """Iteration 0 of a training loop whose warm start comes first: it requests no policy
    episode, and its close trains v1 on the bank alone."""
    return train and warm_start_first and iteration == 0


def is_demonstration(eid: str, task: Task, split: str, share: float) -> bool:
    """Whether this episode runs teacher-forced as a demonstration: the first iteration's
    seeded demonstrations (`demonstration_id`), and a fixed share of training episodes whose
    task has reference actions, chosen by the episode id's digest (so a resumed controller
    makes the same choice)."""
    if split != "train" or not task.reference_actions or in_rollout_pool(task):
        return False
    if is_seeded_demonstration(eid):
        return True
    if share <= 0:
        return False
    return int(hashlib.sha256(eid.encode()).hexdigest()[:8], 16) / 0x1_0000_0000 < share


def make_request(settings: Settings, eid: str, task: Task, iteration: int, split: str,
                 version: str) -> EpisodeRequested:
    timeout = timedelta(minutes=settings.rollout.task_timeout_minutes)
    demo = is_demonstration(eid, task, split, settings.rollout.demonstration_share)
    cap = None if demo else settings.rollout.train_max_steps  # a demonstration replays them all
    return EpisodeRequested(
        episode_id=eid, task=task, iteration=iteration, split=split,
        max_steps=step_limit(task, split, cap),
        deadline=utc_now() + timeout,
        policy_version=DEMONSTRATION_VERSION if demo else version,
        interaction_mode=settings.rollout.interaction_mode, demonstration=demo,
    )


def missing_requests(ids: Sequence[str], requested: Mapping[str, EpisodeRequested],
                     catalog: Mapping[str, Task]) -> list[str]:
    """Episode ids not requested yet whose task still exists: none twice, none forgotten."""
    return [eid for eid in ids if eid not in requested and task_id_of(eid) in catalog]


# -- following ------------------------------------------------------------------------


def track(state: IterationState, event: Event) -> None:
    """Count a completion or a score of one of this iteration's episodes (first one wins)."""
    eid = getattr(event, "episode_id", None)
    if eid not in state.requests:
        return
    if isinstance(event, EpisodeCompleted):
        state.completed.setdefault(event.episode_id, event)
    elif isinstance(event, EpisodeScored):
        state.scored.setdefault(event.episode_id, event)


def unfinished(state: IterationState) -> list[str]:
    """Episodes neither completed nor already asked to cancel."""
    return [e for e in state.requests if e not in state.completed and e not in state.cancelled]


def overdue(state: IterationState, now: datetime, slack_s: float) -> list[str]:
    """Unfinished episodes whose deadline passed more than `slack_s` ago."""
    return [e for e in unfinished(state)
            if (now - state.requests[e].deadline).total_seconds() > slack_s]


def grace_begins(state: IterationState, threshold: float) -> bool:
    done = len(state.completed) / max(1, state.total)
    return state.grace_started is None and done >= threshold


def grace_over(state: IterationState, now: float, grace_period_s: float) -> bool:
    return state.grace_started is not None and now - state.grace_started >= grace_period_s


def all_accounted(state: IterationState, now: float, cancel_wait_s: float) -> bool:
    """Every episode completed, or was cancelled more than `cancel_wait_s` ago."""
    given_up = [e for e, t in state.cancelled.items()
                if e not in state.completed and now - t > cancel_wait_s]
    return not state.pending and len(state.completed) + len(given_up) >= len(state.requests)


def scores_in(state: IterationState, now: float, accounted_at: float,
              score_wait_s: float) -> bool:
    """Every completed episode is scored, or we have waited `score_wait_s` for the rest."""
    scored = all(e in state.scored for e in state.completed)
    return scored or now - accounted_at > score_wait_s


def closing_event(state: IterationState, now: float | None = None) -> IterationClosed:
    t = state.terminations
    never_reported = sum(1 for e in state.cancelled if e not in state.completed)
    return IterationClosed(
        iteration=state.iteration, split=state.split, requested=len(state.requests),
        completed=len(state.completed), crashed=t["crashed"], blocked=t["blocked"],
        cancelled=t["cancelled"] + never_reported, timed_out=t["timeout"],
        wall_time_s=(time.monotonic() if now is None else now) - state.started,
    )


def solved_summary(state: IterationState) -> str:
    """The policy's own successes and the demonstrations' apart, over what was requested:
    "policy 1/4 solved, demonstrations 4/4 (not counted)". Demonstrations are teacher-forced:
    their success is the teacher's, never the policy's (a judge failure solves nothing)."""
    solved = {eid for eid, s in state.scored.items() if is_judged(s) and is_success(s.reward)}
    demos = {eid for eid, r in state.requests.items()
             if r.demonstration or is_demonstration_version(r.policy_version)}
    own = state.requests.keys() - demos
    text = f"policy {len(own & solved)}/{len(own)} solved"
    if demos:
        text += f", demonstrations {len(demos & solved)}/{len(demos)} (not counted)"
    return text
