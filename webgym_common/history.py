"""What a task's history means, shared by the history fold and the task sampler.

attempt_level = min(successes, 5). WebGym samples a task with weight
100 / 10 / 1 / 0.1 / 0.01 / 0.001 for levels 0..5, so a task that has never been
solved stays at level 0 and is drawn most, and each success makes it ten times
rarer until level 5. Failures do not lower the level: a once-mastered task that
fails again is still rare, which keeps the budget on tasks not yet learned.
A score the judge could not give (`is_judged` false) is not an attempt.

The current histories are the compacted webgym.task-history (key task_id), read
to its end: the history processor publishes there and rebuilds from there, the
controller samples from it.
"""

from __future__ import annotations

from webgym_common.config import Settings
from webgym_common.events import EpisodeScored, TaskHistory
from webgym_common.stream.bus import EventProducer
from webgym_common.stream.readers import read_compacted
from webgym_common.topics import Topic

MAX_LEVEL = 5
SUCCESS_REWARD = 1.0  # WebGym's verifiable reward is 0 or 1
# The evaluation of an episode the judge could not score (unreachable, no verdict) starts
# with this: its reward 0 was not earned by the agent, so it is no attempt and no failure.
JUDGE_FAILED = "judge failed"


def is_judged(scored: EpisodeScored) -> bool:
    """Whether the score is a verdict on the episode (not a judge failure): only those count."""
    return not scored.evaluation.startswith(JUDGE_FAILED)


def is_success(reward: float) -> bool:
    return reward >= SUCCESS_REWARD


def attempt_level(successes: int) -> int:
    return min(successes, MAX_LEVEL)


async def load_task_history(
    settings: Settings, producer: EventProducer
) -> dict[str, TaskHistory]:
    """task_id -> latest TaskHistory on webgym.task-history (for the sampler and on start)."""
    table = await read_compacted(settings, Topic.TASK_HISTORY, producer)
    return {k: v for k, v in table.items() if isinstance(v, TaskHistory)}
