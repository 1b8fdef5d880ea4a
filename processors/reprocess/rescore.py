"""`webgym reprocess rescore`: past episodes scored again by a chosen judge, into a new topic.

Delivery: exactly once per episode per run, resumable when killed. The run is its target
topic (a new topic, created like webgym.episodes.scored; never the pipeline's own). At start
the target is read to its end (committed records only) and every episode already there is
skipped; new scores go out in Kafka transactions of a producer fenced by the target's name
(processors.reprocess.derived), so a killed run's half-written batch is aborted, and a restarted
run writes exactly what is missing. Keys are task ids, as on webgym.episodes.scored, so the
history and replay folds can read a derived topic as they read the original.

Consume: the completions in the range and each one's request, observations and actions
(webgym_common.logrange.episodes), and the first score the pipeline gave it. Decide: the trajectory
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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

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
from processors.reprocess.agreement import Agreement, Provenance, agreement
from processors.reprocess.derived import DerivedWriter, on_target
from processors.reprocess.heap import in_job_heap
from webgym_common.choices import JudgeKind
from webgym_common.config import EvaluatorSettings, Settings
from webgym_common.events import EpisodeCompleted, EpisodeScored, Event, StepObserved
from webgym_common.logrange.bounds import LogRange
from webgym_common.logrange.episodes import EpisodeLog, read_episodes
from webgym_common.stream.bus import EventProducer
from webgym_common.topics import Topic

# Episodes judged at once and written in one transaction. A transaction costs a few broker
# round trips, most of a rules re-scoring's time at 32 a batch; an LLM judge's batch is what
# a kill loses (judged again after the restart), so it is kept small.
BATCH_RULES = 256
BATCH_LLM = 16
Progress = Callable[[str, int, int], None]  # phase, done, total
# What a re-scoring reads of the parts, by event: the fields the evaluator's step records
# take (processors.evaluator.trajectory: observation_record, action_record) and those the
# agreement takes of the old score. The others (an observation's marks and timings, the old
# score's trajectory) are skipped undecoded (Codec.projected): most of an observation's
# bytes and of its decoding when the page has many marks. Fields with no default are read
# whatever this says.
READS = {
    "StepObserved": {"episode_id", "step", "url", "title", "accessibility_tree",
                     "screenshot_uri", "screenshot_sha256", "screenshot_format"},
    "ActionChosen": {"episode_id", "step", "action", "action_string", "thought",
                     "memory_json", "raw_response", "prompt_uri", "policy_version"},
    "EpisodeScored": {"episode_id", "task_id", "reward", "evaluation", "is_blocked",
                      "evaluator_version"},
}


# -- provenance ------------------------------------------------------------------------


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


def episode_of(log: EpisodeLog, episode_id: str, cfg: EvaluatorSettings,
               every_page: bool = True) -> tuple[EpisodeCompleted, Episode] | str:
    """The episode rebuilt as the evaluator builds it, or why it cannot be.

    `every_page` False: page text for the last observed step only. The rules read no other
    (rules.ends_on_wall), and cutting an accessibility tree to a judge's excerpt is most of
    the cost of a rules re-scoring."""
    done = log.completions[episode_id]
    request = log.requests.get(episode_id)
    record = request_record(request) if request is not None else None
    if (why := trajectory_error(done, record)) is not None:
        return why
    observed = log.observations.get(episode_id, {})
    last = max(observed, default=-1)
    observations = {s: observation_record(
        o if every_page or s == last else o.model_copy(update={"accessibility_tree": ""}),
        cfg.page_text_chars) for s, o in observed.items()}
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


@in_job_heap  # the heap before the run is not walked by its collections
async def rescore(settings: Settings, target: str, rng: LogRange, judge: Judge | None,
                  prov: Provenance, on_progress: Progress | None = None,
                  batch: int | None = None) -> RescoreResult:
    """Score the range's episodes again into `target` (see the module doc), `batch` episodes
    judged at once and written in one transaction (default: BATCH_RULES or BATCH_LLM)."""
    batch = batch or (BATCH_RULES if judge is None else BATCH_LLM)
    started = time.perf_counter()
    cfg, result = settings.evaluator, RescoreResult(target, prov)
    async with EventProducer(settings, client_id="replay-rescore") as producer:

        async def already() -> dict[str, EpisodeScored]:
            found = await on_target(settings, producer, Topic.EPISODES_SCORED, target,
                                    rescore_key)
            return {k: v for k, v in found.items() if isinstance(v, EpisodeScored)}

        # consume (the target's state, the log and the fenced writer's start at once)
        writer = DerivedWriter(settings, target, producer)
        try:
            done, log, _ = await asyncio.gather(
                already(), read_episodes(settings, producer, rng, on_read=on_progress,
                                         codec=producer.codec.projected(READS)),
                writer.start())
            todo = [eid for eid in log.completions if eid not in done]
            result.selected, result.records = len(log.completions), log.records
            result.resumed = len(log.completions) - len(todo)
            new = await score_all(log, todo, judge, prov, cfg, writer, result, on_progress,
                                  batch)
        finally:
            await writer.stop()
    mine = {**{eid: s for eid, s in done.items() if eid in log.completions}, **new}
    result.agreement = agreement((log.scores.get(eid), mine[eid]) for eid in log.completions
                                 if eid in mine)
    result.seconds = time.perf_counter() - started
    return result


async def score_all(log: EpisodeLog, todo: list[str], judge: Judge | None, prov: Provenance,
                    cfg: EvaluatorSettings, writer: DerivedWriter, result: RescoreResult,
                    on_progress: Progress | None, batch: int) -> dict[str, EpisodeScored]:
    """Decide and publish, `batch` episodes at a time (one transaction each)."""
    new: dict[str, EpisodeScored] = {}
    for first in range(0, len(todo), batch):
        ids = todo[first:first + batch]
        scored = await asyncio.gather(*(score_episode(log, eid, judge, prov, cfg) for eid in ids))
        ready = [s for s in scored if isinstance(s, EpisodeScored)]
        await writer.write([(scored_key(s), s) for s in ready])
        result.unscorable.update((eid, s) for eid, s in zip(ids, scored, strict=True)
                                 if isinstance(s, str))
        new.update((s.episode_id, s) for s in ready)
        result.written += len(ready)
        result.steps += sum(log.steps(s.episode_id) for s in ready)
        if on_progress is not None:
            on_progress("scoring", first + len(ids), len(todo))
    return new


async def score_episode(log: EpisodeLog, episode_id: str, judge: Judge | None, prov: Provenance,
                 cfg: EvaluatorSettings) -> EpisodeScored | str:
    built = episode_of(log, episode_id, cfg, every_page=judge is not None)
    if isinstance(built, str):
        return built
    done, episode = built
    judgement = await evaluate(episode, judge, cfg.max_screenshots, cfg.blocking_sample)
    return rescored(done, episode, judgement, prov)
