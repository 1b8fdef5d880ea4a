"""The task-history fold: scored episodes in, one TaskHistory per task out.

Consume EpisodeScored (webgym.episodes.scored) in a consumer group, fold each into
its task's TaskHistory and publish that to the compacted webgym.task-history
(key task_id); the scored offset is committed only after the history is published.

State survives restarts without a store of its own: on start the fold reads
webgym.task-history to its end, which is exactly the state it last published.
An episode id already in a task's `recent_episode_ids` is not counted again, so
redelivery after a crash (published, not yet committed) and replays are no-ops.

attempt_level = min(successes, 5). WebGym samples a task with weight
100 / 10 / 1 / 0.1 / 0.01 / 0.001 for levels 0..5, so a task that has never been
solved stays at level 0 and is drawn most, and each success makes it ten times
rarer until level 5. Failures do not lower the level: a once-mastered task that
fails again is still rare, which keeps the budget on tasks not yet learned.

Run one history worker: scored events are keyed by episode_id, so two workers
would see episodes of one task on different partitions and overwrite each other.
"""

from __future__ import annotations

import asyncio
import logging

from webgym_common.bus import EventConsumer, EventProducer, read_compacted
from webgym_common.config import Settings
from webgym_common.events import EpisodeScored, TaskHistory, utc_now
from webgym_common.lifecycle import run_until_signalled
from webgym_common.topics import Topic

log = logging.getLogger(__name__)

MAX_LEVEL = 5
SUCCESS_REWARD = 1.0  # WebGym's verifiable reward is 0 or 1
LAST_REWARDS = 10
# Larger than any plausible redelivery window of one task's episodes; an episode
# replayed after this many newer episodes of the same task would count again.
RECENT_EPISODES = 200


def is_success(reward: float) -> bool:
    return reward >= SUCCESS_REWARD


def attempt_level(successes: int) -> int:
    return min(successes, MAX_LEVEL)


def fold(history: TaskHistory | None, scored: EpisodeScored) -> TaskHistory | None:
    """The task's history with this episode counted, or None if it was counted already."""
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


async def load_task_history(
    settings: Settings, producer: EventProducer
) -> dict[str, TaskHistory]:
    """task_id -> latest TaskHistory on webgym.task-history (for the sampler and on start)."""
    table = await read_compacted(settings, Topic.TASK_HISTORY, producer)
    return {k: v for k, v in table.items() if isinstance(v, TaskHistory)}


def group_id(settings: Settings) -> str:
    return f"{settings.kafka.topic_prefix}-history"


async def fold_scored_episodes(settings: Settings) -> None:
    async with EventProducer(settings, client_id="history") as producer:
        # Rebuild before joining the group, so no scored event is folded into a blank state.
        state = await load_task_history(settings, producer)
        log.info("task history: %d tasks rebuilt from %s", len(state),
                 producer.topic(Topic.TASK_HISTORY))
        consumer = EventConsumer(settings, [Topic.EPISODES_SCORED], group_id(settings),
                                 producer, client_id="history")
        commit_timeout_s = settings.kafka.request_timeout_ms / 1000
        async with consumer:
            async for received in consumer.events():
                # consume
                scored = received.event
                if isinstance(scored, EpisodeScored):
                    # decide
                    updated = fold(state.get(scored.task_id), scored)
                    # publish, then remember; a crash in between is undone by the rebuild
                    if updated is not None:
                        await producer.publish(Topic.TASK_HISTORY, scored.task_id, updated)
                        state[scored.task_id] = updated
                        log.info("history %s: %d/%d, level %d (episode %s)", updated.task_id,
                                 updated.successes, updated.attempts, updated.attempt_level,
                                 scored.episode_id)
                    else:
                        log.info("history: episode %s already counted", scored.episode_id)
                # Bounded: a commit that hangs on a lost coordinator must not stall the fold;
                # an uncommitted offset only means this event comes again and is skipped.
                await asyncio.wait_for(consumer.commit(received), commit_timeout_s)


async def run_history_worker(settings: Settings) -> None:
    """Run until SIGTERM/SIGINT; leaving the group on the way out speeds up a rebalance."""
    await run_until_signalled(fold_scored_episodes(settings))
