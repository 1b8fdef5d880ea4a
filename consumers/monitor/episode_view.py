"""What the episode pages show beside the state: the judge's verdicts, the set-of-marks boxes
over a screenshot, and the trajectory finder's filters (over state.View's episodes)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from consumers.monitor.state import Episode
from webgym_common.events import Mark
from webgym_common.history import is_success

# -- the viewer ------------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    check: str  # "criterion A", "blocking", "page", ...
    verdict: str  # "SUCCESS", "NOT BLOCKED", ...
    detail: str


_VERDICT = re.compile(r"^\[(?P<check>[^\]]+)\]\s*(?P<rest>.*)$")
_WORD = re.compile(r"^(?P<word>[A-Z][A-Z ]*[A-Z]|[A-Z])(?:\b|$)\s*(?:[—:-]\s*)?(?P<detail>.*)$")


def verdicts(evaluation: str, reward: float) -> list[Verdict]:
    """The evaluation text's `[check] VERDICT — detail` lines, one per criterion (the LLM
    judge's, the page's); a judgment without them (the rules judge's one line) is one row."""
    out = []
    lines = [x.strip() for x in evaluation.splitlines() if x.strip()]
    for line in lines:
        m = _VERDICT.match(line)
        if not m:
            continue
        w = _WORD.match(m["rest"])
        out.append(Verdict(m["check"], w["word"], w["detail"]) if w
                   else Verdict(m["check"], "", m["rest"]))
    if not out and lines:
        said = [x for x in lines if not x.startswith("reward ")] or lines
        out.append(Verdict("judgment", "SUCCESS" if is_success(reward) else "NOT SUCCESS",
                           "; ".join(said)))
    return out


@dataclass(frozen=True)
class Box:
    """A set-of-marks box in percent of the screenshot, so it scales with the image."""

    index: int
    name: str
    left: float
    top: float
    width: float
    height: float


def mark_boxes(marks: list[Mark], viewport: tuple[int, int]) -> list[Box]:
    """Marks inside the viewport, clipped to it (the screenshot is the viewport)."""
    vw, vh = max(viewport[0], 1), max(viewport[1], 1)
    out = []
    for m in marks:
        x0, y0 = max(m.x, 0.0), max(m.y, 0.0)
        x1, y1 = min(m.x + m.width, vw), min(m.y + m.height, vh)
        if x1 <= x0 or y1 <= y0:
            continue
        out.append(Box(m.index, m.name, round(100 * x0 / vw, 3), round(100 * y0 / vh, 3),
                       round(100 * (x1 - x0) / vw, 3), round(100 * (y1 - y0) / vh, 3)))
    return out


# -- the episode search ----------------------------------------------------------------


@dataclass(frozen=True)
class Query:
    """The trajectory finder's filters; None / "" = any."""

    iteration: int | None = None
    task: str = ""  # a substring of the task id or its text
    suite: str = ""
    reward: float | None = None
    termination: str = ""  # a termination or an EpisodeState
    version: str = ""

    @classmethod
    def parse(cls, params: dict[str, str]) -> Query:
        """From a query string; a value that does not parse is no filter."""
        def number(name: str, kind: type[int] | type[float]) -> Any:
            try:
                return kind(params[name]) if params.get(name, "").strip() else None
            except ValueError:
                return None

        return cls(number("iteration", int), params.get("task", "").strip(),
                   params.get("suite", "").strip(), number("reward", float),
                   params.get("termination", "").strip(), params.get("version", "").strip())


def matches(e: Episode, q: Query) -> bool:
    versions = {e.policy_version, *(s.policy_version for s in e.steps.values())}
    return ((q.iteration is None or e.iteration == q.iteration)
            and (not q.task or q.task.lower() in f"{e.task_id} {e.task_name}".lower())
            and (not q.suite or e.suite == q.suite)
            and (q.reward is None or e.reward == q.reward)
            and (not q.termination or q.termination in (e.termination, e.state.value))
            and (not q.version or q.version in versions))


def find(episodes: list[Episode], q: Query, limit: int = 500) -> list[Episode]:
    """Matching episodes, newest first."""
    hits = [e for e in episodes if matches(e, q)]
    return sorted(hits, key=lambda e: -e.updated_ms)[:limit]
