"""`webgym reprocess refilter`: a new replay set from the scored history, with any filters.

Delivery: exactly once per sample per run, resumable when killed. The run is its target
topic (new, created like webgym.replay). At start the target is read to its end and the
samples already there are skipped; samples go out in Kafka transactions of a producer
fenced by the target's name (processors.reprocess.derived). The selection is a pure function of
the range, the filters and the seed, so a restarted run selects the same samples.

Consume: EpisodeScored over the range (webgym.episodes.scored, or a topic `webgym reprocess
rescore` wrote), the first score of each episode, in log order. Decide: the replay
processor's own rules (processors.replay_buffer.decisions.training_steps) with the filters given
(success only, same screenshot, failures kept); then `select` (the CLI passes the trainer's
recency-biased draw, consumers/trainer/draw.py) picks among the eligible steps, oldest
first. Publish: each picked step's ReplaySample, keyed by sample id, its prompt by
reference (the content-addressed URI the trajectory names: no GET per sample; a prompt under
any other key is read and carried inline: processors.reprocess.prompts). A step whose prompt
URI is unusable (or, read inline, missing) is reported and left out; the trainer leaves out
and reports a sample whose referred prompt is missing or unusable
(webgym_common.replay_prompts). Point the trainer at the target with
WEBGYM_TRAINER__REPLAY_TOPIC.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from processors.replay_buffer.decisions import KeptStep, sample_id, training_steps
from processors.reprocess.derived import DerivedWriter, on_target
from processors.reprocess.heap import in_job_heap
from processors.reprocess.prompts import PromptReads, samples
from webgym_common.config import ReplaySettings, Settings
from webgym_common.events import EpisodeScored, Event, ReplaySample
from webgym_common.logrange.bounds import LogRange, Spans, range_reader, read_range, records_in
from webgym_common.objectstore import ObjectStore
from webgym_common.replay_prompts import BlobReader
from webgym_common.stream.bus import EventProducer
from webgym_common.topics import Topic

# Samples built at once and written in one transaction: each transaction costs a few round
# trips, and a batch by reference is a few hundred bytes a sample (8192: ~2 MB).
BATCH = 8192
Candidate = tuple[EpisodeScored, KeptStep]
Progress = Callable[[str, int, int], None]


@dataclass(frozen=True)
class Filters:
    success_only: bool = True
    same_screenshot: bool = True  # drop a step whose next screenshot is the same (WebGym)
    include_failures: bool = False

    def replay_settings(self, base: ReplaySettings) -> ReplaySettings:
        return base.model_copy(update={"success_only": self.success_only,
                                       "filter_same_screenshot": self.same_screenshot,
                                       "include_failures": self.include_failures})


def first_scores(events: Sequence[Event], rng: LogRange) -> list[EpisodeScored]:
    """The first score of each episode the range wants, in log order."""
    seen: dict[str, EpisodeScored] = {}
    for e in events:
        if isinstance(e, EpisodeScored) and rng.wants(e.iteration):
            seen.setdefault(e.episode_id, e)
    return list(seen.values())


def candidates(scores: Sequence[EpisodeScored], cfg: ReplaySettings) -> list[Candidate]:
    """Every training-eligible step under the filters, oldest first (log order, then step)."""
    return [(s, kept) for s in scores for kept in training_steps(s, cfg)]


def sample_key(event: Event) -> str | None:
    return event.sample_id if isinstance(event, ReplaySample) else None


@dataclass
class RefilterResult:
    target: str
    episodes: int = 0
    eligible: int = 0
    picked: int = 0
    written: int = 0
    resumed: int = 0
    records: int = 0
    steps: int = 0  # trajectory steps of the episodes read
    problems: list[str] = field(default_factory=list)
    by_reference: int = 0  # samples written with their prompt by reference
    prompt_reads: int = 0  # GETs sent to the object store (prompts carried inline)
    seconds: float = 0.0
    sample_seconds: float = 0.0  # of which: building and writing the samples


@in_job_heap  # the heap before the run is not walked by its collections
async def refilter(settings: Settings, source: Topic | str, target: str, rng: LogRange,
                   filters: Filters,
                   select: Callable[[list[Candidate]], list[Candidate]] = lambda c: c,
                   store: BlobReader | None = None, on_progress: Progress | None = None,
                   ) -> RefilterResult:
    """Write the range's eligible (and selected) samples to `target` (see the module doc)."""
    started = time.perf_counter()
    result = RefilterResult(target)
    cfg = filters.replay_settings(settings.replay)
    async with EventProducer(settings, client_id="replay-refilter") as producer:

        async def already() -> dict[str, Event]:
            return await on_target(settings, producer, Topic.REPLAY, target, sample_key)

        # consume (the target's state, the scores and the fenced writer's start at once)
        writer = DerivedWriter(settings, target, producer)
        try:
            done, events, _ = await asyncio.gather(
                already(), _read(settings, producer, source, rng, result, on_progress),
                writer.start())
            scores = first_scores(events, rng)
            result.episodes, result.steps = len(scores), sum(len(s.trajectory) for s in scores)
            # decide
            eligible = candidates(scores, cfg)
            picked = select(eligible)
            result.eligible, result.picked = len(eligible), len(picked)
            todo = [(s, k) for s, k in picked if sample_id(s.episode_id, k.step) not in done]
            result.resumed = len(picked) - len(todo)
            # publish
            prompts = PromptReads(store or ObjectStore(settings.s3))
            publishing = time.perf_counter()
            await publish(prompts, writer, todo, result, on_progress)
            result.sample_seconds = time.perf_counter() - publishing
            result.prompt_reads = prompts.gets
        finally:
            await writer.stop()
    result.seconds = time.perf_counter() - started
    return result


