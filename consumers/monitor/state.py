"""What the monitor's pages show, folded from the topics' events: no I/O here.

`View.apply(event, timestamp_ms)` folds one event (any topic) into the view and says what
changed. Applying an event twice leaves the view as once (the log is read from its start
at each start; producers retry). Topics come in no order relative to one another: an
episode is made on the first event that names it and filled in as the rest arrives.
The rest are pure functions the pages use: an episode's state, the iteration's progress,
verdicts per criterion, set-of-marks boxes as shares of the screenshot, the search.
"""

from __future__ import annotations

import statistics
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from webgym_common.events import (
    ActionChosen,
    DeadLetter,
    DomainBlocked,
    EpisodeCompleted,
    EpisodeRequested,
    EpisodeScored,
    EvaluationResult,
    Event,
    IterationClosed,
    IterationStarted,
    Mark,
    ModelServed,
    ModelVersion,
    RolloutMetrics,
    StepObserved,
    TaskHistory,
    TrainingProgress,
)
from webgym_common.stream.deadletters import Letter
from webgym_common.tasks import suite_of
from webgym_common.timings import STEP_PHASES, mean_breakdown, step_breakdown

PHASE_STEPS = 500  # the step breakdown is over the last 500 actions
RATE_WINDOW_MS = 30_000  # steps/s is over the last 30 s of observations
LATENCIES = 200  # model-call latency: the median of the last 200 model actions


class EpisodeState(StrEnum):
    """Where an episode is; the grid's colours and the progress bar's parts."""

    WAITING = "waiting"  # requested, no step observed yet
    RUNNING = "running"
    DONE = "done"  # answered, or ran out of steps
    CRASHED = "crashed"
    BLOCKED = "blocked"
    TIMED_OUT = "timed_out"
    CANCELLED = "cancelled"


_BY_TERMINATION = {"answer": EpisodeState.DONE, "max_steps": EpisodeState.DONE,
                   "timeout": EpisodeState.TIMED_OUT, "crashed": EpisodeState.CRASHED,
                   "cancelled": EpisodeState.CANCELLED, "blocked": EpisodeState.BLOCKED}


def episode_state(steps_seen: bool, termination: str | None, scored: EpisodeScored | None
                  ) -> EpisodeState:
    """The evaluator's word wins (it detects walls the browser did not), then the browser's."""
    if scored is not None and scored.is_blocked:
        return EpisodeState.BLOCKED
    if scored is not None and scored.crashed:
        return EpisodeState.CRASHED
    if termination is not None:
        return _BY_TERMINATION.get(termination, EpisodeState.DONE)
    return EpisodeState.RUNNING if steps_seen else EpisodeState.WAITING


@dataclass
class Step:
    """One step as the viewer shows it: the observation and the action that answered it."""

    step: int
    url: str = ""
    title: str = ""
    screenshot_uri: str | None = None
    viewport: tuple[int, int] = (1280, 720)
    marks: list[Mark] = field(default_factory=list)
    action_effect: str | None = None
    error: str | None = None
    terminal: bool = False
    action: str = ""
    thought: str | None = None
    memory: str | None = None
    policy_version: str | None = None
    latency_ms: float | None = None
    timings_ms: dict[str, float] = field(default_factory=dict)  # the observation's
    action_timings_ms: dict[str, float] = field(default_factory=dict)  # its action's


@dataclass
class Episode:
    episode_id: str
    task_id: str = ""
    task_name: str = ""
    suite: str = ""
    iteration: int | None = None
    split: str = ""
    max_steps: int = 0
    policy_version: str = ""
    demonstration: bool = False
    termination: str | None = None
    reason: str | None = None
    answer: str | None = None
    scored: EpisodeScored | None = None
    steps: dict[int, Step] = field(default_factory=dict)
    updated_ms: int = 0

    @property
    def state(self) -> EpisodeState:
        return episode_state(bool(self.steps), self.termination, self.scored)

    @property
    def last_step(self) -> Step | None:
        return self.steps[max(self.steps)] if self.steps else None

    @property
    def reward(self) -> float | None:
        return None if self.scored is None else self.scored.reward

    def step(self, n: int) -> Step:
        return self.steps.setdefault(n, Step(n))

    def row(self) -> dict[str, Any]:
        """The grid's row (also what a live update carries): plain values only."""
        last = self.last_step
        acted = next((s for s in sorted(self.steps.values(), key=lambda s: -s.step)
                      if s.action), None)
        return {"id": self.episode_id, "task": self.task_id, "iteration": self.iteration,
                "state": self.state.value, "step": -1 if last is None else last.step,
                "action": acted.action if acted else "",
                "version": (acted.policy_version if acted and acted.policy_version
                            else self.policy_version),
                "reward": self.reward}


