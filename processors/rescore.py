"""`webgym replay rescore`: past episodes scored again by a chosen judge, into a new topic.

Delivery: exactly once per episode per run, resumable when killed. The run is its target
topic (a new topic, created like webgym.episodes.scored; never the pipeline's own). At start
the target is read to its end (committed records only) and every episode already there is
skipped; new scores go out in Kafka transactions of a producer fenced by the target's name
(webgym_common.derived), so a killed run's half-written batch is aborted, and a restarted
run writes exactly what is missing. Keys are task ids, as on webgym.episodes.scored, so the
history and replay folds can read a derived topic as they read the original.

Consume: the completions in the range and each one's request, observations and actions
(webgym_common.episode_log), and the first score the pipeline gave it. Decide: the trajectory
is rebuilt with the evaluator's own code (processors.evaluator.trajectory) and scored with
its own reward (processors.evaluator.reward.evaluate): the rules, or the LLM judge with
WebGym's structure and strict verdicts (a reply with no verdict line is asked again and then
a judge failure, reported, never a 0). Publish: EpisodeScored with its provenance (judge
kind, evaluator version, judge model, prompt version, run). At the end: the agreement of the
old and the new rewards (counts, Cohen's kappa, the episodes that flipped).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal

from processors.evaluator import judge as llm_judge
from processors.evaluator.decisions import scored_event, scored_key, trajectory_error
from processors.evaluator.reward import (
    PAGE_VERSION,
    RULES_VERSION,
    Judge,
    Judgement,
    evaluate,
    scored_by_page,
    select_screenshots,
)
from processors.evaluator.trajectory import (
    Episode,
    StepEvidence,
    action_record,
    build_episode,
    observation_record,
    request_record,
)
from webgym_common.bus import EventProducer
from webgym_common.config import EvaluatorSettings, JudgeKind, Settings
from webgym_common.derived import DerivedWriter, create_derived, written
from webgym_common.episode_log import EpisodeLog, read_episodes
from webgym_common.events import EpisodeCompleted, EpisodeScored, Event, StepObserved
from webgym_common.history import is_judged, is_success
from webgym_common.logrange import LogRange
from webgym_common.topics import Topic

BATCH = 32  # episodes judged at once and written in one transaction
Outcome = Literal["success", "failure", "unjudged", "none"]
Progress = Callable[[str, int, int], None]  # phase, done, total


# -- provenance ------------------------------------------------------------------------


@dataclass(frozen=True)
class Provenance:
    judge_kind: str  # rules | llm (page when the page scored itself)
    evaluator_version: str
    judge_model: str | None
    prompt_version: str | None
    run: str


def prompt_version() -> str:
    """The LLM judge's prompts as a short digest: any edit to them is a new version."""
    text = json.dumps([llm_judge.SYSTEM, llm_judge.QUESTIONS, llm_judge.JUDGE_VERSION],
                      sort_keys=True)
    return f"judge-prompts-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


def provenance(kind: JudgeKind, judge: Judge | None, model: str | None, run: str) -> Provenance:
    if kind is JudgeKind.LLM and judge is not None:
        return Provenance("llm", judge.version, model, prompt_version(), run)
    return Provenance("rules", RULES_VERSION, None, None, run)


# -- deciding --------------------------------------------------------------------------


def episode_of(log: EpisodeLog, episode_id: str, cfg: EvaluatorSettings
               ) -> tuple[EpisodeCompleted, Episode] | str:
    """The episode rebuilt as the evaluator builds it, or why it cannot be."""
    done = log.completions[episode_id]
    request = log.requests.get(episode_id)
    record = request_record(request) if request is not None else None
    if (why := trajectory_error(done, record)) is not None:
        return why
    observations = {s: observation_record(o, cfg.page_text_chars)
                    for s, o in log.observations.get(episode_id, {}).items()}
    actions = {s: action_record(a) for s, a in log.actions.get(episode_id, {}).items()}
    return done, build_episode(done, record, observations, actions)


def rescored(done: EpisodeCompleted, episode: Episode, judgement: Judgement,
             prov: Provenance) -> EpisodeScored:
    """The evaluator's EpisodeScored for this judgement, with the re-scoring's provenance."""
    by_page = scored_by_page(episode)
    base = scored_event(done, episode, judgement,
                        PAGE_VERSION if by_page else prov.evaluator_version)
    return base.model_copy(update={
        "judge_kind": "page" if by_page else prov.judge_kind,
        "judge_model": None if by_page else prov.judge_model,
        "prompt_version": None if by_page else prov.prompt_version,
        "rescore_run": prov.run,
    })


