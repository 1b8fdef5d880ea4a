"""The policy processor (faust) in the whole pipeline: real broker, browser, MinIO and vLLM.

The restart tests play the browser by hand (requests, observations and completions
published on the topics) around a real `webgym worker policy` process that is
SIGKILLed, and count the outcome from the topics themselves.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from aiokafka import TopicPartition
from faust.serializers import codecs

from harness.hand_fed import watch_episodes
from harness.launch import PipelineProcess
from processors.policy.decisions import (
    action_event,
    decided,
    entry_to_json,
    live_from_request,
)
from processors.policy.policies import Decision
from processors.policy.replies import ParsedReply
from processors.policy.waiting import now_ms
from producers.drive_reference import episode_request
from tests.support.hand_made import Episodes, partition_of
from webgym_common.agent.actions import parse_action
from webgym_common.config import Settings
from webgym_common.events import (
    ActionChosen,
    Event,
    utc_now,
)
from webgym_common.objectstore import ObjectStore
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.stream.kafka_clients import make_consumer
from webgym_common.stream.readers import read_to_end
from webgym_common.tasks import read_task_file
from webgym_common.topics import (
    Group,
    StateTable,
    Topic,
    changelog_topic_name,
    group_id,
    topic_name,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]
TASKS, _ = read_task_file(Path("environments/tasks/sandbox_tasks.jsonl"))


def pick(*prefixes: str, per_site: int = 2) -> list:
    return [t for p in prefixes for t in [t for t in TASKS if t.task_id.startswith(p)][:per_site]]


async def request_all(producer: EventProducer, requests: list) -> None:
    for r in requests:
        await producer.publish(Topic.EPISODES, r.episode_id, r)


async def test_teacher_forcing_solves_sandbox_tasks_through_the_pipeline(
    settings: Settings, producer: EventProducer, start_worker, start_policy
) -> None:
    start_worker(4)
    start_policy("teacher")
    tasks = pick("shop-", "wiki-", "forum-", "travel-")
    requests = [episode_request(t, timeout_s=240) for t in tasks]
    await request_all(producer, requests)
    logs = await watch_episodes(settings, producer, [r.episode_id for r in requests], 300)
    for r in requests:
        log = logs[r.episode_id]
        assert len(log.completions) == 1, r.task.task_id  # exactly one end per episode
        done = log.completions[0]
        assert done.termination == "answer", (r.task.task_id, done.reason)
        assert done.answer == r.task.definite_answer
        assert sorted(log.actions) == list(range(len(r.task.reference_actions)))
        assert all(a[0].policy_version == "teacher-forcing" for a in log.actions.values())


async def test_vllm_policy_runs_episodes_with_valid_or_explicitly_invalid_actions(
    settings: Settings, producer: EventProducer, start_worker, start_policy, vllm_base
) -> None:
    start_worker(3)
    start_policy("vllm", vllm_base)
    requests = [episode_request(t, timeout_s=400, max_steps=4) for t in pick("shop-", "wiki-",
                                                                              per_site=1)]
    await request_all(producer, requests)
    logs = await watch_episodes(settings, producer, [r.episode_id for r in requests], 420)
    store = ObjectStore(settings.s3)
    for r in requests:
        log = logs[r.episode_id]
        assert len(log.completions) == 1
        done = log.completions[0]
        assert done.termination in ("answer", "max_steps"), done.reason
        # Every step the browser showed before the end got exactly one decision.
        decided = [s for s, o in log.observations.items() if not o.terminal]
        assert sorted(log.actions) == sorted(decided)
        for step, (action, *rest) in log.actions.items():
            assert not rest, f"step {step} decided twice"
            assert action.action.valid or (action.action.kind == "Invalid" and action.action.error)
            assert action.raw_response and action.prompt_tokens > 0 and action.latency_ms > 0
            assert action.policy_version == "base"
            prompt = json.loads(await store.get_blob(action.prompt_uri))
            assert r.task.task_name in prompt[-1]["content"]


async def test_killing_the_policy_processor_mid_episode_continues_from_its_table(
    settings: Settings, producer: EventProducer, start_worker, start_policy, vllm_base
) -> None:
    start_worker(2)
    first = start_policy("vllm", vllm_base)
    request = episode_request(pick("travel-", per_site=1)[0], timeout_s=600, max_steps=6)
    await request_all(producer, [request])

    async def actions_so_far() -> int:
        logs = await watch_episodes(settings, producer, [request.episode_id], 2, linger_s=0,
                                    partial_ok=True)
        return len(logs[request.episode_id].actions)

    async with asyncio.timeout(300):
        while await actions_so_far() < 2:  # noqa: ASYNC110 (polls the log)
            await asyncio.sleep(1)
    first.kill()
    start_policy("vllm", vllm_base)

    logs = await watch_episodes(settings, producer, [request.episode_id], 600)
    log = logs[request.episode_id]
    assert len(log.completions) == 1
    assert log.completions[0].termination in ("answer", "max_steps")
    steps = sorted(log.actions)
    assert steps == list(range(len(steps))) and len(steps) >= 3
    # A decision after the restart was made with the history from before it.
    last = log.actions[steps[-1]][-1]
    prompt = json.loads(await ObjectStore(settings.s3).get_blob(last.prompt_uri))
    text = prompt[-1]["content"]
    for earlier in steps[:-1]:
        assert f"Step {earlier}:" in text
    assert log.actions[0][0].action_string in text


# -- restarts: nothing lost, nothing answered twice, nothing dead-lettered ----------------


def teacher(settings: Settings, delay_s: float = 0.0, jitter_s: float = 0.0) -> Settings:
    """The teacher policy, taking `delay_s` + up to `jitter_s` per decision (as a model would)."""
    policy = settings.policy.model_copy(update={"teacher_delay_s": delay_s,
                                                "teacher_delay_jitter_s": jitter_s})
    return settings.model_copy(update={"policy": policy})


async def read_all(settings: Settings, producer: EventProducer, topic: Topic) -> list[Event]:
    async with EventConsumer(settings, [topic], None, producer, client_id="count") as reader:
        return [r.event for r in await read_to_end(reader)]


async def actions_per_step(settings: Settings, producer: EventProducer) -> Counter[tuple[str, int]]:
    return Counter((a.episode_id, a.step) for a in await read_all(settings, producer, Topic.ACTIONS)
                   if isinstance(a, ActionChosen))


async def until(check: Callable[[], Awaitable[bool]], timeout_s: float, what: str) -> None:
    try:
        async with asyncio.timeout(timeout_s):
            while not await check():  # noqa: ASYNC110 (polls the topics)
                await asyncio.sleep(0.5)
    except TimeoutError:
        raise AssertionError(f"{what}: not after {timeout_s:.0f}s") from None


async def ready(proc: PipelineProcess, timeout_s: float = 90) -> None:
    async def check() -> bool:
        assert proc.proc.poll() is None, proc.log_text()[-3000:]
        return proc.is_ready()
    await until(check, timeout_s, "the policy is ready")


async def policy_committed_everything(settings: Settings) -> bool:
    """The policy group committed every partition of its inputs to its end: all handled."""
    names = [topic_name(settings.kafka, t) for t in (Topic.OBSERVATIONS, Topic.EPISODES,
                                                       Topic.EPISODES_COMPLETED)]
    consumer = make_consumer(settings, [], group_id(settings.kafka, Group.POLICY), "probe")
    await consumer.start()
    try:
        parts = [TopicPartition(n, p) for n in names for p in range(settings.kafka.partitions)]
        ends = await consumer.end_offsets(parts)
        for tp in parts:
            if ends[tp] and (await consumer.committed(tp) or 0) < ends[tp]:
                return False
        return True
    finally:
        await consumer.stop()


async def test_a_policy_killed_mid_decision_answers_every_observation_exactly_once(
    settings: Settings, producer: EventProducer, start_policy
) -> None:
    slow = teacher(settings, delay_s=1.0, jitter_s=5.0)  # decisions finish out of order
    first = start_policy("teacher", slow)
    await ready(first)
    eps = Episodes.make(producer, 8, settings.kafka.partitions)
    for eid in eps.ids:
        await eps.request(eid)
    steps = 3
    for step in range(steps):
        for eid in eps.ids:
            await eps.observe(eid, step)
        if step == 1:  # 8 episodes mid-decision, some answered already: SIGKILL, restart
            await asyncio.sleep(4)
            first.kill()
            await ready(start_policy("teacher", slow))

        async def answered(step: int = step) -> bool:
            got = await actions_per_step(settings, producer)
            return all((eid, step) in got for eid in eps.ids)
        await until(answered, 120, f"every episode's step {step} is answered")
    for eid in eps.ids:
        await eps.complete(eid, steps)
    await until(lambda: policy_committed_everything(settings), 120, "the policy caught up")

    counts = await actions_per_step(settings, producer)
    assert counts == Counter({(eid, step): 1 for eid in eps.ids for step in range(steps)})
    assert await read_all(settings, producer, Topic.DLQ) == []


async def test_an_action_written_down_before_a_kill_goes_out_exactly_once(
    settings: Settings, producer: EventProducer, start_policy
) -> None:
    """A kill between writing a step's context down (with its action pending) and publishing
    the action, played on the topics: the restarted processor publishes the written-down
    action itself, unless its actions partition holds it already; the next step is decided
    with that step in the context."""
    eps = Episodes.make(producer, 2, settings.kafka.partitions)
    unsent, sent = eps.ids
    pending: dict[str, ActionChosen] = {}
    reply = ParsedReply(thought="go", action=parse_action("Scroll [down]"), memory_json=None,
                        reasoning=None, raw="Action: Scroll [down]")
    for eid in eps.ids:
        await eps.request(eid)
        entry = live_from_request(Episodes.requested(eid))
        chosen = action_event(entry.ctx, Episodes.observed(eid, 0), Decision(reply, None), None,
                              "teacher-forcing")
        written = decided(entry, entry.ctx, chosen, now_ms())
        topic, key, value = changelog_record_of(settings, eid, entry_to_json(written))
        await producer.producer.send_and_wait(
            topic, value, key=key, partition=partition_of(eid, settings.kafka.partitions))
        pending[eid] = chosen
    await producer.publish(Topic.ACTIONS, sent, pending[sent])  # out before the kill
    for eid in eps.ids:
        await eps.observe(eid, 0)  # read again by the restarted processor
    await ready(start_policy("teacher", teacher(settings)))
    await until(lambda: policy_committed_everything(settings), 120, "the policy caught up")

    actions = [a for a in await read_all(settings, producer, Topic.ACTIONS)
               if isinstance(a, ActionChosen)]
    assert sorted(a.event_id for a in actions) == sorted(c.event_id for c in pending.values())
    for eid in eps.ids:  # and the episodes go on from there
        await eps.observe(eid, 1)
    await until(lambda: policy_committed_everything(settings), 120, "the policy caught up")
    counts = await actions_per_step(settings, producer)
    assert counts == Counter({(eid, step): 1 for eid in eps.ids for step in (0, 1)})
    assert await read_all(settings, producer, Topic.DLQ) == []


def changelog_record_of(settings: Settings, episode_id: str, value: object
                        ) -> tuple[str, bytes, bytes | None]:
    """The policy contexts table's changelog record for `episode_id` (faust's JSON)."""
    return (changelog_topic_name(settings.kafka, StateTable.POLICY_CONTEXTS),
            codecs.dumps("json", episode_id), codecs.dumps("json", value))


async def test_observations_before_their_late_request_wait_across_a_restart(
    settings: Settings, producer: EventProducer, start_policy
) -> None:
    """The request comes 20+ s after the observation (the agents have no order between them),
    and an observation behind it on the same partition is answered meanwhile."""
    s = teacher(settings, delay_s=0.5)
    first = start_policy("teacher", s)
    await ready(first)
    late, early = Episodes.make(producer, 2, settings.kafka.partitions, on_partition=0).ids
    eps = Episodes(producer, [late, early])
    await eps.request(early)
    await eps.observe(late, 0)  # its request is not published yet
    await eps.observe(early, 0)  # after it on the same partition: answered first

    async def answered(eid: str) -> bool:
        return (eid, 0) in await actions_per_step(settings, producer)
    await until(lambda: answered(early), 60, "the episode with a request is answered")
    await asyncio.sleep(4)  # long enough for faust to commit what it acked
    first.kill()
    await ready(start_policy("teacher", s))
    await asyncio.sleep(max(0.0, 22 - (utc_now() - eps.started).total_seconds()))
    await eps.request(late)  # 20+ s after its observation
    await until(lambda: answered(late), 60, "the observation is decided once its request came")
    await until(lambda: policy_committed_everything(settings), 60, "the policy caught up")

    assert await actions_per_step(settings, producer) == Counter({(late, 0): 1, (early, 0): 1})
    assert await read_all(settings, producer, Topic.DLQ) == []


async def test_a_request_read_after_its_waiting_observation_is_not_held_up_by_it(
    settings: Settings, producer: EventProducer, start_policy
) -> None:
    """The observation is being decided (it waits for its request) when the request comes:
    writing the request down must not wait for that decision, nor the decision for ever."""
    await ready(start_policy("teacher", teacher(settings)))
    eps = Episodes.make(producer, 3, settings.kafka.partitions)
    for eid in eps.ids:
        await eps.observe(eid, 0)  # no request yet: the observations wait
    await asyncio.sleep(2)
    for eid in eps.ids:
        await eps.request(eid)

    async def all_answered() -> bool:
        return set(await actions_per_step(settings, producer)) == {(e, 0) for e in eps.ids}
    await until(all_answered, 30, "every waiting observation is answered once its request came")
    assert await read_all(settings, producer, Topic.DLQ) == []


async def test_a_restart_after_episodes_ended_dead_letters_none_of_their_observations(
    settings: Settings, producer: EventProducer, start_policy
) -> None:
    first = start_policy("teacher", teacher(settings))
    await ready(first)
    eps = Episodes.make(producer, 8, settings.kafka.partitions)
    for eid in eps.ids:
        await eps.request(eid)
        await eps.observe(eid, 0)

    async def all_answered() -> bool:
        got = await actions_per_step(settings, producer)
        return all((eid, 0) in got for eid in eps.ids)
    await until(all_answered, 60, "every episode's first step is answered")
    for eid in eps.ids:
        await eps.complete(eid, 1)
    await asyncio.sleep(0.5)  # the ends are read; the last acks are not all committed yet
    first.kill()  # what was not committed comes again: observations of ended episodes
    await ready(start_policy("teacher", teacher(settings)))
    await until(lambda: policy_committed_everything(settings), 90, "the policy caught up")

    assert await read_all(settings, producer, Topic.DLQ) == []
    assert await actions_per_step(settings, producer) == Counter({(e, 0): 1 for e in eps.ids})
