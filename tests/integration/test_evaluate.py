"""`webgym eval` end to end: held-out tasks through browser, teacher policy and evaluator.

The teacher-forcing policy solves every sandbox task, so an evaluation of its episodes
must report them all solved; the point is the plumbing: only the split's tasks run, the
result is published per suite and split, nothing is an iteration, and a second run with
the same arguments resumes (requests nothing new) instead of running again.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console

from harness.launch import PipelineProcess
from producers.controller.evaluate import EVAL_ITERATION, evaluate_version
from tests.integration.test_rollout import LINES, control, fast, load, write_tasks
from webgym_common.choices import Split, Suite
from webgym_common.config import Settings
from webgym_common.events import EpisodeRequested, EvaluationResult
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.stream.readers import read_compacted, read_to_end
from webgym_common.topics import Topic

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
# The tasks and their splits in the file (sandbox_tasks.jsonl): three test, one train, one ood.
SPLITS = {"shop-001": "test", "wiki-001": "test", "shop-002": "test", "forum-002": "train",
          "travel-009": "ood"}


@pytest.fixture
def pipeline(settings: Settings, start_worker, start_policy, tmp_path: Path):
    start_worker(4)
    start_policy("teacher")
    procs = [PipelineProcess(settings, ["worker", "evaluator"], tmp_path / "evaluator.log")]
    yield procs
    for p in procs:
        p.stop()


async def requests(settings: Settings, producer: EventProducer) -> list[EpisodeRequested]:
    async with EventConsumer(settings, [Topic.EPISODES], None, producer) as c:
        return [r.event for r in await read_to_end(c) if isinstance(r.event, EpisodeRequested)]


async def test_an_evaluation_runs_only_held_out_tasks_and_resumes(
    settings: Settings, producer: EventProducer, pipeline, tmp_path: Path
) -> None:
    s = fast(settings)
    assert {t: LINES[t]["split"] for t in SPLITS} == SPLITS
    lines = [LINES[t] for t in SPLITS]
    await load(s, producer, write_tasks(tmp_path / "t.jsonl", lines))
    console = Console(width=160)

    results = await evaluate_version(s, producer, 0, Suite.SANDBOX, [Split.TEST, Split.OOD],
                                     console)
    by_split = {r.split: r for r in results}
    assert (by_split["test"].episodes, by_split["test"].successes) == (3, 3)
    assert (by_split["ood"].episodes, by_split["ood"].successes) == (1, 1)
    assert by_split["test"].ci_low > 0.3 and by_split["test"].ci_high == 1.0
    sent = await requests(s, producer)
    assert sorted(r.task.task_id for r in sent) == ["shop-001", "shop-002", "travel-009",
                                                     "wiki-001"]
    assert {(r.iteration, r.policy_version) for r in sent} == {(EVAL_ITERATION, "base")}
    assert await control(s, producer) == []  # an evaluation is no iteration

    published = await read_compacted(s, Topic.EVALUATIONS, producer)
    assert sorted(e.split for e in published.values() if isinstance(e, EvaluationResult)) == [
        "ood", "test"]

    # Run again with the same arguments: every episode is found, nothing is requested again.
    again = await evaluate_version(s, producer, 0, Suite.SANDBOX, [Split.TEST], console)
    assert again[0].successes == 3 and again[0].episode_ids == by_split["test"].episode_ids
    assert Counter(r.episode_id for r in await requests(s, producer)).most_common(1)[0][1] == 1
