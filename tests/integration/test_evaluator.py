"""The evaluator process in the whole pipeline: real broker, browsers, MinIO, policy and vLLM."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from producers.drive_reference import episode_request
from tests.support.evaluator import TASKS, ready, request_all, scores_for, start_evaluator
from webgym_common.agent.actions import format_action, parse_action
from webgym_common.choices import JudgeKind
from webgym_common.config import Settings
from webgym_common.events import (
    ActionChosen,
    DomainBlocked,
    EpisodeCompleted,
    StepObserved,
    Task,
    Viewport,
    utc_now,
)
from webgym_common.stream.bus import EventProducer
from webgym_common.stream.readers import read_events
from webgym_common.topics import Topic, topic_name

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
__all__ = ["start_evaluator"]  # the shared fixture (tests/support/evaluator.py)


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
           "forum-008", "travel-004", "travel-009", "shop-014")
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
