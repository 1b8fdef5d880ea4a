"""The evaluator process in the whole pipeline: real broker, browsers, MinIO, policy and vLLM."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator, Sequence
from datetime import timedelta
from pathlib import Path

import pytest
from aiokafka import AIOKafkaProducer
from faust.types import TP

from infra.procs import free_port
from processors.evaluator.catchup import EndOffsets
from producers.drive_reference import episode_request
from tests.support.launch import PipelineProcess
from webgym_common.agent.actions import format_action, parse_action
from webgym_common.choices import JudgeKind
from webgym_common.config import Settings
from webgym_common.events import (
    ActionChosen,
    DeadLetter,
    DomainBlocked,
    EpisodeCompleted,
    EpisodeRequested,
    EpisodeScored,
    Event,
    StepObserved,
    Task,
    Viewport,
    utc_now,
)
from webgym_common.history import JUDGE_FAILED, is_judged, load_task_history
from webgym_common.metrics import compute_metrics
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.stream.readers import read_events, read_to_end
from webgym_common.tasks import read_task_file
from webgym_common.topics import Topic, topic_name

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
TASKS = {t.task_id: t for t in read_task_file(Path("infra/sandbox/tasks/sandbox_tasks.jsonl"))[0]}


@pytest.fixture
def start_evaluator(settings: Settings, tmp_path: Path) -> Iterator:
    """Start real `webgym worker evaluator` processes with evaluator settings overridden."""
    procs: list[PipelineProcess] = []

    def start(**evaluator: object) -> PipelineProcess:
        s = settings.model_copy(update={
            "evaluator": settings.evaluator.model_copy(update=evaluator)})
        p = PipelineProcess(s, ["worker", "evaluator"], tmp_path / f"evaluator{len(procs)}.log")
        procs.append(p)
        return p

    yield start
    for p in procs:
        p.stop()


async def ready(proc: PipelineProcess, timeout_s: float = 120) -> PipelineProcess:
    """Wait for a faust worker to own its partitions with its tables recovered (its ready file).

    The tests start the faust apps in turn, so each joins a quiet group.
    """
    async with asyncio.timeout(timeout_s):
        while not proc.is_ready():  # noqa: ASYNC110 (polls the ready file)
            await asyncio.sleep(0.2)
    return proc


async def request_all(producer: EventProducer, requests: list[EpisodeRequested]) -> None:
    for r in requests:
        await producer.publish(Topic.EPISODES, r.episode_id, r)


async def scores_for(settings: Settings, producer: EventProducer, episode_ids: list[str],
                     timeout_s: float, linger_s: float = 8.0) -> dict[str, list[EpisodeScored]]:
    """Every EpisodeScored of these episodes, read until each has one (+ a linger for extras)."""
    scores: dict[str, list[EpisodeScored]] = {eid: [] for eid in episode_ids}
    clock = asyncio.get_running_loop().time
    async with EventConsumer(settings, [Topic.EPISODES_SCORED], None, producer,
                             client_id="scores") as reader:
        done_at = None
        async with asyncio.timeout(timeout_s + linger_s):
            while done_at is None or clock() < done_at + linger_s:
                for received in await reader.poll(200):
                    if received.event.episode_id in scores:
                        scores[received.event.episode_id].append(received.event)
                if done_at is None and all(scores.values()):
                    done_at = clock()
    return scores


def with_wrong_answer(task: Task, wrong: str) -> Task:
    """A copy of the task whose reference sequence answers `wrong` (its definite answer stays)."""
    steps = list(task.reference_actions)
    steps[-1] = steps[-1].model_copy(update={"text": wrong})
    return task.model_copy(update={"reference_actions": steps})


async def test_rules_evaluator_scores_pipeline_episodes_once_each(
    settings: Settings, producer: EventProducer, start_worker, start_policy, start_evaluator
) -> None:
    await ready(start_evaluator())
    start_worker(4)
    await ready(start_policy("teacher"))
    good = [episode_request(TASKS[t], timeout_s=240)
            for t in ("shop-001", "wiki-001", "forum-004", "travel-004")]
    wrong = episode_request(with_wrong_answer(TASKS["shop-002"], "64 GB"), timeout_s=240)
    blocked = episode_request(TASKS["hostile-001"], timeout_s=240)
    requests = [*good, wrong, blocked]
    await request_all(producer, requests)
    scores = await scores_for(settings, producer, [r.episode_id for r in requests], 300)

    assert all(len(s) == 1 for s in scores.values()), {k: len(v) for k, v in scores.items()}
    for r in good:
        s = scores[r.episode_id][0]
        assert s.reward == 1.0, (r.task.task_id, s.evaluation)
        assert s.submit and not s.crashed and not s.is_blocked and s.termination == "answer"
        assert s.answer == r.task.definite_answer and s.evaluator_version == "rules-v1"
        assert (s.domain, s.task_id, s.policy_version) == (r.task.domain, r.task.task_id,
                                                           r.policy_version)
        assert [t.step for t in s.trajectory] == list(range(s.steps + 1))
        assert s.trajectory[-1].action_string.startswith("ANSWER")
        assert all(t.url.startswith("http") and t.screenshot_uri for t in s.trajectory)
    miss = scores[wrong.episode_id][0]
    assert miss.reward == 0.0 and miss.answer == "64 GB" and "does not match" in miss.evaluation
    wall = scores[blocked.episode_id][0]
    assert wall.is_blocked and wall.reward == 0.0 and not wall.crashed
    assert wall.termination == "blocked"

    blocklist = await read_events(settings, Topic.BLOCKLIST, 1, producer, timeout_s=30)
    entry = blocklist[0]
    assert isinstance(entry.event, DomainBlocked) and entry.key == "sandbox-hostile"
    assert entry.event.episode_id == blocked.episode_id
    hours = (entry.event.blocked_until - utc_now()) / timedelta(hours=1)
    assert 11.9 < hours <= 12.0

    # A replay of the completions (the same events again) scores nothing new.
    completions = await read_events(settings, Topic.EPISODES_COMPLETED, len(requests), producer)
    for c in completions:
        await producer.publish(Topic.EPISODES_COMPLETED, c.key, c.event)
    again = await scores_for(settings, producer, [r.episode_id for r in requests], 30)
    assert all(len(s) == 1 for s in again.values())


async def test_llm_judge_records_parsed_verdicts_for_criteria_a_and_b(
    settings: Settings, producer: EventProducer, start_worker, start_policy, start_evaluator,
    vllm_base: Settings,
) -> None:
    model = vllm_base.policy.model
    await ready(start_evaluator(judge=JudgeKind.LLM, base_url=vllm_base.policy.base_url,
                                model=model, structured_output=True, timeout_s=180,
                                evidence_chars=4000, page_text_chars=1200))
    start_worker(2)
    await ready(start_policy("teacher"))
    tasks = [TASKS["shop-011"], TASKS["wiki-001"]]  # two fact groups, one
    requests = [episode_request(t, timeout_s=300) for t in tasks]
    await request_all(producer, requests)
    scores = await scores_for(settings, producer, [r.episode_id for r in requests], 600)

    for r in requests:
        assert len(scores[r.episode_id]) == 1
        s = scores[r.episode_id][0]
        assert s.evaluator_version == f"llm-judge-v1:{model}"
        lines = s.evaluation.splitlines()
        assert any(line.startswith(("[blocking] BLOCKED", "[blocking] NOT BLOCKED"))
                   for line in lines), s.evaluation
        checks = [line for line in lines if line.startswith("[criterion")]
        assert len(checks) == 1 + len(r.task.evaluator_reference), s.evaluation
        for group in r.task.evaluator_reference:
            assert any(line.startswith(f"[criterion A {group.id} ({group.description})] ")
                       for line in checks)
        for line in checks:
            # A real verdict parsed from the model's reply: no failures, no unparseable reply.
            assert " SUCCESS" in line and "judge failed" not in line, line
            assert "line in the reply" not in line, line
        assert "[definite answer] SUCCESS" in s.evaluation  # the teacher answers it exactly
        passed = all("NOT SUCCESS" not in line for line in checks)
        assert s.reward == (1.0 if passed else 0.0) and s.submit


async def test_killing_the_evaluator_mid_run_still_scores_each_episode_exactly_once(
    settings: Settings, producer: EventProducer, start_worker, start_policy, start_evaluator
) -> None:
    first = await ready(start_evaluator())
    start_worker(4)
    await ready(start_policy("teacher"))
    ids = ("shop-001", "shop-002", "shop-003", "wiki-001", "wiki-006", "forum-004",
           "forum-009", "travel-004", "travel-009", "shop-006")
    requests = [episode_request(TASKS[t], timeout_s=300) for t in ids]
    await request_all(producer, requests)
    async with asyncio.timeout(240):
        while "scored " not in first.log_text():  # noqa: ASYNC110 (polls the process log)
            await asyncio.sleep(0.2)
    first.kill()
    second = start_evaluator()
    scores = await scores_for(settings, producer, [r.episode_id for r in requests], 360,
                              linger_s=15)
    assert {k: len(v) for k, v in scores.items()} == {r.episode_id: 1 for r in requests}
    failed = {eid: (s[0].termination, s[0].steps, s[0].evaluation[:300])
              for eid, s in scores.items() if s[0].reward != 1.0}
    assert not failed, failed
    assert "scored " in second.log_text()  # the restarted process did part of the work


async def test_malformed_completions_are_dead_lettered_and_the_evaluator_keeps_going(
    settings: Settings, producer: EventProducer, start_evaluator
) -> None:
    await ready(start_evaluator())
    completed = topic_name(settings.kafka, Topic.EPISODES_COMPLETED)
    await producer.publish_raw(completed, b"junk-1", b"this is not an event")
    await producer.publish_raw(completed, b"junk-2", b"\xc3\x01" + bytes(8) + b"body")
    stray = StepObserved(episode_id="junk-3", task_id="t", step=0, url="http://x/",
                         viewport=Viewport(width=1, height=1))
    await producer.publish(Topic.EPISODES_COMPLETED, "junk-3", stray)

    # An episode published by hand after the junk is still scored.
    task = TASKS["shop-003"]
    request = episode_request(task, timeout_s=60)
    eid = request.episode_id
    await producer.publish(Topic.EPISODES, eid, request)
    for step, action in enumerate(["Click [1]", f"ANSWER [{task.definite_answer}]"]):
        await producer.publish(Topic.OBSERVATIONS, eid, StepObserved(
            episode_id=eid, task_id=task.task_id, step=step, url=f"http://shop.test/{step}",
            viewport=Viewport(width=1280, height=720), accessibility_tree="- heading"))
        parsed = parse_action(action)
        await producer.publish(Topic.ACTIONS, eid, ActionChosen(
            episode_id=eid, step=step, action=parsed, action_string=format_action(parsed),
            policy_version="hand"))
    await producer.publish(Topic.EPISODES_COMPLETED, eid, EpisodeCompleted(
        episode_id=eid, task_id=task.task_id, iteration=3, split="train", steps=1,
        termination="answer", answer=task.definite_answer, started_at=utc_now()))

    scores = await scores_for(settings, producer, [eid], 120, linger_s=2)
    s = scores[eid][0]
    assert s.reward == 1.0 and (s.iteration, s.split, s.steps) == (3, "train", 1)
    letters = await read_events(settings, Topic.DLQ, 3, producer, timeout_s=30)
    assert {d.event.source_topic for d in letters} == {completed}
    errors = " | ".join(d.event.error for d in letters)
    assert "not an Avro event" in errors and "unknown writer schema" in errors
    assert f"StepObserved does not belong on {completed}" in errors


# -- issue 9: a backlog after a restart, poison completions, a judge that fails ---------


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


async def publish_all(producer: EventProducer,
                      events: Sequence[tuple[Topic, Event]]) -> None:
    """Publish in order without a round trip per event (thousands of them)."""
    sent = [await producer.producer.send(producer.topic(topic), producer.codec.encode(event),
                                         key=event.episode_id.encode())
            for topic, event in events]
    async with asyncio.timeout(120):
        await asyncio.gather(*sent)


def answered_tasks() -> list[Task]:
    return [t for t in TASKS.values() if t.definite_answer and t.domain != "sandbox-hostile"]


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
