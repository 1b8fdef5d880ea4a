"""What a bus run delivered and how it sums up: percentiles, lost and duplicated steps and
episodes (from what was read back from the topics) and where the bus time went. Pure
functions (bench.bus_scale counts with them)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from harness.outcomes import Completion, Observed, Tally, tally
from webgym_common.events import EpisodeCompleted, EpisodeScored


def percentile(values: Iterable[float], q: float) -> float:
    """The nearest-rank q-quantile (0 < q <= 1): the smallest value with at least q of the
    values at or below it. NaN for no values."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    rank = max(1, math.ceil(q * len(ordered)))  # at least the first
    return ordered[min(len(ordered), rank) - 1]


@dataclass
class StepCount:
    """Per step of the measured episodes, what webgym.actions holds."""

    lost: dict[str, list[int]] = field(default_factory=dict)  # episode -> steps with no action
    duplicated: dict[str, list[int]] = field(default_factory=dict)  # -> with 2+ actions
    steps: int = 0  # steps expected

    @property
    def lost_steps(self) -> int:
        return sum(map(len, self.lost.values()))

    @property
    def duplicated_steps(self) -> int:
        return sum(map(len, self.duplicated.values()))


def count_steps(actions: Iterable[tuple[str, int, str]], expected: Mapping[str, int]
                ) -> StepCount:
    """Which expected steps have no action, or more than one distinct ActionChosen.

    `actions`: (episode id, step, event id) of every ActionChosen on the topic (a record
    read twice is one action: the event id is the same); `expected`: episode -> the
    number of steps that must have an action (steps 0..n-1). Actions of other episodes
    or steps are ignored."""
    seen: dict[tuple[str, int], set[str]] = {}
    for eid, step, event_id in actions:
        if 0 <= step < expected.get(eid, 0):
            seen.setdefault((eid, step), set()).add(event_id)
    out = StepCount(steps=sum(expected.values()))
    for eid, n in expected.items():
        for step in range(n):
            ids = seen.get((eid, step), set())
            if not ids:
                out.lost.setdefault(eid, []).append(step)
            elif len(ids) > 1:
                out.duplicated.setdefault(eid, []).append(step)
    return out


def episode_outcomes(requested: Mapping[str, str], completed: Iterable[EpisodeCompleted],
                     scored: Iterable[EpisodeScored]) -> Tally:
    """The chaos tally (lost: never completed or scored; duplicated: either twice) over the
    `requested` episodes (id -> task id); events of other episodes are left out."""
    obs = Observed(episode_task=dict(requested))
    for done in completed:
        if done.episode_id in requested:
            obs.completed.setdefault(done.episode_id, []).append(
                Completion(done.termination, done.reason))
    for s in scored:
        if s.episode_id in requested:
            obs.scored[s.episode_id] = obs.scored.get(s.episode_id, 0) + 1
            obs.scored_task[s.episode_id] = s.task_id
    return tally("bus scale", obs)


def delivery_notes(t: Tally, steps: StepCount, limit: int = 3) -> list[str]:
    """What went missing or came twice (the tally's notes on that, then the steps')."""
    out = [n for n in t.notes if "never" in n or "twice" in n]
    for label, found in (("steps without an action", steps.lost),
                         ("steps with more than one action", steps.duplicated)):
        if found:
            shown = ", ".join(f"{e} {s}" for e, s in sorted(found.items())[:limit])
            out.append(f"{sum(map(len, found.values()))} {label}: {shown}")
    return out


def breakdown(parts: list[tuple[float, float, float]]) -> str:
    """Where a step's bus time goes, p50 / p99 of each part (ms)."""
    names = ("observation published (acked)", "-> action made (policy, less its latency)",
             "-> action read (incl. the policy's table write and publish)")
    cells = [f"{n} {percentile((p[i] for p in parts), 0.5):.0f} / "
             f"{percentile((p[i] for p in parts), 0.99):.0f}" for i, n in enumerate(names)]
    return "p50 / p99 ms: " + ", ".join(cells)