@dataclass(frozen=True)
class Change:
    """What an event changed that open pages show live."""

    episode: dict[str, Any] | None = None  # the episode's new grid row
    iteration: int | None = None  # a new current iteration: the live page reloads


@dataclass
class View:
    """Everything the pages show, folded from the topics (bounded by `max_episodes`)."""

    max_episodes: int = 2000
    max_letters: int = 500
    episodes: OrderedDict[str, Episode] = field(default_factory=OrderedDict)
    iterations: dict[int, IterationStarted] = field(default_factory=dict)
    closed: dict[int, IterationClosed] = field(default_factory=dict)
    metrics: dict[tuple[int, str], RolloutMetrics] = field(default_factory=dict)
    evaluations: dict[tuple[str, int, str, str, int], EvaluationResult] = field(
        default_factory=dict)
    losses: dict[str, dict[int, float]] = field(default_factory=dict)  # run id -> step -> loss
    run_versions: dict[str, int] = field(default_factory=dict)
    models: dict[tuple[str, int], ModelVersion] = field(default_factory=dict)
    served: dict[str, ModelServed] = field(default_factory=dict)
    histories: dict[str, TaskHistory] = field(default_factory=dict)
    blocked: dict[str, DomainBlocked] = field(default_factory=dict)
    letters: deque[Letter] = field(default_factory=deque)
    step_times: deque[int] = field(default_factory=lambda: deque(maxlen=20_000))
    latencies: deque[float] = field(default_factory=lambda: deque(maxlen=LATENCIES))
    acted: deque[tuple[str, int]] = field(default_factory=lambda: deque(maxlen=PHASE_STEPS))
    seen: set[str] = field(default_factory=set)  # event ids of one-off facts (letters, steps)

    @property
    def current_iteration(self) -> int | None:
        if self.iterations:
            return max(self.iterations)
        its = [e.iteration for e in self.episodes.values() if e.iteration is not None]
        return max(its) if its else None

    def episode(self, episode_id: str) -> Episode:
        ep = self.episodes.get(episode_id)
        if ep is None:
            ep = self.episodes[episode_id] = Episode(episode_id)
            while len(self.episodes) > self.max_episodes:
                self.episodes.popitem(last=False)  # the oldest episode is forgotten first
        return ep

    def apply(self, event: Event, timestamp_ms: int) -> Change | None:
        """Fold one event in; what changed that a live page shows (None: nothing live)."""
        before = self.current_iteration
        if isinstance(event, EpisodeRequested | StepObserved | ActionChosen
                      | EpisodeCompleted | EpisodeScored):
            ep = self._episode_event(event, timestamp_ms)
            after = self.current_iteration
            return Change(ep.row(), after if after != before else None)
        if isinstance(event, IterationStarted):
            self.iterations[event.iteration] = event
            after = self.current_iteration
            return Change(iteration=after) if after != before else None
        self._other_event(event)
        return None

    def _episode_event(self, event: Event, timestamp_ms: int) -> Episode:
        if isinstance(event, EpisodeRequested):
            ep = self.episode(event.episode_id)
            ep.task_id, ep.task_name = event.task.task_id, event.task.task_name
            ep.suite, ep.iteration, ep.split = suite_of(event.task).value, event.iteration, \
                event.split
            ep.max_steps, ep.policy_version = event.max_steps, event.policy_version
            ep.demonstration = event.demonstration
        elif isinstance(event, StepObserved):
            ep = self.episode(event.episode_id)
            ep.task_id = ep.task_id or event.task_id
            s = ep.step(event.step)
            if s.url == "" and event.event_id not in self.seen:  # the first observation wins
                self.seen.add(event.event_id)
                self.step_times.append(timestamp_ms)
            s.url, s.title, s.screenshot_uri = event.url, event.title, event.screenshot_uri
            s.viewport = (event.viewport.width, event.viewport.height)
            s.marks, s.action_effect, s.error = list(event.marks), event.action_effect, \
                event.error
            s.terminal, s.timings_ms = event.terminal, dict(event.timings_ms)
        elif isinstance(event, ActionChosen):
            ep = self.episode(event.episode_id)
            s = ep.step(event.step)
            if not s.action and event.prompt_tokens + event.completion_tokens > 0:
                self.latencies.append(event.latency_ms)  # a model's call, not a teacher's
            s.action, s.thought, s.memory = event.action_string, event.thought, event.memory_json
            s.policy_version, s.latency_ms = event.policy_version, event.latency_ms
            if not s.action_timings_ms:
                self.acted.append((event.episode_id, event.step))
            s.action_timings_ms = dict(event.timings_ms)
        elif isinstance(event, EpisodeCompleted):
            ep = self.episode(event.episode_id)
            ep.task_id = ep.task_id or event.task_id
            ep.iteration = event.iteration if ep.iteration is None else ep.iteration
            ep.termination, ep.reason, ep.answer = event.termination, event.reason, event.answer
        else:
            assert isinstance(event, EpisodeScored)
            ep = self.episode(event.episode_id)
            ep.scored = event
            ep.task_id = ep.task_id or event.task_id
            ep.iteration = event.iteration if ep.iteration is None else ep.iteration
            ep.termination = ep.termination or event.termination
            for t in event.trajectory:  # a re-scored history may have no observations left
                s = ep.step(t.step)
                s.url = s.url or t.url
                s.screenshot_uri = s.screenshot_uri or t.screenshot_uri
                s.action = s.action or t.action_string
                s.thought = s.thought if s.thought is not None else t.thought
                s.memory = s.memory if s.memory is not None else t.memory_json
                s.policy_version = s.policy_version or t.policy_version
        ep.updated_ms = max(ep.updated_ms, timestamp_ms)
        return ep

    def _other_event(self, event: Event) -> None:
        if isinstance(event, IterationClosed):
            self.closed[event.iteration] = event
        elif isinstance(event, RolloutMetrics):
            self.metrics[(event.iteration, event.split)] = event
        elif isinstance(event, EvaluationResult):
            self.evaluations[(event.model_name, event.version, event.suite, event.split,
                              event.seed)] = event
        elif isinstance(event, TrainingProgress):
            self.run_versions[event.run_id] = event.version
            if event.loss is not None:
                self.losses.setdefault(event.run_id, {})[event.step] = event.loss
        elif isinstance(event, ModelVersion):
            self.models[(event.model_name, event.version)] = event
        elif isinstance(event, ModelServed):
            self.served[event.model_name] = event
        elif isinstance(event, TaskHistory):
            self.histories[event.task_id] = event
        elif isinstance(event, DomainBlocked):
            self.blocked[event.domain] = event
        elif isinstance(event, DeadLetter) and event.event_id not in self.seen:
            self.seen.add(event.event_id)
            self.letters.appendleft(Letter.of(event))
            while len(self.letters) > self.max_letters:
                self.letters.pop()

    # -- what the live page shows --------------------------------------------------

    def grid(self, iteration: int | None) -> list[Episode]:
        return sorted((e for e in self.episodes.values() if e.iteration == iteration),
                      key=lambda e: e.episode_id)

    def rates(self, now_ms: int) -> dict[str, Any]:
        recent = sum(1 for t in self.step_times if now_ms - t <= RATE_WINDOW_MS)
        return {"steps_per_s": recent / (RATE_WINDOW_MS / 1000),
                "latency_ms": statistics.median(self.latencies) if self.latencies else None,
                "phases": self.phases()}

    def phases(self) -> dict[str, float]:
        """The mean of each phase of the last PHASE_STEPS steps (webgym_common.timings): an
        action with the observation that followed it."""
        steps = []
        for episode_id, n in self.acted:
            ep = self.episodes.get(episode_id)
            if ep is not None and n in ep.steps and n + 1 in ep.steps:
                steps.append(step_breakdown(ep.steps[n + 1].timings_ms,
                                            ep.steps[n].action_timings_ms))
        means = mean_breakdown(steps)
        return {p: round(means[p], 1) for p in STEP_PHASES if p in means}


def progress(episodes: list[Episode], requested: int | None = None) -> dict[str, int]:
    """The iteration's episodes by state, and how many were requested."""
    counts = {s.value: 0 for s in EpisodeState}
    for e in episodes:
        counts[e.state.value] += 1
    return {"requested": max(requested or 0, len(episodes)), **counts}
