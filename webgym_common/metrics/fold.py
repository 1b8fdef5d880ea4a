"""The metrics' definitions and their fold: pure, no I/O (the rules: the package docstring)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from webgym_common.agent.actions import parse_action
from webgym_common.events import EpisodeScored, Event, IterationClosed, RolloutMetrics
from webgym_common.history import is_judged, is_success
from webgym_common.versions import is_demonstration_version

METRICS = ("crashed_rate", "blocked_rate", "success_rate", "avg_steps",
           "avg_chars_per_response", "goback_rate")
DEMONSTRATION_COLUMNS = ("policy_episodes", "demonstrations", "demonstration_success_rate")
# The new columns go last: a reader that picks columns by position still finds the old ones.
CSV_COLUMNS = ("iteration", "split", "episodes", *METRICS, "evaluator_version",
               *DEMONSTRATION_COLUMNS)


@dataclass(frozen=True)
class EpisodeSummary:
    """What the metrics need of one episode (the process keeps these, not trajectories)."""

    episode_id: str
    split: str
    crashed: bool
    blocked: bool
    success: bool
    steps: int
    responses: int
    response_chars: int
    gobacks: int
    evaluator_version: str
    demonstration: bool = False  # teacher-forced: counted apart, never the policy's success


def summarize(e: EpisodeScored) -> EpisodeSummary:
    return EpisodeSummary(
        episode_id=e.episode_id, split=e.split, crashed=e.crashed, blocked=e.is_blocked,
        success=is_success(e.reward), steps=e.steps, responses=len(e.trajectory),
        response_chars=sum(len(s.raw_response) for s in e.trajectory),
        gobacks=sum(parse_action(s.action_string).kind == "GoBack" for s in e.trajectory),
        evaluator_version=e.evaluator_version,
        demonstration=is_demonstration_version(e.policy_version),
    )


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def _valid(eps: list[EpisodeSummary]) -> list[EpisodeSummary]:
    return [e for e in eps if not e.crashed and not e.blocked]


def metrics_from(iteration: int, split: str, eps: list[EpisodeSummary]) -> RolloutMetrics:
    """The iteration's metrics: every rate over the policy's own episodes, the
    demonstrations counted apart."""
    demos = [e for e in eps if e.demonstration]
    own = [e for e in eps if not e.demonstration]
    ok = [e for e in own if not e.crashed]
    valid = _valid(own)
    steps = sum(e.steps for e in valid)
    demos_valid = _valid(demos)
    return RolloutMetrics(
        iteration=iteration, split=split, episodes=len(eps),
        crashed_rate=_ratio(len(own) - len(ok), len(own)),
        blocked_rate=_ratio(sum(e.blocked for e in ok), len(ok)),
        success_rate=_ratio(sum(e.success for e in valid), len(valid)),
        avg_steps=_ratio(steps, len(valid)),
        avg_chars_per_response=_ratio(sum(e.response_chars for e in valid),
                                      sum(e.responses for e in valid)),
        goback_rate=_ratio(sum(e.gobacks for e in valid), steps),
        evaluator_version=",".join(sorted({e.evaluator_version for e in eps})),
        demonstrations=len(demos),
        demonstration_success_rate=_ratio(sum(e.success for e in demos_valid), len(demos_valid)),
    )


def policy_episodes(m: RolloutMetrics) -> int:
    """The policy's own episodes: the ones every rate but demonstration_success_rate is over."""
    return m.episodes - m.demonstrations


def column(m: RolloutMetrics, name: str) -> int | float | str:
    """A CSV, table or TensorBoard column's value (policy_episodes is derived, the rest are
    fields)."""
    return policy_episodes(m) if name == "policy_episodes" else getattr(m, name)


def compute_metrics(iteration: int, split: str, scored: list[EpisodeScored]) -> RolloutMetrics:
    """Metrics of one iteration and split; other iterations' episodes and repeats are ignored."""
    first: dict[str, EpisodeSummary] = {}
    for e in scored:
        if (e.iteration == iteration and e.split == split and e.episode_id not in first
                and is_judged(e)):
            first[e.episode_id] = summarize(e)
    return metrics_from(iteration, split, list(first.values()))


def same_numbers(a: RolloutMetrics, b: RolloutMetrics | None) -> bool:
    skip = {"event_id", "produced_at"}
    return b is not None and a.model_dump(exclude=skip) == b.model_dump(exclude=skip)


@dataclass
class MetricsFold:
    """Episodes per iteration, the closed iterations and the published metrics table."""

    table: dict[int, RolloutMetrics] = field(default_factory=dict)  # webgym.metrics
    episodes: dict[int, dict[str, EpisodeSummary]] = field(default_factory=dict)
    closed: dict[int, IterationClosed] = field(default_factory=dict)
    dirty: set[int] = field(default_factory=set)

    def fold(self, events: Iterable[Event]) -> None:
        for e in events:
            if isinstance(e, EpisodeScored) and is_judged(e):
                seen = self.episodes.setdefault(e.iteration, {})
                if e.episode_id not in seen:
                    seen[e.episode_id] = summarize(e)
                    self.dirty.add(e.iteration)
            elif isinstance(e, IterationClosed):
                self.closed[e.iteration] = e
                self.dirty.add(e.iteration)
            elif isinstance(e, RolloutMetrics):  # published numbers: are they still right?
                self.table[e.iteration] = e
                self.dirty.add(e.iteration)

    def changed(self) -> list[RolloutMetrics]:
        """Metrics of the closed iterations touched since the last call whose numbers differ
        from the table's (the ones to publish)."""
        ready = sorted(self.dirty & self.closed.keys())
        self.dirty -= set(ready)
        out = []
        for it in ready:
            split = self.closed[it].split
            m = metrics_from(it, split, [e for e in self.episodes.get(it, {}).values()
                                         if e.split == split])
            if not same_numbers(m, self.table.get(it)):
                out.append(m)
        return out
