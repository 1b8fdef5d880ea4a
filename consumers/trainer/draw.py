"""Which replay samples a training run draws: WebGym's recency-biased draw, the window, staleness.

Pure and deterministic: the same samples in the same order and the same seed give the same
draw on every machine (Python's Mersenne Twister `random.Random(seed).random()` is stable
across versions and platforms), so a trainer restarted mid-run draws the same samples again.

The rule is WebGym's `ReplayBuffer.get_training_samples(num_samples, recency_bias_power=p)`
(microsoft/webgym, webgym/data/replay_buffer.py), matched here exactly:
- the eligible samples in order, oldest first, have positions 0, 1, ..., n-1;
- asking for at least n samples returns all of them, in order (no draw);
- otherwise `num_samples` positions are drawn without replacement; with p == 1 every
  position weighs the same (their code takes a separate uniform branch for p == 1.0), with
  any other p position i weighs (i+1)^p. So p = 1 is uniform (not linear, which (i+1)^1
  would be), p = 2 (their online recipe) favours the newest, and p = 0 is uniform too.
- drawn samples come back in draw order, as numpy's choice returns them.

numpy's `choice(replace=False, p=w)` draws in rounds and drops repeats, which has the
distribution of successive sampling: each pick takes a remaining position with probability
its weight over the remaining weights. That is what `draw_positions` does, one uniform number
per pick, so a draw can be computed by hand from the uniforms (tests do).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import Protocol, TypeVar

from webgym_common.versions import version_number

T = TypeVar("T")



def recency_weights(n: int, power: float) -> list[float]:
    """Position i's weight: 1 when power == 1 (WebGym's uniform branch), else (i+1)^power."""
    if power == 1.0:
        return [1.0] * n
    return [float(i + 1) ** power for i in range(n)]


def draw_positions(n: int, k: int, power: float, uniforms: Iterator[float]) -> list[int]:
    """k of the positions 0..n-1 without replacement, in draw order (all n, in order, if k >= n).

    Each pick takes the next uniform u in [0, 1) and walks the remaining positions in order,
    taking the first whose cumulative weight exceeds u x (the remaining weights' sum).
    """
    if k >= n:
        return list(range(n))
    weights = recency_weights(n, power)
    remaining = list(range(n))
    picked: list[int] = []
    for _ in range(max(0, k)):
        target = next(uniforms) * sum(weights[i] for i in remaining)
        cumulative, chosen = 0.0, remaining[-1]  # rounding can leave target at the sum
        for i in remaining:
            cumulative += weights[i]
            if cumulative > target:
                chosen = i
                break
        picked.append(chosen)
        remaining.remove(chosen)
    return picked


def draw(samples: Sequence[T], k: int, power: float, seed: int) -> list[T]:
    """WebGym's recency-biased draw of k samples (oldest first in `samples`), seeded."""
    rng = random.Random(seed)
    uniforms = (rng.random() for _ in itertools.count())
    return [samples[i] for i in draw_positions(len(samples), k, power, uniforms)]


class HasIteration(Protocol):
    @property
    def iteration(self) -> int: ...


S = TypeVar("S", bound=HasIteration)


def window(samples: Sequence[S], current_iteration: int, last_iterations: int,
           capacity: int) -> list[S]:
    """The samples of the last `last_iterations` iterations up to `current_iteration` (WebGym:
    the last 4), then only the most recent `capacity` of them (its buffer's capacity).

    `samples` are oldest first; iterations after `current_iteration` are not in the window
    (a run is decided by what was there when its iteration closed)."""
    # Iterations count from 0: evaluations (-1) and the demonstration bank (-2) are none.
    oldest = max(0, current_iteration - last_iterations + 1)
    kept = [s for s in samples if oldest <= s.iteration <= current_iteration]
    return kept[-capacity:] if capacity > 0 else []


def fresh_enough(sample_version: str, current_version: int, max_staleness: int) -> bool:
    """May a sample produced under `sample_version` train the successor of `current_version`?

    On-policy samples may while current - theirs <= k (so k = 0 keeps only the current
    version's rollouts). Demonstrations (teacher-forced or reference episodes, whose tag
    names no version) are off-policy by construction, like WebGym's teacher data: no version
    makes them stale, so they are always kept."""
    produced_by = version_number(sample_version)
    return produced_by is None or current_version - produced_by <= max_staleness


def dedupe(items: Iterable[T], key: Callable[[T], Hashable]) -> list[T]:
    """One item per key, the first seen (a sample republished after a crash keeps its place)."""
    seen: set[Hashable] = set()
    out: list[T] = []
    for item in items:
        k = key(item)
        if k not in seen:
            seen.add(k)
            out.append(item)
    return out
