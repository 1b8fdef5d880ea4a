"""Which tasks an iteration runs: WebGym's sampling strategies (pure logic).

- uniform: every eligible task equally likely;
- ratio: fixed shares per difficulty band (webgym_common.tasks.Band), uniform within;
- attempt: weights by attempt level, 100/10/1/0.1/0.01/0.001, so new and unsolved tasks are
  drawn far more often than mastered ones.
Only the split's tasks are drawn (a task without a split: none); a train task is drawn only
when the leak guard lets it train (webgym_common.leaks: it shares nothing with a held-out
task), and training skips blocked domains; held-out tasks are never filtered.
Draws are without replacement while tasks last (then the pool is drawn again). A training
iteration may take only the rollout pool (fresh tasks the bank never holds, `TrainPool`), and
may run each drawn task k times (`with_attempts`: group sampling, so the reward filter sees
a task's successes beside its failures).
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence

from webgym_common.choices import TrainPool
from webgym_common.events import Task, TaskHistory
from webgym_common.leaks import LeakGuard
from webgym_common.tasks import Band, band_of, in_rollout_pool, in_split

LEVEL_WEIGHTS = (100.0, 10.0, 1.0, 0.1, 0.01, 0.001)


def level_weight(level: int) -> float:
    return LEVEL_WEIGHTS[min(max(level, 0), len(LEVEL_WEIGHTS) - 1)]


def eligible(tasks: Sequence[Task], split: str, blocked_domains: set[str],
             pool: TrainPool = TrainPool.ALL) -> list[Task]:
    """The split's tasks (webgym_common.tasks.in_split); training takes what the leak guard
    lets train (of the rollout pool only, if `pool` says so) and skips blocked domains."""
    mine = [t for t in tasks if in_split(t, split)]
    if split != "train":
        return mine
    guard = LeakGuard.of(tasks)
    return [t for t in mine if t.domain not in blocked_domains and guard.trainable(t.task_id)
            and (pool is TrainPool.ALL or in_rollout_pool(t))]


def with_attempts(tasks: Sequence[Task], attempts: int, n: int) -> list[Task]:
    """Each task `attempts` times in a row, `n` episodes in all (the last task may get fewer):
    draw ceil(n / attempts) tasks, then this."""
    return [t for t in tasks for _ in range(attempts)][:n]


def _weighted_without_replacement(
    tasks: Sequence[Task], weights: Sequence[float], n: int, rng: random.Random
) -> list[Task]:
    # Efraimidis-Spirakis: the n largest u^(1/w) keys are a weighted sample without replacement.
    keys = [(math.log(rng.random()) / w, i) for i, w in enumerate(weights)]
    keys.sort(reverse=True)
    return [tasks[i] for _, i in keys[:n]]


def _draw(tasks: Sequence[Task], weights: Sequence[float], n: int, rng: random.Random) -> list:
    out: list[Task] = []
    while len(out) < n and tasks:
        out += _weighted_without_replacement(tasks, weights, min(n - len(out), len(tasks)), rng)
    return out


def sample_tasks(
    tasks: Sequence[Task],
    n: int,
    split: str,
    strategy: str = "attempt",
    history: Mapping[str, TaskHistory] | None = None,
    blocked_domains: set[str] | None = None,
    ratios: Mapping[Band, float] | None = None,
    rng: random.Random | None = None,
    train_pool: TrainPool = TrainPool.ALL,
) -> list[Task]:
    rng = rng or random.Random()
    pool = sorted(eligible(tasks, split, blocked_domains or set(), train_pool),
                  key=lambda t: t.task_id)
    if strategy == "uniform":
        return _draw(pool, [1.0] * len(pool), n, rng)
    if strategy == "attempt":
        history = history or {}

        def level(t: Task) -> int:
            h = history.get(t.task_id)
            return h.attempt_level if h is not None else (t.attempt_level or 0)

        return _draw(pool, [level_weight(level(t)) for t in pool], n, rng)
    if strategy == "ratio":
        shares = dict(ratios or {b: 1 / 3 for b in Band})
        total = sum(shares.values()) or 1.0
        counts = {b: round(n * shares.get(b, 0) / total) for b in Band}
        # The rounding remainder goes to the largest share.
        counts[max(counts, key=counts.__getitem__)] += n - sum(counts.values())
        out: list[Task] = []
        for b in Band:
            in_band = [t for t in pool if band_of(t.difficulty) == b]
            out += _draw(in_band, [1.0] * len(in_band), counts[b], rng)
        return out
    raise ValueError(f"unknown sampling strategy {strategy!r} (uniform, ratio or attempt)")