def keypoint_steps(limit: int) -> Callable[[Sequence[StepObserved]], list[int]]:
    """The steps whose screenshots the judge is shown (the evaluator's keypoint selection:
    runs of one page collapsed, the last `limit`), for exports in WebGym's layout."""
    def pick(observed: Sequence[StepObserved]) -> list[int]:
        evidence = [StepEvidence(step=o.step, url=o.url, title=o.title,
                                 page_text=o.accessibility_tree,
                                 screenshot_sha256=o.screenshot_sha256) for o in observed]
        return [e.step for e in select_screenshots(evidence, limit)]
    return pick


def rescore_key(event: Event) -> str | None:
    """What makes a score on the target unique within its run: the episode."""
    return event.episode_id if isinstance(event, EpisodeScored) else None


# -- agreement -------------------------------------------------------------------------


def outcome(scored: EpisodeScored | None) -> Outcome:
    if scored is None:
        return "none"
    if not is_judged(scored):
        return "unjudged"
    return "success" if is_success(scored.reward) else "failure"


def cohen_kappa(both_success: int, old_only: int, new_only: int, both_failure: int) -> float:
    """Cohen's kappa of two raters on a yes/no question: (p_o - p_e) / (1 - p_e).

    `old_only`: the old said success, the new failure; `new_only` the other way. Raters that
    agree on everything and never vary (p_e = 1) agree perfectly: 1.0; no pairs: nan."""
    n = both_success + old_only + new_only + both_failure
    if n == 0:
        return float("nan")
    observed = (both_success + both_failure) / n
    old_yes, new_yes = (both_success + old_only) / n, (both_success + new_only) / n
    expected = old_yes * new_yes + (1 - old_yes) * (1 - new_yes)
    if expected >= 1.0:
        return 1.0
    return (observed - expected) / (1 - expected)


@dataclass(frozen=True)
class Flip:
    episode_id: str
    task_id: str
    old_reward: float
    new_reward: float
    old_evaluator: str
    new_evaluator: str
    why: str  # the new evaluation's last line


@dataclass
class Agreement:
    episodes: int = 0
    both_success: int = 0
    both_failure: int = 0
    old_success_new_failure: int = 0
    old_failure_new_success: int = 0
    unjudged_old: list[str] = field(default_factory=list)  # judge failures, either side
    unjudged_new: list[str] = field(default_factory=list)
    no_old_score: list[str] = field(default_factory=list)
    kappa: float = float("nan")
    flipped: list[Flip] = field(default_factory=list)

    @property
    def compared(self) -> int:
        return (self.both_success + self.both_failure + self.old_success_new_failure
                + self.old_failure_new_success)


def agreement(pairs: Iterable[tuple[EpisodeScored | None, EpisodeScored]]) -> Agreement:
    """Old against new, episode by episode; judge failures and missing old scores are counted
    apart (neither a success nor a failure)."""
    a = Agreement()
    for old, new in pairs:
        a.episodes += 1
        o, n = outcome(old), outcome(new)
        if o == "none":
            a.no_old_score.append(new.episode_id)
        elif o == "unjudged":
            a.unjudged_old.append(new.episode_id)
        if n == "unjudged":
            a.unjudged_new.append(new.episode_id)
        if o not in ("success", "failure") or n not in ("success", "failure"):
            continue
        if o == n == "success":
            a.both_success += 1
        elif o == n == "failure":
            a.both_failure += 1
        else:
            assert old is not None
            if o == "success":
                a.old_success_new_failure += 1
            else:
                a.old_failure_new_success += 1
            a.flipped.append(Flip(new.episode_id, new.task_id, old.reward, new.reward,
                                  old.evaluator_version, new.evaluator_version,
                                  (new.evaluation.strip().splitlines() or [""])[-1]))
    a.kappa = cohen_kappa(a.both_success, a.old_success_new_failure,
                          a.old_failure_new_success, a.both_failure)
    return a


def report_dict(a: Agreement, target: str, prov: Provenance) -> dict[str, object]:
    out = asdict(a)
    out["kappa"] = None if a.kappa != a.kappa else round(a.kappa, 4)  # nan is not JSON
    out["compared"] = a.compared
    out["target"] = target
    out["provenance"] = asdict(prov)
    return out


