"""`webgym reprocess rescore | refilter | export` on a scored history in the real broker and MinIO.

The history is published as the pipeline publishes it: each episode's request, observed steps,
actions (prompts stored in MinIO) and completion, then its score (some scores disagree with
the rules on purpose, so the agreement report has flips to find).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from consumers.webgym_layout import export_range
from harness.launch import PipelineProcess
from processors.evaluator.reward import RULES_VERSION
from processors.reprocess.refilter import Filters, refilter
from processors.reprocess.rescore import score_episode
from tests.support.evaluator import answered_tasks, publish_all
from tests.unit.processors.reprocess.test_rescore import RULES, log_of
from webgym_common.agent.actions import format_action, parse_action
from webgym_common.codec import read_container
from webgym_common.config import Settings
from webgym_common.events import (
    ActionChosen,
    EpisodeCompleted,
    EpisodeScored,
    Event,
    ReplaySample,
    StepObserved,
    Task,
    Viewport,
    utc_now,
)
from webgym_common.logrange.bounds import Bound, LogRange
from webgym_common.objectstore import ObjectStore
from webgym_common.replay_prompts import resolve
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.stream.readers import read_to_end
from webgym_common.topics import Topic

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def history_episode(task: Task, n: int, iteration: int, right: bool, prompt_uri: str | None
                    ) -> list[tuple[Topic, Event]]:
    """An answered 3-step episode (right or wrong answer), as the pipeline logs it."""
    from producers.drive_reference import episode_request

    eid = f"hist-{n:04d}-{task.task_id}"
    request = episode_request(task, split="train", iteration=iteration).model_copy(
        update={"episode_id": eid})
    answer = task.definite_answer if right else "not it"
    events: list[tuple[Topic, Event]] = [(Topic.EPISODES, request)]
    for step in range(3):
        events.append((Topic.OBSERVATIONS, StepObserved(
            episode_id=eid, task_id=task.task_id, step=step, url=f"http://shop.test/{step}",
            title=f"page {step}", viewport=Viewport(width=1280, height=720),
            screenshot_sha256=f"{eid}-{step}", accessibility_tree=f'- text "page {step}"')))
        action = parse_action(f"ANSWER [{answer}]" if step == 2 else "Click [1]")
        events.append((Topic.ACTIONS, ActionChosen(
            episode_id=eid, step=step, action=action, action_string=format_action(action),
            raw_response=f"Thought: t\nAction: {format_action(action)}", prompt_uri=prompt_uri,
            policy_version="v1")))
    events.append((Topic.EPISODES_COMPLETED, EpisodeCompleted(
        episode_id=eid, task_id=task.task_id, iteration=iteration, split="train", steps=2,
        termination="answer", answer=answer, started_at=utc_now())))
    return events


async def publish_history(settings: Settings, producer: EventProducer, count: int,
                          flipped: set[int], prompt_uri: str | None = None) -> list[str]:
    """`count` episodes over iterations 0 and 1 (every third one wrong), scored by the rules,
    except the episodes in `flipped`, whose old score says the opposite."""
    tasks, ids = answered_tasks(), []
    for n in range(count):
        events = history_episode(tasks[n % len(tasks)], n, n % 2, n % 3 != 0, prompt_uri)
        await publish_all(producer, events)
        log = log_of([e for _, e in events])
        eid = next(iter(log.completions))
        score = await score_episode(log, eid, None, RULES, settings.evaluator)
        assert isinstance(score, EpisodeScored)
        score = score.model_copy(update={"judge_kind": None, "rescore_run": None})
        if n in flipped:
            score = score.model_copy(update={"reward": 1.0 - score.reward})
        await producer.publish(Topic.EPISODES_SCORED, score.task_id, score)
        ids.append(eid)
    return ids


async def count_topic(settings: Settings, producer: EventProducer, topic: Topic | str
                      ) -> list[Event]:
    async with EventConsumer(settings, [topic], None, producer, client_id="count",
                             any_type=True) as reader:
        return [r.event for r in await read_to_end(reader)]


async def finished(proc: PipelineProcess, timeout_s: float = 120) -> int:
    async with asyncio.timeout(timeout_s):
        while proc.proc.poll() is None:  # noqa: ASYNC110 (polls a child process)
            await asyncio.sleep(0.2)
    return proc.proc.returncode


async def test_rescore_writes_a_new_topic_with_provenance_and_reports_the_flips(
        settings: Settings, producer: EventProducer, tmp_path: Path) -> None:
    ids = await publish_history(settings, producer, 12, flipped={1, 3})
    target = f"{settings.kafka.topic_prefix}.rescored.rules"
    report = tmp_path / "agreement"
    proc = PipelineProcess(settings, ["reprocess", "rescore", "--to-topic", target, "--iterations",
                                      "1", "--report", str(report)], tmp_path / "rescore.log")
    assert await finished(proc) == 0, proc.log_text()
    new = [e for e in await count_topic(settings, producer, target)
           if isinstance(e, EpisodeScored)]
    odd = sorted(eid for n, eid in enumerate(ids) if n % 2 == 1)
    assert sorted(e.episode_id for e in new) == odd  # iteration 1 only, once each
    assert all((e.judge_kind, e.evaluator_version, e.rescore_run) == ("rules", RULES_VERSION,
                                                                      target) for e in new)
    agreement = json.loads(report.with_suffix(".json").read_text())
    assert sorted(f["episode_id"] for f in agreement["flipped"]) == sorted([ids[1], ids[3]])
    assert agreement["compared"] == 6 and agreement["kappa"] is not None
    assert "Flipped" in report.with_suffix(".md").read_text()
    assert "Cohen's kappa" in proc.log_text()
    # The original history is untouched.
    assert len(await count_topic(settings, producer, Topic.EPISODES_SCORED)) == 12
    refused = PipelineProcess(settings, ["reprocess", "rescore", "--to-topic",
                                         f"{settings.kafka.topic_prefix}.episodes.scored"],
                              tmp_path / "refused.log")
    assert await finished(refused) != 0 and "pipeline's own" in refused.log_text()


async def test_a_killed_rescore_resumes_and_writes_each_episode_exactly_once(
        settings: Settings, producer: EventProducer, tmp_path: Path) -> None:
    ids = await publish_history(settings, producer, 300, flipped=set())
    target = f"{settings.kafka.topic_prefix}.rescored.killed"
    args = ["reprocess", "rescore", "--to-topic", target, "--batch", "1",
            "--report", str(tmp_path / "agreement")]
    first = PipelineProcess(settings, args, tmp_path / "first.log")
    async with asyncio.timeout(120):  # kill it once it has written some, not all
        while len(await count_topic(settings, producer, target)) < 20:
            assert first.proc.poll() is None, first.log_text()
            await asyncio.sleep(0.3)
    first.kill()
    before = len(await count_topic(settings, producer, target))
    assert 20 <= before < 300
    second = PipelineProcess(settings, args, tmp_path / "second.log")
    assert await finished(second) == 0, second.log_text()
    assert f"({before}" in second.log_text() or "there already" in second.log_text()
    written = [e.episode_id for e in await count_topic(settings, producer, target)
               if isinstance(e, EpisodeScored)]
    assert sorted(written) == sorted(ids)  # each episode exactly once (committed records)


async def test_refilter_and_export_rebuild_a_replay_set_and_iteration_files(
        settings: Settings, producer: EventProducer, tmp_path: Path) -> None:
    store = ObjectStore(settings.s3)
    await store.ensure_bucket()
    prompt = await store.put_blob(json.dumps([{"role": "user", "content": "do it"}]).encode(),
                                  "application/json")
    ids = await publish_history(settings, producer, 8, flipped=set(), prompt_uri=prompt.uri)
    target = f"{settings.kafka.topic_prefix}.replay.refiltered"
    result = await refilter(settings, Topic.EPISODES_SCORED, target, LogRange(), Filters())
    wins = [eid for n, eid in enumerate(ids) if n % 3 != 0]
    # a success's steps: its screenshots all differ, so each of its 3 steps is eligible
    assert (result.episodes, result.eligible, result.written) == (8, 3 * len(wins),
                                                                  3 * len(wins))
    samples = [e for e in await count_topic(settings, producer, target)
               if isinstance(e, ReplaySample)]
    assert sorted({s.episode_id for s in samples}) == sorted(wins)
    # by reference: no GET per sample; the trainer's resolve reads the one prompt once
    assert (result.by_reference, result.prompt_reads) == (3 * len(wins), 0)
    assert all(not s.messages and s.prompt_uri == prompt.uri for s in samples)
    resolved = await resolve(store, samples, timeout_s=10.0)
    assert resolved.reads == 1 and resolved.left_out == {}
    assert [s.messages[0].content for s in resolved.samples] == ["do it"] * len(samples)
    again = await refilter(settings, Topic.EPISODES_SCORED, target, LogRange(), Filters())
    assert again.written == 0 and again.resumed == 3 * len(wins)

    # Time and offset bounds, resolved by the broker (offsets_for_times, per partition).
    now_ms = int(utc_now().timestamp() * 1000)
    later = await refilter(settings, Topic.EPISODES_SCORED, f"{target}-later",
                           LogRange(start=Bound(time_ms=now_ms + 3_600_000)), Filters())
    earlier = await refilter(settings, Topic.EPISODES_SCORED, f"{target}-earlier",
                             LogRange(start=Bound(time_ms=now_ms - 3_600_000),
                                      end=Bound(time_ms=now_ms + 3_600_000)), Filters())
    assert (later.episodes, earlier.episodes) == (0, 8)
    assert await export_range(settings, LogRange(end=Bound(offset=0)), tmp_path / "none") == []

    done = await export_range(settings, LogRange(iterations=frozenset({0})), tmp_path, blobs=True)
    assert [(d.iteration, d.episodes, d.steps) for d in done] == [(0, 4, 12)]
    exported = [e for e in read_container(done[0].avro) if isinstance(e, EpisodeScored)]
    assert sorted(e.episode_id for e in exported) == sorted(ids[0::2])
    doc = json.loads(done[0].webgym[0].read_text())
    assert done[0].webgym[0].name == "train_trajectories.iteration0.json"
    step = doc["trajectories"][0][1]
    assert step["response"]["raw_prompt"] == json.dumps([{"role": "user", "content": "do it"}])
    assert step["observation"]["page_metadata"]["url"] == "http://shop.test/1"
