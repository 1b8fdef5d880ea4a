"""`webgym demos build`: the demonstration bank, every verified train reference run once.

Delivery: like an evaluation, everything is in the log and building again is safe. The bank's
episodes (webgym_common.demonstrations: iteration -2, teacher-forced, ids naming the prompt
version and the task) are requested once; a build run again reads webgym.episodes, requests
only the missing ones and follows them all to their scores. The pipeline does the rest: the
policy processor teacher-forces them with the prompt it would send the model, the evaluator
scores them, and the replay processor publishes their successful steps as ReplaySamples on
webgym.replay, where the trainer finds them (consumers.trainer.decisions.bank_draw).

The tasks are the train split's tasks with references that the leak guard lets train
(`bank_tasks`, webgym_common.leaks), `--limit` of them spread over the groups (environments,
templates) so that a small bank still covers every kind of task. The choice is checked with
`held_out_leaks` once more before any request goes out.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from producers.catalog import load_task_catalog
from producers.controller.iteration import IterationState, Pending
from producers.controller.rollout import follow, requests_outside_iterations
from webgym_common.agent.prompts import PROMPT_VERSION
from webgym_common.config import Settings
from webgym_common.demonstrations import BANK_ITERATION, bank_episode_id, bank_tasks
from webgym_common.events import EpisodeRequested, Task, utc_now
from webgym_common.history import is_success
from webgym_common.leaks import held_out_leaks
from webgym_common.stream.bus import EventProducer
from webgym_common.tasks import group_of
from webgym_common.versions import DEMONSTRATION_VERSION


class LeakError(ValueError):
    """A bank draw that would train on held-out tasks (never requested)."""


@dataclass(frozen=True)
class BankResult:
    prompt_version: str
    episodes: int
    solved: int
    steps: int  # steps of the solved episodes: the rows the replay processor can make


def spread(tasks: Sequence[Task], limit: int | None) -> list[Task]:
    """`limit` tasks taken round-robin over their groups (all of them without a limit), so a
    small bank still has every environment and template; stable: the same tasks each time."""
    if limit is None or limit >= len(tasks):
        return list(tasks)
    groups: dict[str, list[Task]] = {}
    for t in sorted(tasks, key=lambda t: t.task_id):
        groups.setdefault(group_of(t), []).append(t)
    rounds = itertools.zip_longest(*(groups[g] for g in sorted(groups)))
    return [t for row in rounds for t in row if t is not None][:limit]


def bank_request(settings: Settings, eid: str, task: Task, deadline_minutes: float,
                 ) -> EpisodeRequested:
    return EpisodeRequested(
        episode_id=eid, task=task, iteration=BANK_ITERATION, split="train",
        max_steps=len(task.reference_actions) + 1,  # the references, then the answer
        deadline=utc_now() + timedelta(minutes=deadline_minutes),
        policy_version=DEMONSTRATION_VERSION, demonstration=True,
        interaction_mode=settings.rollout.interaction_mode)


async def build_bank(settings: Settings, producer: EventProducer, console: Console, *,
                     suites: Sequence[str] | None = None, limit: int | None = None,
                     deadline_minutes: float = 60.0) -> BankResult:
    """Request (or resume) the bank's episodes and follow them to their scores."""
    catalog = await load_task_catalog(settings, producer)
    tasks = spread(bank_tasks(catalog.values(), suites), limit)
    if not tasks:
        raise ValueError("no train tasks with reference actions in the catalog: load a task "
                         "file with splits and references (webgym tasks load ...)")
    if leaks := held_out_leaks([t.task_id for t in tasks], catalog):
        raise LeakError("the bank would train on held-out tasks: " + "; ".join(leaks[:5]))
    ids = {bank_episode_id(PROMPT_VERSION, i, t.task_id): t for i, t in enumerate(tasks)}
    requested = await requests_outside_iterations(settings, producer, BANK_ITERATION)
    state = IterationState(BANK_ITERATION, "train")
    for eid, task in ids.items():
        if (req := requested.get(eid)) is not None:
            state.requests[eid] = req
        else:  # requested by `follow`, a window at a time, each deadline from then
            state.pending[eid] = Pending(bank_request(settings, eid, task, deadline_minutes),
                                         timedelta(minutes=deadline_minutes))
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console) as progress:
        bar = progress.add_task(f"demonstration bank ({PROMPT_VERSION})", total=len(ids))

        def update(s: IterationState) -> None:
            progress.update(bar, completed=len(s.completed),
                            description=f"demonstration bank ({PROMPT_VERSION}): running "
                            f"{s.running} · scored {len(s.scored)}")

        await follow(settings, producer, state, update)
    solved = [s for s in state.scored.values() if is_success(s.reward)]
    return BankResult(PROMPT_VERSION, len(ids), len(solved), sum(s.steps for s in solved))