def report_markdown(a: Agreement, target: str, prov: Provenance) -> str:
    kappa = "n/a" if a.kappa != a.kappa else f"{a.kappa:.3f}"
    lines = [
        f"# Re-scoring agreement: {target}", "",
        f"judge {prov.judge_kind} ({prov.evaluator_version}"
        + (f", model {prov.judge_model}, prompts {prov.prompt_version}" if prov.judge_model
           else "") + ")", "",
        "| | new success | new failure |", "|---|---|---|",
        f"| **old success** | {a.both_success} | {a.old_success_new_failure} |",
        f"| **old failure** | {a.old_failure_new_success} | {a.both_failure} |", "",
        f"episodes {a.episodes}, compared {a.compared}, Cohen's kappa {kappa}; judge failures: "
        f"old {len(a.unjudged_old)}, new {len(a.unjudged_new)}; no old score "
        f"{len(a.no_old_score)}", "",
    ]
    if a.flipped:
        lines += ["## Flipped", "", "| episode | task | old | new | why (new) |",
                  "|---|---|---|---|---|"]
        lines += [f"| {f.episode_id} | {f.task_id} | {f.old_reward:g} | {f.new_reward:g} | "
                  f"{f.why.replace('|', '/')} |" for f in a.flipped]
    if a.unjudged_new:
        lines += ["", "## Judge failures (new)", "", *(f"- {e}" for e in a.unjudged_new)]
    return "\n".join(lines) + "\n"


# -- the run ----------------------------------------------------------------------------


@dataclass
class RescoreResult:
    target: str
    provenance: Provenance
    selected: int = 0
    written: int = 0
    resumed: int = 0  # on the target already (an earlier, killed run)
    steps: int = 0
    records: int = 0
    unscorable: dict[str, str] = field(default_factory=dict)  # episode -> why
    seconds: float = 0.0
    agreement: Agreement = field(default_factory=Agreement)


async def rescore(settings: Settings, target: str, rng: LogRange, judge: Judge | None,
                  prov: Provenance, on_progress: Progress | None = None,
                  stop_after: int | None = None) -> RescoreResult:
    """Score the range's episodes again into `target` (see the module doc). `stop_after`:
    write at most that many batches, then return (tests)."""
    started = time.perf_counter()
    cfg, result = settings.evaluator, RescoreResult(target, prov)
    await create_derived(settings, Topic.EPISODES_SCORED, target)
    async with EventProducer(settings, client_id="replay-rescore") as producer:
        # consume
        done = {k: v for k, v in (await written(settings, producer, target, rescore_key)).items()
                if isinstance(v, EpisodeScored)}
        log = await read_episodes(settings, producer, rng, on_read=on_progress)
        result.selected, result.records = len(log.completions), log.records
        todo = [eid for eid in log.completions if eid not in done]
        result.resumed = len(log.completions) - len(todo)
        new: dict[str, EpisodeScored] = {}
        async with DerivedWriter(settings, target, producer) as writer:
            for batch_no, first in enumerate(range(0, len(todo), BATCH)):
                if stop_after is not None and batch_no >= stop_after:
                    break
                # decide
                scored = await asyncio.gather(*(_score(log, eid, judge, prov, cfg)
                                                for eid in todo[first:first + BATCH]))
                # publish
                ready = [s for s in scored if isinstance(s, EpisodeScored)]
                await writer.write([(scored_key(s), s) for s in ready])
                for eid, s in zip(todo[first:first + BATCH], scored, strict=True):
                    if isinstance(s, str):
                        result.unscorable[eid] = s
                new.update((s.episode_id, s) for s in ready)
                result.written += len(ready)
                result.steps += sum(log.steps(s.episode_id) for s in ready)
                if on_progress is not None:
                    on_progress("scoring", first + len(scored), len(todo))
    mine = {**{eid: s for eid, s in done.items() if eid in log.completions}, **new}
    result.agreement = agreement((log.scores.get(eid), mine[eid]) for eid in log.completions
                                 if eid in mine)
    result.seconds = time.perf_counter() - started
    return result


async def _score(log: EpisodeLog, episode_id: str, judge: Judge | None, prov: Provenance,
                 cfg: EvaluatorSettings) -> EpisodeScored | str:
    built = episode_of(log, episode_id, cfg)
    if isinstance(built, str):
        return built
    done, episode = built
    judgement = await evaluate(episode, judge, cfg.max_screenshots, cfg.blocking_sample)
    return rescored(done, episode, judgement, prov)
