"""WebGym's verifiable reward, as pure aggregation over a judge's verdicts.

1. Select the screenshots to judge: the last `max_screenshots` (48) distinct pages.
2. Blocking check on up to `blocking_sample` (20) of them, evenly sampled.
3. Criterion B once: every claim in the answer is visible in the evidence.
4. Criterion A once per fact group: evidence for the group ("OR": any one fact).
5. With a definite answer, one more check against it.
Reward is 1 only if B, every A and the definite-answer check pass.

The judge is anything with `async ask(Question) -> Verdict` (judge.py's LLM
client, or a fake in tests); `judge=None` scores by the rules alone.

A task with an environment (a MiniWoB++ page) is scored by its page instead, with no
judge: reward 1 when the page's raw reward is > 0, else 0; without a page reward (the
page could not be read) reward 0, counted as crashed (no verdict the agent earned).

A check the judge could not answer (unreachable after its retries, no verdict
line) makes no reward: the Judgement is a judge failure, reward 0 with an
evaluation that starts with webgym_common.history.JUDGE_FAILED, which history
and metrics do not count as an attempt (a 0 the agent did not earn).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Literal, Protocol

from processors.evaluator import rules
from processors.evaluator.trajectory import Episode, FactGroupRef, StepEvidence, TaskFacts
from webgym_common.history import JUDGE_FAILED

RULES_VERSION = "rules-v1"
PAGE_VERSION = "page-v1"  # the evaluator_version of episodes scored by their page
QuestionKind = Literal["blocking", "criterion_b", "criterion_a", "definite_answer"]
_EVALUATION_LINE_CHARS = 1200


@dataclass(frozen=True)
class Question:
    kind: QuestionKind
    label: str  # names the check in the evaluation text
    task: TaskFacts
    answer: str | None
    evidence: tuple[StepEvidence, ...] = ()
    fact_group: FactGroupRef | None = None


@dataclass(frozen=True)
class Verdict:
    success: bool  # SUCCESS (or BLOCKED for the blocking check)
    analysis: str = ""
    reason: str = ""  # set when the verdict did not come from the judge's verdict line
    failed: bool = False  # the judge could not be asked (timeout, connection error)


class Judge(Protocol):
    version: str

    async def ask(self, question: Question) -> Verdict: ...


@dataclass(frozen=True)
class Judgement:
    reward: float
    evaluation: str
    is_blocked: bool
    crashed: bool
    submit: bool
    submission_judgment: str | None
    judge_failed: bool = False  # no reward: a check could not be judged (see the module doc)


# -- which steps the judge sees ------------------------------------------------------


def select_screenshots(trajectory: tuple[StepEvidence, ...] | list[StepEvidence],
                       limit: int = 48) -> list[StepEvidence]:
    """Observed pages, a run of identical screenshots collapsed to its last step, the last N."""
    picked: list[StepEvidence] = []
    for step in trajectory:
        if not step.observed:
            continue
        if picked and _same_page(picked[-1], step):
            picked[-1] = step
        else:
            picked.append(step)
    return picked[-limit:] if limit > 0 else []


def _same_page(a: StepEvidence, b: StepEvidence) -> bool:
    if a.screenshot_sha256 and b.screenshot_sha256:
        return a.screenshot_sha256 == b.screenshot_sha256
    return (a.url, a.page_text) == (b.url, b.page_text)


def sample_evenly(steps: list[StepEvidence], limit: int = 20) -> list[StepEvidence]:
    """At most `limit` steps spread over the whole list, first and last included."""
    if len(steps) <= limit:
        return list(steps)
    if limit == 1:
        return [steps[-1]]
    picks = sorted({round(i * (len(steps) - 1) / (limit - 1)) for i in range(limit)})
    return [steps[i] for i in picks]


# -- scoring -----------------------------------------------------------------------


async def evaluate(episode: Episode, judge: Judge | None, max_screenshots: int = 48,
                   blocking_sample: int = 20) -> Judgement:
    """The reward record of one finished episode."""
    if scored_by_page(episode):
        return by_page(episode)
    blocked_by_browser = episode.termination == "blocked"
    if judge is None:
        return _by_rules(episode, blocked_by_browser or rules.ends_on_wall(episode))
    selected = select_screenshots(episode.trajectory, max_screenshots)
    lines: list[str] = []
    is_blocked = blocked_by_browser
    if blocked_by_browser:
        lines.append(f"[blocking] BLOCKED (the browser: {episode.reason or 'blocked'})")
    elif selected:
        sample = tuple(sample_evenly(selected, blocking_sample))
        verdict = await judge.ask(Question("blocking", "blocking", episode.task, episode.answer,
                                           sample))
        lines.append(_line("blocking", verdict, "BLOCKED", "NOT BLOCKED"))
        if verdict.failed:
            return judge_failure(episode, [("blocking", verdict)], lines)
        is_blocked = verdict.success
    crash = rules.crash_reason(episode, is_blocked)
    if crash or not episode.submitted:
        why = f"crashed: {crash}" if crash else f"no answer (ended by {episode.termination})"
        return Judgement(0.0, "\n".join([*lines, f"{why}; not judged", "reward 0"]),
                         is_blocked, crash is not None, episode.submitted, None)
    verdicts = await _criteria(episode, judge, tuple(selected))
    lines += [_line(label, v) for label, v in verdicts]
    if any(v.failed for _, v in verdicts):
        return judge_failure(episode, verdicts, lines, is_blocked)
    passed = all(v.success for _, v in verdicts)
    lines.append(f"reward {int(passed)}: " + ("every check passed" if passed else "failed: " + (
        ", ".join(label for label, v in verdicts if not v.success))))
    judgment = "; ".join(_line(label, v, detail=False) for label, v in verdicts
                         if label in ("criterion B", "definite answer"))
    return Judgement(1.0 if passed else 0.0, "\n".join(lines), is_blocked, False, True, judgment)


def scored_by_page(episode: Episode) -> bool:
    return episode.task.environment is not None


def by_page(episode: Episode) -> Judgement:
    """The page's own verdict (MiniWoB++'s raw reward, -1..1, > 0 solved); no judge asked."""
    env, raw, ended = episode.task.environment, episode.page_reward, episode.termination
    why = f"ended by {ended}" + (f": {episode.reason}" if episode.reason else "")
    if raw is None:
        return Judgement(0.0, f"[page] no reward from the page ({env}): it could not be read "
                              f"({why})\nreward 0", False, True, False, None)
    solved = raw > 0
    judgment = f"the page ({env}) gave raw reward {raw:g}"
    text = (f"[page] reward from the page ({env}): raw reward {raw:g}, "
            f"{'solved' if solved else 'not solved'} ({why}); no judge\nreward {int(solved)}")
    # submit: the page gave a verdict (it reports 0 only while its episode is not done).
    return Judgement(1.0 if solved else 0.0, text, False, ended == "crashed", raw != 0,
                     judgment)


def judge_failure(episode: Episode, verdicts: list[tuple[str, Verdict]], lines: list[str],
                  is_blocked: bool = False) -> Judgement:
    """No reward: which checks the judge could not answer, first, under the JUDGE_FAILED mark."""
    failed = [f"{label} ({v.reason})" for label, v in verdicts if v.failed]
    head = f"{JUDGE_FAILED}: {'; '.join(failed)}; no reward, not counted as an attempt"
    return Judgement(0.0, "\n".join([head, *lines]), is_blocked, False, episode.submitted,
                     None, judge_failed=True)


async def _criteria(episode: Episode, judge: Judge,
                    evidence: tuple[StepEvidence, ...]) -> list[tuple[str, Verdict]]:
    """Criterion B, each criterion A and the definite-answer check, asked concurrently."""
    task, answer = episode.task, episode.answer
    questions = [Question("criterion_b", "criterion B", task, answer, evidence)]
    for group in task.fact_groups:
        label = f"criterion A {group.id} ({group.description})"
        questions.append(Question("criterion_a", label, task, answer, evidence, group))
    definite: list[tuple[str, Verdict]] = []
    if task.definite_answer is not None:
        if rules.answers_match(answer, task.definite_answer):
            definite.append(("definite answer", Verdict(
                True, f"the answer matches {task.definite_answer!r} after normalization")))
        else:
            questions.append(Question("definite_answer", "definite answer", task, answer))
    asked = await asyncio.gather(*(judge.ask(q) for q in questions))
    return [(q.label, v) for q, v in zip(questions, asked, strict=True)] + definite


def _by_rules(episode: Episode, is_blocked: bool) -> Judgement:
    crash = rules.crash_reason(episode, is_blocked)
    expected = episode.task.definite_answer
    judgment = None
    if crash:
        reward, text = 0.0, f"crashed: {crash}"
    elif not episode.submitted:
        reward, text = 0.0, f"no answer (ended by {episode.termination})"
    elif expected is None:
        reward, text = 0.0, "no definite answer to check against"
    elif rules.answers_match(episode.answer, expected):
        reward, judgment = 1.0, f"the answer matches the definite answer {expected!r}"
        text = judgment
    else:
        reward = 0.0
        judgment = f"the answer {episode.answer!r} does not match the definite answer {expected!r}"
        text = judgment
    blocked = ["blocked: the last page is an anti-bot or 403 wall"] if is_blocked else []
    evaluation = "\n".join([*blocked, text, f"reward {int(reward)}"])
    return Judgement(reward, evaluation, is_blocked, crash is not None, episode.submitted,
                     judgment)


def _line(label: str, verdict: Verdict, yes: str = "SUCCESS", no: str = "NOT SUCCESS",
          detail: bool = True) -> str:
    """`[criterion B] NOT SUCCESS — why`: one line of the evaluation text per check."""
    word = yes if verdict.success else no
    if not detail:
        return f"[{label}] {word}"
    detail_text = "; ".join(x for x in (verdict.reason, " ".join(verdict.analysis.split())) if x)
    if len(detail_text) > _EVALUATION_LINE_CHARS:
        detail_text = detail_text[:_EVALUATION_LINE_CHARS] + " ..."
    return f"[{label}] {word}" + (f" — {detail_text}" if detail_text else "")
