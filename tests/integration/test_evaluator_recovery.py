"""The evaluator after a restart behind a backlog, among poison completions, with a judge
it cannot reach, and at a partition end made of transaction markers: real broker and
evaluator processes, trajectories published by hand (no browser, no model)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from faust.types import TP

from harness.launch import PipelineProcess
from infra.procs import free_port
from processors.evaluator.catchup import EndOffsets
from producers.drive_reference import episode_request
from tests.support.evaluator import (
    TASKS,
    answered_tasks,
    publish_all,
    ready,
    scores_for,
    start_evaluator,
)
from webgym_common.agent.actions import format_action, parse_action
from webgym_common.choices import JudgeKind
from webgym_common.config import Settings
from webgym_common.events import (
    ActionChosen,
    DeadLetter,
    EpisodeCompleted,
    Event,
    StepObserved,
    Task,
    Viewport,
    utc_now,
)
from webgym_common.history import JUDGE_FAILED, is_judged, load_task_history
from webgym_common.metrics.fold import compute_metrics
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.stream.readers import read_to_end
from webgym_common.topics import Topic, topic_name

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
__all__ = ["start_evaluator"]  # the shared fixture (tests/support/evaluator.py)


def hand_episode(task: Task, steps: int, tree_chars: int = 400, iteration: int = 9,
                 max_steps: int | None = None) -> tuple[str, list[tuple[Topic, Event]]]:
    """An answered episode's events in the order the pipeline publishes them: its request,
    each step's observation and action, then its completion (all keyed by episode id)."""
    request = episode_request(task, timeout_s=600, iteration=iteration, max_steps=max_steps)
    eid = request.episode_id
    events: list[tuple[Topic, Event]] = [(Topic.EPISODES, request)]
    for step in range(steps + 1):
        events.append((Topic.OBSERVATIONS, StepObserved(
            episode_id=eid, task_id=task.task_id, step=step, url=f"http://shop.test/{step}",
            viewport=Viewport(width=1280, height=720),
            accessibility_tree=f"- heading \"page {step}\"\n" + "- text x\n" * (tree_chars // 9))))
        text = f"ANSWER [{task.definite_answer}]" if step == steps else "Click [1]"
        action = parse_action(text)
        events.append((Topic.ACTIONS, ActionChosen(
            episode_id=eid, step=step, action=action, action_string=format_action(action),
            policy_version="hand")))
    events.append((Topic.EPISODES_COMPLETED, EpisodeCompleted(
        episode_id=eid, task_id=task.task_id, iteration=iteration, split="test", steps=steps,
        termination="answer", answer=task.definite_answer, started_at=utc_now())))
    return eid, events


async def test_a_restart_with_a_backlog_scores_every_episode_from_its_full_trajectory(
    settings: Settings, producer: EventProducer, start_evaluator
) -> None:
    """Killed, then restarted behind thousands of state records: every completion waits
    until the agents folding the state topics have read past it, however long that takes.
    (trajectory_wait_s, once a fixed wait before judging whatever was there, is 1 s here.)"""
    first = await ready(start_evaluator(trajectory_wait_s=1.0))
    warm_id, warm = hand_episode(TASKS["shop-003"], steps=2)
    await publish_all(producer, warm)
    assert len((await scores_for(settings, producer, [warm_id], 120, linger_s=1))[warm_id]) == 1
    first.kill()

    filler = [(Topic.OBSERVATIONS, StepObserved(
        episode_id=f"filler-{i}", task_id="filler", step=0, url="http://shop.test/",
        viewport=Viewport(width=1, height=1), accessibility_tree="- text y\n" * 150))
        for i in range(4000)]
    episodes = [hand_episode(t, steps=8) for t in (answered_tasks() * 3)[:24]]
    await publish_all(producer, filler)
    for _, events in episodes:
        await publish_all(producer, events)
    second = start_evaluator(trajectory_wait_s=1.0)
    ids = [eid for eid, _ in episodes]
    scores = await scores_for(settings, producer, ids, 600, linger_s=5)

    assert {k: len(v) for k, v in scores.items()} == {eid: 1 for eid in ids}
    for eid in ids:
        s = scores[eid][0]
        assert [t.step for t in s.trajectory] == list(range(s.steps + 1)), s.evaluation
        assert "partial trajectory" not in s.evaluation and s.reward == 1.0, s.evaluation
        assert s.trajectory[-1].action_string.startswith("ANSWER")
    assert "partial trajectory" not in second.log_text()


async def test_poison_completions_are_dead_lettered_once_and_good_ones_scored_around_them(
    settings: Settings, producer: EventProducer, start_evaluator
) -> None:
    first = await ready(start_evaluator())
    task = TASKS["shop-003"]

    def poison(eid: str, steps: int) -> EpisodeCompleted:
        return EpisodeCompleted(episode_id=eid, task_id=task.task_id, iteration=9,
                                split="test", steps=steps, termination="answer",
                                answer="x", started_at=utc_now())

    over_id, over = hand_episode(task, steps=2, max_steps=5)  # its parts, then 50 steps claimed
    over[-1] = (Topic.EPISODES_COMPLETED, over[-1][1].model_copy(update={"steps": 50}))
    await publish_all(producer, [
        (Topic.EPISODES_COMPLETED, poison("poison-huge", 10**9)),
        (Topic.EPISODES_COMPLETED, poison("poison-negative", -1)),
        (Topic.EPISODES_COMPLETED, poison("ghost-1", 2)),  # nobody requested it
        *over])
    good_id, good = hand_episode(task, steps=3)
    await publish_all(producer, good)
    assert (await scores_for(settings, producer, [good_id], 120, linger_s=1))[good_id][0].reward \
        == 1.0

    # A restart does not choke on them again: the next good episode is scored too.
    first.kill()
    await ready(start_evaluator())
    next_id, following = hand_episode(task, steps=1)
    await publish_all(producer, following)
    assert len((await scores_for(settings, producer, [next_id], 120, linger_s=3))[next_id]) == 1

    async with EventConsumer(settings, [Topic.DLQ], None, producer) as reader:
        letters = [r.event for r in await read_to_end(reader)]
    errors = sorted(d.error for d in letters if isinstance(d, DeadLetter))
    assert len(errors) == 4, errors  # each once, none again after the restart
    assert any("steps=1000000000 exceeds the cap" in e for e in errors), errors
    assert any("steps=-1 is negative" in e for e in errors), errors
    assert any(e.startswith("unknown episode 'ghost-1'") for e in errors), errors
    assert any("steps=50 exceeds the episode's max_steps=5" in e for e in errors), errors
    async with EventConsumer(settings, [Topic.EPISODES_SCORED], None, producer) as reader:
        scored_ids = {getattr(r.event, "episode_id", None) for r in await read_to_end(reader)}
    assert scored_ids == {good_id, next_id}


async def test_a_judge_that_cannot_be_reached_is_a_judge_failure_not_an_attempt(
    settings: Settings, producer: EventProducer, start_evaluator, tmp_path: Path
) -> None:
    dead = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    await ready(start_evaluator(judge=JudgeKind.LLM, base_url=dead, model="m", timeout_s=3,
                                retries=0, verdict_attempts=2, verdict_backoff_s=0.5))
    task = TASKS["shop-003"]
    eid, events = hand_episode(task, steps=2)
    await publish_all(producer, events)
    (s,) = (await scores_for(settings, producer, [eid], 180, linger_s=2))[eid]
    assert s.evaluation.startswith(f"{JUDGE_FAILED}: blocking"), s.evaluation
    assert "APIConnectionError" in s.evaluation and s.reward == 0.0 and not s.crashed
    assert not is_judged(s)

    await producer.publish(Topic.TASKS, task.task_id, task)  # history counts catalog tasks
    history = PipelineProcess(settings, ["worker", "history"], tmp_path / "history.log")
    try:
        async with asyncio.timeout(120):
            while "not counted" not in history.log_text():  # noqa: ASYNC110 (polls the log)
                await asyncio.sleep(0.3)
    finally:
        history.stop()
    assert task.task_id not in await load_task_history(settings, producer)
    assert compute_metrics(9, "test", [s]).episodes == 0


async def test_the_catch_up_reads_a_partition_end_made_of_transaction_markers(
    settings: Settings
) -> None:
    """A state partition whose tail is a commit marker (a transactional producer wrote it)
    can never be handled to its end: reading the rest shows that nothing is left."""
    name = topic_name(settings.kafka, Topic.ACTIONS)
    writer = AIOKafkaProducer(bootstrap_servers=settings.kafka.bootstrap_servers,
                              transactional_id=f"catchup-{uuid.uuid4().hex[:8]}")
    await writer.start()
    try:
        async with writer.transaction():
            await writer.send_and_wait(name, b"an action", key=b"e", partition=0)
    finally:
        await writer.stop()
    offsets, tp = EndOffsets(settings), TP(name, 0)
    try:
        end = (await offsets.ends([tp]))[tp]
        assert end == 2  # the record, then its transaction's commit marker
        assert await offsets.any_record(tp, 0, end)
        assert not await offsets.any_record(tp, 1, end)
    finally:
        await offsets.stop()
