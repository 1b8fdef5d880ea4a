"""What a run left in the topics, and the verdict on it (pure functions): the chaos
scenarios', the compose test's and the bus scale bench's.

A run's topics themselves (never the project's metrics as the truth) are read into
`Observed` (tests/chaos/observe.py, bench.bus_scale); `tally()` turns that into the table
row. The rules, per requested episode (an id of IterationStarted or of any
EpisodeRequested):

- lost: it has no EpisodeCompleted, or no EpisodeScored, by the end of the scenario;
- duplicated: it has more than one EpisodeCompleted or more than one EpisodeScored;
- wrong (counted per episode): its sandbox side effects are doubled (more form posts than its
  reference actions make once, or a different number when it ended with an answer); it ended
  early (crashed, blocked...) with no reason; its task history does not count it exactly once
  (the task's attempts differ from its scored episodes); the metrics of its iteration count
  a different number of episodes than were scored; with a replay processor in the run, the
  samples it published for the episode are not exactly those of its training-eligible steps
  (processors.replay_buffer.decisions; a sample re-published under its own id after a kill is fine:
  readers deduplicate by sample_id, and the table counts them as republished samples);
- ended early: any termination other than `answer` (the teacher answers every task);
- re-run posts: form posts re-sent, marked X-WebGym-Rerun, while a resumed episode's page
  was rebuilt, or sent again under an idempotency key already seen (X-WebGym-Step: the one
  action a killed owner ran without publishing its result); not counted as side effects of
  the episode, but a real site that ignores the key would see them;
- dlq: dead letters of good events (for the bad-input scenario, of events it did not inject).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from webgym_common.stream.deadletters import Letter


@dataclass(frozen=True)
class Completion:
    termination: str
    reason: str | None


@dataclass
class Observed:
    """The topics (and the sandbox's post counter) after a scenario."""

    episode_task: dict[str, str] = field(default_factory=dict)  # requested id -> task id
    completed: dict[str, list[Completion]] = field(default_factory=dict)
    scored: dict[str, int] = field(default_factory=dict)  # episode -> EpisodeScored events
    scored_task: dict[str, str] = field(default_factory=dict)
    history: dict[str, tuple[int, list[str]]] = field(default_factory=dict)  # attempts, ids
    metrics_episodes: dict[int, int] = field(default_factory=dict)  # iteration -> episodes
    scored_iteration: dict[str, int] = field(default_factory=dict)
    posts: dict[str, int] | None = None  # None: the sandbox could not attribute posts
    rerun_posts: dict[str, int] = field(default_factory=dict)  # re-sent on resume
    expected_posts: dict[str, int] = field(default_factory=dict)  # task -> posts once
    dlq: list[Letter] = field(default_factory=list)
    # With a replay processor: episode -> the sample ids due (its eligible steps) / published.
    samples_due: dict[str, set[str]] | None = None
    samples: dict[str, list[str]] = field(default_factory=dict)
    # episode -> observations published again, event id and all (browser.action_resend_s)
    resent: dict[str, int] = field(default_factory=dict)


@dataclass
class Tally:
    scenario: str
    episodes: int
    lost: int
    duplicated: int
    wrong: int
    ended_early: Counter[str]
    dlq: int
    rerun_posts: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return (self.lost, self.duplicated, self.wrong, self.dlq) == (0, 0, 0, 0)


def _short(ids: Iterable[str], limit: int = 4) -> str:
    ids = sorted(ids)
    more = f" (+{len(ids) - limit})" if len(ids) > limit else ""
    return ", ".join(ids[:limit]) + more


def wrong_side_effects(observed: Observed) -> dict[str, str]:
    """Episode -> what is wrong with the form posts it left on the sandbox sites."""
    if observed.posts is None:
        return {}
    out = {}
    for eid, task in observed.episode_task.items():
        expected = observed.expected_posts.get(task)
        if expected is None:
            continue
        posts = observed.posts.get(eid, 0)
        answered = [c for c in observed.completed.get(eid, []) if c.termination == "answer"]
        if posts > expected:
            out[eid] = f"{posts} form posts, its reference actions make {expected}"
        elif answered and posts != expected:
            out[eid] = f"answered after {posts} form posts of {expected}"
    return out


def history_miscounts(observed: Observed) -> dict[str, str]:
    """Episode -> how the task history miscounts it (attempts vs scored episodes of the task)."""
    scored_by_task: dict[str, set[str]] = {}
    for eid, task in observed.scored_task.items():
        scored_by_task.setdefault(task, set()).add(eid)
    out = {}
    # Only the run's own tasks: a bad event about an unknown task is the bad-input check's.
    for task in set(observed.episode_task.values()):
        scored = scored_by_task.get(task, set())
        attempts, ids = observed.history.get(task, (0, []))
        dup_ids = {i for i, n in Counter(ids).items() if n > 1}
        if attempts != len(scored) or dup_ids:
            what = f"task {task}: history counts {attempts} attempts, {len(scored)} scored"
            for eid in (scored - set(ids)) | dup_ids or scored or {f"({task})"}:
                out[eid] = what
    return out


def sample_miscounts(observed: Observed) -> dict[str, str]:
    """Episode -> what is wrong with its replay samples (missing, or of steps not eligible)."""
    if observed.samples_due is None:
        return {}
    out = {}
    for eid, due in observed.samples_due.items():
        published = set(observed.samples.get(eid, []))
        if missing := due - published:
            out[eid] = f"{len(missing)} of {len(due)} samples missing, e.g. {min(missing)}"
        elif extra := published - due:
            out[eid] = f"{len(extra)} samples of steps not eligible, e.g. {min(extra)}"
    return out


def republished_samples(observed: Observed) -> int:
    return sum(len(ids) - len(set(ids)) for ids in observed.samples.values())


def metrics_miscounts(observed: Observed) -> dict[str, str]:
    """Episode -> why its iteration's published metrics are wrong (episodes != scored)."""
    per_iteration: dict[int, set[str]] = {}
    for eid, it in observed.scored_iteration.items():
        per_iteration.setdefault(it, set()).add(eid)
    out = {}
    for it, reported in observed.metrics_episodes.items():
        scored = per_iteration.get(it, set())
        if reported != len(scored):
            for eid in scored or {f"(iteration {it})"}:
                out[eid] = (f"metrics of iteration {it} count {reported} episodes, "
                            f"{len(scored)} scored")
    return out


def tally(scenario: str, observed: Observed, allowed_dlq: int = 0) -> Tally:
    """The table row: counts per requested episode, and notes naming examples."""
    requested = observed.episode_task
    no_end = {e for e in requested if not observed.completed.get(e)}
    no_score = {e for e in requested if not observed.scored.get(e)}
    twice_done = {e for e, c in observed.completed.items() if e in requested and len(c) > 1}
    twice_scored = {e for e, n in observed.scored.items() if e in requested and n > 1}
    early: Counter[str] = Counter()
    silent = set()
    for eid in requested:
        for c in observed.completed.get(eid, [])[:1]:
            if c.termination != "answer":
                early[c.termination] += 1
                if not c.reason and c.termination != "max_steps":
                    silent.add(eid)
    side = wrong_side_effects(observed)
    history = history_miscounts(observed)
    metrics = metrics_miscounts(observed)
    samples = sample_miscounts(observed)
    wrong = set(side) | set(history) | set(metrics) | set(samples) | silent
    notes = []
    if no_end:
        notes.append(f"{len(no_end)} never completed: {_short(no_end)}")
    if no_score - no_end:
        notes.append(f"{len(no_score - no_end)} completed, never scored: "
                     f"{_short(no_score - no_end)}")
    if twice_done:
        kinds = {e: "/".join(c.termination for c in observed.completed[e]) for e in twice_done}
        notes.append(f"{len(twice_done)} completed twice: "
                     + _short(f"{e} ({k})" for e, k in kinds.items()))
    if twice_scored:
        notes.append(f"{len(twice_scored)} scored twice: {_short(twice_scored)}")
    for label, found in (("side effects", side), ("history", history), ("metrics", metrics),
                         ("replay samples", samples)):
        if found:
            eid = sorted(found)[0]
            notes.append(f"{label}: {len(found)} episodes, e.g. {eid}: {found[eid]}")
    if silent:
        notes.append(f"{len(silent)} ended early without a reason: {_short(silent)}")
    if observed.posts is None:
        notes.append("side effects not checked: the sandbox saw posts without "
                     "X-WebGym-Episode")
    if observed.samples_due is not None:
        notes.append(f"replay: {sum(map(len, observed.samples_due.values()))} samples due, "
                     f"{republished_samples(observed)} re-published under their own id")
    reruns = observed.rerun_posts
    if reruns:
        notes.append(f"{sum(reruns.values())} form posts re-sent as re-runs by "
                     f"{len(reruns)} resumed episodes, e.g. {_short(reruns, 2)}")
    if observed.resent:
        notes.append(f"{sum(observed.resent.values())} observations published again (no "
                     f"action in time) by {len(observed.resent)} episodes, e.g. "
                     f"{_short(observed.resent, 2)}")
    dlq = len(observed.dlq)
    if dlq > allowed_dlq:
        errors = Counter(f"{d.consumer_group}: {d.error[:70]}" for d in observed.dlq)
        notes.append(f"{dlq} dead letters, e.g. " + "; ".join(
            f"{n}× {e}" for e, n in errors.most_common(2)))
    return Tally(
        scenario=scenario, episodes=len(requested), lost=len(no_end | no_score),
        duplicated=len(twice_done | twice_scored), wrong=len(wrong), ended_early=early,
        dlq=dlq, rerun_posts=sum(reruns.values()), notes=notes,
    )


# -- when to strike ------------------------------------------------------------------------


@dataclass(frozen=True)
class Moment:
    """Strike once this many episodes have completed, plus a little more time."""

    after_completed: int
    extra_s: float

    def __str__(self) -> str:
        return f"after {self.after_completed} completed +{self.extra_s:.1f}s"


def moment(kind: str, seed: int, episodes: int, in_flight: int) -> Moment:
    """A seeded random moment while episodes are still in flight (before the last wave)."""
    rng = random.Random(f"{kind}/{seed}")
    latest = max(1, episodes - 2 * in_flight)
    return Moment(rng.randint(1, latest), round(rng.uniform(0.0, 3.0), 1))


# -- the table ---------------------------------------------------------------------------

COLUMNS = ("scenario", "episodes", "lost", "duplicated", "wrong", "ended early", "dlq",
           "re-run posts", "time")


def row(t: Tally) -> tuple[str, ...]:
    early = ", ".join(f"{n} {k}" for k, n in sorted(t.ended_early.items())) or "0"
    return (t.scenario, str(t.episodes), str(t.lost), str(t.duplicated), str(t.wrong), early,
            str(t.dlq), str(t.rerun_posts), f"{t.seconds:.0f}s")


def markdown(tallies: Iterable[Tally], header: Mapping[str, str] | None = None) -> str:
    lines = [f"{k}: {v}  " for k, v in (header or {}).items()]
    lines += ["", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    notes = []
    for t in tallies:
        lines.append("| " + " | ".join(row(t)) + " |")
        notes += [f"- {t.scenario}: {n}" for n in t.notes]
    if notes:
        lines += ["", *notes]
    return "\n".join(lines) + "\n"
