"""Episodes as the log holds them, for `webgym reprocess`: completions in a range, then their parts.

Two reads, both group-less (nothing committed, committed records only; at once when the
range has no start, the parts then being read from their beginnings anyway):
1. webgym.episodes.completed over the range (offsets or times), kept when the range wants
   their iteration: the selected episodes, the first completion of each.
2. webgym.episodes, webgym.observations, webgym.actions and webgym.episodes.scored from a
   minute before the earliest selected episode started (a part is published after its
   episode started) to their ends: each selected episode's request, steps, actions and
   first score. The first copy of each part wins, as in the evaluator (a resumed episode
   re-publishes steps).
`collect` (pure) does the keeping; `read_episodes` the reading.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Container
from dataclasses import dataclass, field

from webgym_common.codec import Codec
from webgym_common.config import Settings
from webgym_common.events import (
    ActionChosen,
    EpisodeCompleted,
    EpisodeRequested,
    EpisodeScored,
    Event,
    StepObserved,
)
from webgym_common.logrange.bounds import (
    Bound,
    LogRange,
    Spans,
    range_reader,
    read_range,
    records_in,
)
from webgym_common.stream.bus import EventProducer, Received
from webgym_common.topics import Topic

PARTS = (Topic.EPISODES, Topic.OBSERVATIONS, Topic.ACTIONS, Topic.EPISODES_SCORED)
# Parts are read from this long before the earliest selected episode started (clock skew
# between the worker that stamped started_at and the broker's timestamps).
LOOKBACK_MS = 60_000


@dataclass
class EpisodeLog:
    completions: dict[str, EpisodeCompleted] = field(default_factory=dict)  # in log order
    requests: dict[str, EpisodeRequested] = field(default_factory=dict)
    observations: dict[str, dict[int, StepObserved]] = field(default_factory=dict)
    actions: dict[str, dict[int, ActionChosen]] = field(default_factory=dict)
    scores: dict[str, EpisodeScored] = field(default_factory=dict)
    records: int = 0  # records read, both passes

    def steps(self, episode_id: str) -> int:
        return len(self.observations.get(episode_id, {}))


def select(log: EpisodeLog, event: Event, rng: LogRange, skip: Container[str] = ()) -> bool:
    """Keep a completion the range wants (not in `skip`, not kept already); True if kept."""
    if (not isinstance(event, EpisodeCompleted) or not rng.wants(event.iteration)
            or event.episode_id in skip or event.episode_id in log.completions):
        return False
    log.completions[event.episode_id] = event
    return True


def collect(log: EpisodeLog, event: Event, every_episode: bool = False) -> None:
    """Keep a part of a selected episode (of any, `every_episode`), the first copy of each."""
    eid = getattr(event, "episode_id", None)
    if not isinstance(eid, str) or not (every_episode or eid in log.completions):
        return
    if isinstance(event, EpisodeRequested):
        log.requests.setdefault(eid, event)
    elif isinstance(event, StepObserved):
        log.observations.setdefault(eid, {}).setdefault(event.step, event)
    elif isinstance(event, ActionChosen):
        log.actions.setdefault(eid, {}).setdefault(event.step, event)
    elif isinstance(event, EpisodeScored):
        log.scores.setdefault(eid, event)


def parts_range(log: EpisodeLog) -> LogRange:
    """Where the parts of the selected episodes can be: from just before the first start."""
    started = min((c.started_at for c in log.completions.values()), default=None)
    if started is None:
        return LogRange()
    return LogRange(start=Bound(time_ms=int(started.timestamp() * 1000) - LOOKBACK_MS))


async def read_episodes(settings: Settings, producer: EventProducer, rng: LogRange,
                        skip: Container[str] = (), parts: tuple[Topic, ...] = PARTS,
                        on_read: Callable[[str, int, int], None] | None = None,
                        completions_topic: Topic | str = Topic.EPISODES_COMPLETED,
                        codec: Codec | None = None) -> EpisodeLog:
    """The selected episodes and their parts. `on_read(phase, records, total)` reports
    progress ("completions", then "parts"; total counts offsets, an upper bound). `codec`
    decodes the parts (default: the producer's, every field)."""
    log = EpisodeLog()
    if rng.start is None:
        # No start bound: the parts are read from their beginnings whatever is selected, so
        # both reads run at once; the parts of every episode are kept, then those of the
        # unselected dropped.
        every = EpisodeLog()
        await asyncio.gather(
            _read(settings, producer, [completions_topic], rng, "completions", on_read,
                  lambda r: select(log, r.event, rng, skip), log),
            _read(settings, producer, list(parts), LogRange(), "parts", on_read,
                  lambda r: collect(every, r.event, every_episode=True), log, codec))
        keep_selected(log, every)
        return log
    await _read(settings, producer, [completions_topic], rng, "completions", on_read,
                lambda r: select(log, r.event, rng, skip), log)
    if log.completions:
        await _read(settings, producer, list(parts), parts_range(log), "parts", on_read,
                    lambda r: collect(log, r.event), log, codec)
    return log


def keep_selected(log: EpisodeLog, every: EpisodeLog) -> None:
    """The parts `every` holds of the episodes `log` selected, into `log`."""
    chosen = log.completions
    log.requests = {k: v for k, v in every.requests.items() if k in chosen}
    log.observations = {k: v for k, v in every.observations.items() if k in chosen}
    log.actions = {k: v for k, v in every.actions.items() if k in chosen}
    log.scores = {k: v for k, v in every.scores.items() if k in chosen}


async def _read(settings: Settings, producer: EventProducer, topics: list[Topic | str],
                rng: LogRange, phase: str, on_read: Callable[[str, int, int], None] | None,
                keep: Callable[[Received], object], log: EpisodeLog,
                codec: Codec | None = None) -> None:
    total = 0

    def sized(ranges: Spans) -> None:
        nonlocal total
        total = records_in(ranges)
        if on_read is not None:
            on_read(phase, 0, total)

    done = 0
    async with range_reader(settings, topics, producer, "replay-reader", codec) as reader:
        async for batch in read_range(reader, rng, on_spans=sized):
            for received in batch:
                keep(received)
            done += len(batch)
            if on_read is not None:
                on_read(phase, done, total)
    log.records += done
    if on_read is not None:
        on_read(phase, total, total)
