"""The demonstration bank and the scripted baseline end to end: browser, policy processor,
evaluator and replay processor as real processes on the real broker, MinIO and Chromium.

The bank must request only train tasks with references, once (a second build resumes), and
reach webgym.replay as samples of iteration -2 whose prompts are the policy's own page view;
nothing held out may be among them. The baseline's evaluation episodes must be decided by the
scripted policy and never reach replay.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console

from harness.launch import PipelineProcess
from producers.catalog import load_task_catalog
from producers.controller.demonstrations import build_bank
from producers.controller.evaluate import BASELINE_EVAL_VERSION, evaluate_version
from tests.integration.test_rollout import LINES, fast, load, write_tasks
from webgym_common.choices import Split, Suite
from webgym_common.config import Settings
from webgym_common.demonstrations import BANK_ITERATION
from webgym_common.events import ActionChosen, EpisodeRequested, Event, ReplaySample
from webgym_common.leaks import held_out_leaks
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.stream.readers import read_to_end
from webgym_common.topics import Topic

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
# The tasks and their splits in the file (sandbox_tasks.jsonl): two train, two test, one ood.
SPLITS = {"forum-002": "train", "travel-001": "train", "shop-001": "test", "shop-002": "test",
          "travel-009": "ood"}


@pytest.fixture
def pipeline(settings: Settings, start_worker, start_policy, tmp_path: Path):
    start_worker(4)
    start_policy("teacher")
    procs = [PipelineProcess(settings, ["worker", name], tmp_path / f"{name}.log")
             for name in ("evaluator", "replay")]
    yield procs
    for p in procs:
        p.stop()


async def read_all(settings: Settings, producer: EventProducer, topic: Topic) -> list[Event]:
    async with EventConsumer(settings, [topic], None, producer) as c:
        return [r.event for r in await read_to_end(c)]


async def replay_samples(settings: Settings, producer: EventProducer, n: int,
                         ) -> list[ReplaySample]:
    """The replay topic once it holds at least `n` samples (the processor is asynchronous)."""
    for _ in range(60):
        found = [e for e in await read_all(settings, producer, Topic.REPLAY)
                 if isinstance(e, ReplaySample)]
        if len(found) >= n:
            return found
        await asyncio.sleep(1)
    return found


async def loaded(settings: Settings, producer: EventProducer, tmp_path: Path) -> Settings:
    """Fast rollout settings, the tasks of SPLITS loaded (with the file's own splits)."""
    s = fast(settings)
    assert {t: LINES[t]["split"] for t in SPLITS} == SPLITS
    lines = [LINES[t] for t in SPLITS]
    await load(s, producer, write_tasks(tmp_path / "t.jsonl", lines))
    return s


async def test_the_bank_trains_on_train_references_only_and_resumes(
    settings: Settings, producer: EventProducer, pipeline, tmp_path: Path
) -> None:
    s = await loaded(settings, producer, tmp_path)
    console = Console(width=160)

    result = await build_bank(s, producer, console, deadline_minutes=5)
    assert (result.episodes, result.solved) == (2, 2)
    sent = [e for e in await read_all(s, producer, Topic.EPISODES)
            if isinstance(e, EpisodeRequested)]
    assert sorted(r.task.task_id for r in sent) == ["forum-002", "travel-001"]
    assert {(r.iteration, r.demonstration, r.policy_version) for r in sent} == {
        (BANK_ITERATION, True, "demonstration")}

    steps = sum(len(LINES[t]["reference_actions"]) for t in ("forum-002", "travel-001"))
    samples = await replay_samples(s, producer, steps)
    assert samples and {x.iteration for x in samples} == {BANK_ITERATION}
    assert {x.task_id for x in samples} <= {"forum-002", "travel-001"}
    catalog = await load_task_catalog(s, producer)
    assert held_out_leaks({x.task_id for x in samples}, catalog) == []
    user = samples[0].messages[-1].content
    assert "Page (elements end with their [number]):" in user  # the policy's own prompt
    assert samples[0].response.startswith("Thought: ") and '"' in samples[0].response

    again = await build_bank(s, producer, console, deadline_minutes=5)
    assert again.episodes == 2
    sent = [e for e in await read_all(s, producer, Topic.EPISODES)
            if isinstance(e, EpisodeRequested)]
    assert Counter(r.episode_id for r in sent).most_common(1)[0][1] == 1  # nothing twice


async def test_the_baseline_is_scripted_and_never_replayed(
    settings: Settings, producer: EventProducer, pipeline, tmp_path: Path
) -> None:
    s = await loaded(settings, producer, tmp_path)

    results = await evaluate_version(s, producer, BASELINE_EVAL_VERSION, Suite.SANDBOX,
                                     [Split.TEST], Console(width=160))
    assert results[0].episodes == 2 and results[0].version == BASELINE_EVAL_VERSION
    sent = [e for e in await read_all(s, producer, Topic.EPISODES)
            if isinstance(e, EpisodeRequested)]
    assert {r.policy_version for r in sent} == {"baseline"}
    actions = [e for e in await read_all(s, producer, Topic.ACTIONS)
               if isinstance(e, ActionChosen)]
    assert actions and all(a.policy_version == "baseline" for a in actions)
    first = sorted((a for a in actions if a.step == 0), key=lambda a: a.episode_id)
    assert all(a.action_string in ("Click [1]", "ANSWER []") for a in first)
    assert not [e for e in await read_all(s, producer, Topic.REPLAY)
                if isinstance(e, ReplaySample)]