async def publish(prompts: PromptReads, writer: DerivedWriter, todo: list[Candidate],
                  result: RefilterResult, on_progress: Progress | None) -> None:
    """Each step's sample, BATCH at a time in one transaction each; a step whose prompt
    cannot be used is reported, not written. The next batch's prompts to carry inline are
    read while a batch is written (two batches in memory)."""
    chunks = [todo[first:first + BATCH] for first in range(0, len(todo), BATCH)]
    if not chunks:
        return
    building = build(prompts, chunks[0])
    try:
        for n, chunk in enumerate(chunks):
            made = await building
            if n + 1 < len(chunks):
                building = build(prompts, chunks[n + 1])
            samples = [m for m in made if isinstance(m, ReplaySample)]
            result.by_reference += sum(1 for m in samples if m.prompt_uri is not None)
            result.problems += [f"{s.episode_id} {m}"
                                for (s, _), m in zip(chunk, made, strict=True)
                                if isinstance(m, str)]
            await writer.write([(s.sample_id, s) for s in samples])
            result.written += len(samples)
            if on_progress is not None:
                on_progress("samples", n * BATCH + len(made), len(todo))
    finally:
        building.cancel()  # a failed write: the batch being built is not wanted


def build(prompts: PromptReads, chunk: list[Candidate]
          ) -> asyncio.Future[list[ReplaySample | str]]:
    """The chunk's samples, built in the background (reads, if any, bounded by `prompts`)."""
    return asyncio.ensure_future(samples(prompts, chunk))


async def _read(settings: Settings, producer: EventProducer, source: Topic | str,
                rng: LogRange, result: RefilterResult, on_progress: Progress | None
                ) -> list[Event]:
    events: list[Event] = []
    total = 0

    def sized(ranges: Spans) -> None:
        nonlocal total
        total = records_in(ranges)

    async with range_reader(settings, [source], producer, "replay-refilter") as reader:
        async for batch in read_range(reader, rng, on_spans=sized):
            events += [r.event for r in batch]
            if on_progress is not None:
                on_progress("scores", len(events), total)
    result.records = len(events)
    if on_progress is not None:  # the total counted transaction markers too
        on_progress("scores", len(events), len(events))
    return events
