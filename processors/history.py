"""The task-history fold: scored episodes in, one TaskHistory per task out.

Delivery: at-least-once in, effectively once out. Consume EpisodeScored
(webgym.episodes.scored) in the history consumer group, fold each into its task's
TaskHistory and publish that to the compacted webgym.task-history (key task_id);
the scored offset is committed only after the history is published. An episode id
already in a task's `recent_episode_ids` is not counted again, so redelivery after
a crash (published, not yet committed) and replays are no-ops. A commit that fails or
times out (a lost coordinator, a rebalance) is logged and the fold goes on: the
offset is committed with a later event, or the event comes again and is skipped. A
score the judge could not give (webgym_common.history.is_judged) is no attempt. A
score no evaluator could have given (a task that is not in the catalog on webgym.tasks,
read again when a score names a task it lacks; negative steps) is dead-lettered.
Kafka down is waited out, never skipped.

The handler (`on_scored`: the event and its task's history in, effects out) decides;
webgym_common.stream.handlers.handle_each publishes, remembers and commits.

State survives restarts without a store of its own: before folding anything on
partitions it has just been given, a worker reads webgym.task-history to its end,
which is exactly the state last published for those tasks (by itself or by the
worker that owned them before).

Several history workers may run: the evaluator keys EpisodeScored by task_id, so
all episodes of a task land on one partition and are folded by one worker at a
time, and a partition that changes hands is folded on top of the rebuilt state.
What a history means (attempt levels, success) is in webgym_common.history.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Container
from functools import partial

from webgym_common.config import Settings
from webgym_common.events import EpisodeScored, TaskHistory, utc_now
from webgym_common.history import attempt_level, is_judged, is_success, load_task_history
from webgym_common.lifecycle import run_until_signalled
from webgym_common.stream.bus import EventConsumer, EventProducer, Ownership
from webgym_common.stream.handlers import NOTHING, Effects, Memory, Origin, Publish, handle_each
from webgym_common.stream.readers import read_compacted
from webgym_common.topics import Group, Topic, group_id
from webgym_common.versions import is_demonstration_version

log = logging.getLogger(__name__)

LAST_REWARDS = 10
# Larger than any plausible redelivery window of one task's episodes; an episode
# replayed after this many newer episodes of the same task would count again.
RECENT_EPISODES = 200
# How often the catalog may be read again for scores of tasks it lacks (bad input at volume
# must not turn into a catalog read per event).
CATALOG_REFRESH_S = 5.0


def refusal(scored: EpisodeScored, catalog: Container[str]) -> str | None:
    """Why this score must not count at all (it is dead-lettered); None if it may."""
    if scored.steps < 0:
        return f"episode {scored.episode_id}: {scored.steps} steps"
    if scored.task_id not in catalog:
        return f"task {scored.task_id!r} is not in the catalog ({Topic.TASKS.value})"
    return None


def fold(history: TaskHistory | None, scored: EpisodeScored) -> TaskHistory | None:
    """The task's history with this episode counted, or None if it was counted already
    or does not count: the judge could not score it, or it was a demonstration (teacher-
    forced: the policy's attempt level must not rise because a reference solved the task)."""
    if not is_judged(scored) or is_demonstration_version(scored.policy_version):
        return None
    if history is None:
        history = TaskHistory(task_id=scored.task_id, updated_at=utc_now())
    if scored.episode_id in history.recent_episode_ids:
        return None
    successes = history.successes + int(is_success(scored.reward))
    return TaskHistory(
        task_id=scored.task_id,
        attempts=history.attempts + 1,
        successes=successes,
        attempt_level=attempt_level(successes),
        last_rewards=[*history.last_rewards, scored.reward][-LAST_REWARDS:],
        recent_episode_ids=[*history.recent_episode_ids, scored.episode_id][-RECENT_EPISODES:],
        updated_at=utc_now(),
    )


class Catalog:
    """The task ids on webgym.tasks; read again (at most every CATALOG_REFRESH_S) when a
    score names a task it lacks, since tasks may be loaded after the fold started."""

    def __init__(self, load: Callable[[], Awaitable[set[str]]]) -> None:
        self.load = load
        self.task_ids: set[str] = set()
        self.read_at = -math.inf

    async def holding(self, task_id: str) -> set[str]:
        if task_id not in self.task_ids and time.monotonic() - self.read_at >= CATALOG_REFRESH_S:
            self.task_ids = await self.load()
            self.read_at = time.monotonic()
        return self.task_ids


async def on_scored(catalog: Catalog, scored: EpisodeScored, history: TaskHistory | None,
                    origin: Origin) -> Effects[TaskHistory]:
    """Refuse the score, or fold it into the task's history and publish that."""
    if (why := refusal(scored, await catalog.holding(scored.task_id))) is not None:
        return Effects(refuse=why)
    updated = fold(history, scored)
    if updated is None:
        log.info("history: episode %s not counted (counted already, or the judge failed)",
                 scored.episode_id)
        return NOTHING
    log.info("history %s: %d/%d, level %d (episode %s)", updated.task_id, updated.successes,
             updated.attempts, updated.attempt_level, scored.episode_id)
    return Effects([Publish(Topic.TASK_HISTORY, scored.task_id, updated)], updated)


async def fold_scored_episodes(settings: Settings) -> None:
    async with EventProducer(settings, client_id="history") as producer:
        ownership = Ownership("history")
        consumer = EventConsumer(settings, [Topic.EPISODES_SCORED],
                                 group_id(settings.kafka, Group.HISTORY), producer,
                                 client_id="history", listener=ownership)

        async def rebuild() -> dict[str, TaskHistory]:
            state = await load_task_history(settings, producer)
            log.info("task history: %d tasks rebuilt from %s", len(state),
                     producer.topic(Topic.TASK_HISTORY))
            return state

        catalog = Catalog(lambda: task_ids(settings, producer))
        async with consumer:
            await handle_each(consumer, producer, EpisodeScored, lambda s: s.task_id,
                              partial(on_scored, catalog), Memory(rebuild, ownership),
                              settings.kafka.request_timeout_ms / 1000)


async def task_ids(settings: Settings, producer: EventProducer) -> set[str]:
    return set(await read_compacted(settings, Topic.TASKS, producer))


async def run_history_worker(settings: Settings) -> None:
    """Run until SIGTERM/SIGINT; leaving the group on the way out speeds up a rebalance."""
    await run_until_signalled(fold_scored_episodes(settings))
