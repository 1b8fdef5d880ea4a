"""Bad input at volume, interleaved with a good 48-episode iteration.

Hundreds of malformed events per topic (garbage bytes, valid Avro of the wrong type,
valid events with absurd values and unknown episode ids, 10 MB strings) and malformed task
lines: every garbage or wrong-type record lands in the DLQ with a reason, a record too big
is refused by the producer or the broker, an absurd one has no effect (no completion, score
or history for an unknown episode or task), no process stops, and the good episodes around
them are processed exactly once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable

import pytest

from harness.outcomes import Moment
from harness.topic_reads import read_events
from tests.chaos import bad_input
from tests.chaos.harness import Run, assert_exactly_once, play
from webgym_common.events import EpisodeCompleted, EpisodeScored, Task, TaskHistory
from webgym_common.topics import Topic

pytestmark = [pytest.mark.integration, pytest.mark.chaos,
              pytest.mark.asyncio(loop_scope="session")]

TOPICS = [Topic.EPISODES, Topic.OBSERVATIONS, Topic.ACTIONS, Topic.EPISODES_COMPLETED,
          Topic.EPISODES_SCORED, Topic.CONTROL]
PER_TOPIC = 300
MALFORMED_TASK_LINES = [
    "this is not json",
    json.dumps({"task_id": "bad-no-fields"}),
    json.dumps({"task_id": 42, "task_name": ["not", "a", "string"], "website": None}),
    json.dumps({"task_id": "bad-huge", "task_name": "x" * 2_000_000,
                "website": "{sandbox}/shop/", "difficulty": -3}),
    "",
    "[1, 2, 3]",
]


async def test_malformed_events_go_to_the_dlq_and_good_ones_are_processed_once(
    chaos_run: Callable[..., Run]
) -> None:
    run = chaos_run(f"bad input: {PER_TOPIC}/topic x {len(TOPICS)} topics + bad task lines")
    run.extra_task_lines = MALFORMED_TASK_LINES
    injections: list[bad_input.Injection] = []

    async def fault(r: Run) -> None:
        await r.until(Moment(2, 0.0))
        # Spread over the iteration: a pause between rounds of one record per topic.
        injection = await bad_input.inject(r.settings, TOPICS, PER_TOPIC, seed=9, pause_s=0.05)
        injections.append(injection)
        r.injected |= injection.keys()
        r.note(f"injected {len(injection.written)} bad records, "
               f"{len(injection.refused)} refused by the producer or broker")

    result = await play(run, fault)
    assert injections, "\n".join(result.notes)
    injection = injections[0]
    await asyncio.sleep(5)  # the last dead letters of the last records
    letters = [(d.source_topic, d.source_partition, d.source_offset, d.error)
               for d in await read_events(run.settings, Topic.DLQ, set())
               if hasattr(d, "source_topic")]
    fate = bad_input.fate(injection, letters)
    effects = await bad_effects(run)
    catalog = {t.task_id for t in await read_events(run.settings, Topic.TASKS, set())
               if isinstance(t, Task)}
    result.notes += [fate.describe(), f"effects of bad events: {effects or 'none'}",
                     f"catalog after malformed task lines: {sorted(catalog)}"]
    result.wrong += sum(fate.unaccounted[k] for k in ("garbage", "wrong type"))
    result.wrong += sum(effects.values()) + fate.reasonless
    assert catalog == set(run.options.tasks), "\n".join(result.notes)
    assert_exactly_once(result, run)


async def bad_effects(run: Run) -> dict[str, int]:
    """Pipeline output about an unknown (bad-*) episode or task: must be none."""
    out: dict[str, int] = {}
    for topic, kind in ((Topic.EPISODES_COMPLETED, EpisodeCompleted),
                        (Topic.EPISODES_SCORED, EpisodeScored),
                        (Topic.TASK_HISTORY, TaskHistory)):
        n = sum(1 for ev in await read_events(run.settings, topic, run.injected)
                if isinstance(ev, kind) and (getattr(ev, "episode_id", "") or ev.task_id)
                .startswith("bad-"))
        if n:
            out[topic.value] = n
    return out
