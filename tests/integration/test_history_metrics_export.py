"""Catalog, task history, metrics and export against the real broker, as real processes."""

from __future__ import annotations

import asyncio
import csv
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import fastavro
import pytest
from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from consumers.archiver import export_iteration
from harness.launch import PipelineProcess
from producers.catalog import load_task_catalog
from tests.factories import sample_event
from webgym_common.codec import read_container
from webgym_common.config import Settings, settings_env
from webgym_common.events import EpisodeScored, IterationClosed, TaskHistory, TrajectoryStep
from webgym_common.history import load_task_history
from webgym_common.metrics.fold import CSV_COLUMNS, compute_metrics, same_numbers
from webgym_common.metrics.storage import recompute_metrics
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.stream.kafka_clients import make_consumer
from webgym_common.stream.readers import read_compacted, read_to_end
from webgym_common.topics import Group, Topic, group_id, topic_name

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


def scored(episode_id: str, task_id: str = "task-a", iteration: int = 1, reward: float = 0.0,
           **update: Any) -> EpisodeScored:
    steps = [TrajectoryStep(step=0, url="http://s/", action_string="GoBack", raw_response="ab"),
             TrajectoryStep(step=1, url="http://s/", action_string="ANSWER [x]",
                            raw_response="abcd")]
    return sample_event("EpisodeScored").model_copy(update={
        "episode_id": episode_id, "task_id": task_id, "iteration": iteration, "split": "train",
        "reward": reward, "crashed": False, "is_blocked": False, "steps": 2,
        "trajectory": steps, **update})


async def in_catalog(producer: EventProducer, *task_ids: str) -> None:
    """The tasks on webgym.tasks: history counts only scores of the catalog's tasks."""
    for t in task_ids:
        await producer.publish(Topic.TASKS, t, sample_event("Task").model_copy(
            update={"task_id": t}))


async def publish_scored(producer: EventProducer, *events: EpisodeScored) -> None:
    for e in events:
        # Keyed by task, as the evaluator publishes them. A re-sent episode is a new
        # event with the same episode id, as a replay would be.
        await producer.publish(Topic.EPISODES_SCORED, e.task_id,
                               e.model_copy(update={"event_id": f"{e.event_id}-{id(e)}"}))


async def eventually(fetch: Callable[[], Awaitable[Any]], ok: Callable[[Any], bool],
                     what: str, timeout_s: float = 60) -> Any:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while True:
        value = await fetch()
        if ok(value):
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"{what}: still {value!r}")
        await asyncio.sleep(0.5)


async def webgym(settings: Settings, *args: str, timeout_s: float = 120) -> tuple[int, str]:
    env = {**os.environ, **settings_env(settings), "COLUMNS": "400"}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "webgym_cli", *args, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), timeout_s)
    return proc.returncode, out.decode()


def task_line(task_id: str, name: str) -> str:
    return json.dumps({"task_id": task_id, "task_name": name, "domain": "example.org",
                       "website": "https://example.org/", "difficulty": 2, "split": "train"})


async def test_tasks_load_publishes_the_catalog_and_the_latest_load_wins(
    settings: Settings, producer: EventProducer, tmp_path: Path
) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join([task_line("t1", "old"), "{oops", task_line("t2", "two")]) + "\n")
    code, out = await webgym(settings, "tasks", "load", str(path))
    assert code == 0, out
    assert f"{path}:2: skipped: not JSON" in out and "loaded 2 tasks" in out
    path.write_text(task_line("t1", "new") + "\n" + task_line("t3", "three") + "\n")
    code, out = await webgym(settings, "tasks", "load", str(path))
    assert code == 0, out
    catalog = await load_task_catalog(settings, producer)
    assert {k: t.task_name for k, t in catalog.items()} == {"t1": "new", "t2": "two",
                                                           "t3": "three"}


async def group_caught_up(settings: Settings, group: str, topic: Topic) -> bool:
    """Has `group` committed every partition of `topic` up to its end?"""
    consumer = make_consumer(settings, [], group, client_id="lag-check")
    await consumer.start()
    try:
        name = topic_name(settings.kafka, topic)
        parts = [TopicPartition(name, p) for p in range(settings.kafka.partitions)]
        consumer.assign(parts)
        ends = await asyncio.wait_for(consumer.end_offsets(parts), 30)
        committed = [await consumer.committed(tp) or 0 for tp in parts]
        return all(c >= ends[tp] for c, tp in zip(committed, parts, strict=True))
    finally:
        await consumer.stop()


async def rewind_group(settings: Settings, group: str, topic: Topic) -> None:
    """Commit offset 0 everywhere once the killed member has left (after its session timeout)."""
    consumer = make_consumer(settings, [], group, client_id="rewind")
    await consumer.start()
    try:
        name = topic_name(settings.kafka, topic)
        parts = [TopicPartition(name, p) for p in range(settings.kafka.partitions)]
        consumer.assign(parts)
        async with asyncio.timeout(60):
            while True:
                try:
                    await consumer.commit({tp: 0 for tp in parts})
                    return
                except KafkaError:
                    await asyncio.sleep(1)  # the group still has the dead member
    finally:
        await consumer.stop()


async def test_history_folds_once_per_episode_and_survives_a_kill_and_a_rewind(
    settings: Settings, producer: EventProducer, tmp_path: Path
) -> None:
    e1, e2, e3 = scored("e1", reward=1.0), scored("e2"), scored("e3", "task-b", reward=1.0)
    await in_catalog(producer, "task-a", "task-b")
    await publish_scored(producer, e1, e2, e1, e3)  # e1 twice: a duplicate
    first = PipelineProcess(settings, ["worker", "history"], tmp_path / "history1.log")
    group = group_id(settings.kafka, Group.HISTORY)
    try:
        await eventually(lambda: load_task_history(settings, producer),
                         lambda h: "task-b" in h and h["task-a"].attempts >= 2, "first fold")
        await publish_scored(producer, e2, scored("e4", reward=1.0))  # e2 replayed, e4 new
        await eventually(lambda: group_caught_up(settings, group, Topic.EPISODES_SCORED),
                         bool, "history caught up")
    finally:
        first.kill()
    history = await load_task_history(settings, producer)
    a, b = history["task-a"], history["task-b"]
    assert (a.attempts, a.successes, a.attempt_level, a.last_rewards) == (3, 2, 2,
                                                                           [1.0, 0.0, 1.0])
    assert a.recent_episode_ids == ["e1", "e2", "e4"]
    assert (b.attempts, b.successes, b.attempt_level) == (1, 1, 1)

    # As if it had died before committing anything: every scored event comes again.
    await rewind_group(settings, group, Topic.EPISODES_SCORED)
    await publish_scored(producer, scored("e5"), e3)
    second = PipelineProcess(settings, ["worker", "history"], tmp_path / "history2.log")
    try:
        await eventually(lambda: group_caught_up(settings, group, Topic.EPISODES_SCORED),
                         bool, "history caught up after restart", timeout_s=90)
    finally:
        second.stop()
    history = await load_task_history(settings, producer)
    a, b = history["task-a"], history["task-b"]
    assert (a.attempts, a.successes, a.attempt_level) == (4, 2, 2)
    assert a.last_rewards == [1.0, 0.0, 1.0, 0.0] and b.attempts == 1
    # One TaskHistory record per counted episode: duplicates published nothing.
    records = await read_compacted_all(settings, producer)
    assert len(records) == 5, second.log_text()


async def test_two_history_workers_share_the_tasks_and_take_each_others_over(
    settings: Settings, producer: EventProducer, tmp_path: Path
) -> None:
    tasks = [f"task-{i}" for i in range(12)]
    await in_catalog(producer, *tasks)
    group = group_id(settings.kafka, Group.HISTORY)
    first = PipelineProcess(settings, ["worker", "history"], tmp_path / "history1.log")
    second = PipelineProcess(settings, ["worker", "history"], tmp_path / "history2.log")
    try:
        # Ready = in the group; the later of the two joined with the other already in it.
        await eventually(lambda: asyncio.to_thread(lambda: first.is_ready() and second.is_ready()),
                         bool, "both workers in the group")
        await publish_scored(producer, *(scored(f"a-{t}", t, reward=1.0) for t in tasks))
        await eventually(lambda: group_caught_up(settings, group, Topic.EPISODES_SCORED),
                         bool, "both caught up")
        # The first worker takes the second's tasks over: it must fold them on top of
        # what the second published, not on what it knew when it started.
        second.stop()
        await publish_scored(producer, *(scored(f"b-{t}", t) for t in tasks))
        await eventually(lambda: group_caught_up(settings, group, Topic.EPISODES_SCORED),
                         bool, "first caught up alone")
    finally:
        second.stop()
        first.stop()
    history = await load_task_history(settings, producer)
    assert {t: (h.attempts, h.successes, h.last_rewards) for t, h in history.items()} == {
        t: (2, 1, [1.0, 0.0]) for t in tasks}, first.log_text()
    assert len(await read_compacted_all(settings, producer)) == 2 * len(tasks)


async def read_compacted_all(settings: Settings, producer: EventProducer) -> list[TaskHistory]:
    async with EventConsumer(settings, [Topic.TASK_HISTORY], None, producer) as c:
        return [r.event for r in await read_to_end(c)]


async def test_metrics_process_publishes_on_close_and_writes_csv_and_png(
    settings: Settings, producer: EventProducer, tmp_path: Path
) -> None:
    it1 = [scored("m1", reward=1.0), scored("m2"), scored("m3", crashed=True),
           scored("m4", is_blocked=True)]
    await publish_scored(producer, *it1, it1[0], scored("other", iteration=2))
    close = sample_event("IterationClosed").model_copy(update={"iteration": 1, "split": "train"})
    assert isinstance(close, IterationClosed)
    await producer.publish(Topic.CONTROL, "1", close)
    csv_path = tmp_path / "out" / "metrics.csv"
    proc = PipelineProcess(settings, ["worker", "metrics", "--csv", str(csv_path)],
                           tmp_path / "metrics.log")
    try:
        table = await eventually(lambda: read_compacted(settings, Topic.METRICS, producer),
                                 lambda t: "1" in t, "metrics for iteration 1")
        expected = compute_metrics(1, "train", it1)
        assert same_numbers(table["1"], expected), (table["1"], expected)
        assert expected.crashed_rate == 0.25 and expected.success_rate == 0.5
        rows = await eventually(lambda: asyncio.to_thread(csv_rows, csv_path),
                                lambda r: len(r) == 2, "csv row")
        assert rows[1][:3] == ["1", "train", "4"]
        row = dict(zip(CSV_COLUMNS, rows[1], strict=True))
        assert float(row["success_rate"]) == pytest.approx(0.5)
        assert (row["policy_episodes"], row["demonstrations"]) == ("4", "0")
        png = csv_path.with_suffix(".png").read_bytes()
        assert png.startswith(b"\x89PNG\r\n\x1a\n")
        # A late-scored episode of the closed iteration updates its row (still one row).
        await publish_scored(producer, scored("m5", reward=1.0))
        rows = await eventually(lambda: asyncio.to_thread(csv_rows, csv_path),
                                lambda r: len(r) == 2 and r[1][2] == "5", "csv updated")
    finally:
        proc.stop()
    assert proc.proc.returncode == 0, proc.log_text()
    # A restart rebuilds from the log and publishes only what changed: iteration 2's close.
    await producer.publish(Topic.CONTROL, "2", close.model_copy(update={"iteration": 2}))
    again = PipelineProcess(settings, ["worker", "metrics", "--csv", str(csv_path)],
                            tmp_path / "metrics2.log")
    try:
        await eventually(lambda: asyncio.to_thread(csv_rows, csv_path),
                         lambda r: len(r) == 3, "csv row for iteration 2")
    finally:
        again.stop()
    async with EventConsumer(settings, [Topic.METRICS], None, producer) as c:
        published = [(r.key, r.event.episodes) for r in await read_to_end(c)]
    assert published == [("1", 4), ("1", 5), ("2", 1)], again.log_text()


def csv_rows(path: Path) -> list[list[str]]:
    return list(csv.reader(path.read_text().splitlines())) if path.exists() else []


async def test_export_writes_one_iterations_episodes_to_a_zstandard_container(
    settings: Settings, producer: EventProducer, tmp_path: Path
) -> None:
    first = scored("x1", iteration=5, reward=1.0)
    await publish_scored(producer, first, scored("x2", iteration=5), scored("y1", iteration=6),
                         first.model_copy(update={"reward": 0.0}))  # a later duplicate
    code, out = await webgym(settings, "export", "--iteration", "5", "--out", str(tmp_path))
    assert code == 0, out
    path = tmp_path / "iteration5.avro"
    assert f"exported 2 episodes of iteration 5 to {path}" in out
    with path.open("rb") as src:
        assert fastavro.reader(src).metadata["avro.codec"] == "zstandard"
    back = {e.episode_id: e for e in read_container(path)}
    assert set(back) == {"x1", "x2"} and back["x1"].reward == 1.0  # first record wins
    ranked = await export_iteration(settings, 6, tmp_path, rank=1)
    assert ranked.path == tmp_path / "iteration6_rank_1.avro" and ranked.episodes == 1
    assert [e.episode_id for e in read_container(ranked.path)] == ["y1"]


async def test_metrics_from_partial_scores_are_corrected_when_late_scores_come(
    settings: Settings, producer: EventProducer, tmp_path: Path
) -> None:
    """Without a metrics process, `webgym rollout` recomputes at each close every closed
    iteration from the log (recompute_metrics); with one, numbers published by someone who
    had seen fewer scores are corrected by it."""
    csv_path = tmp_path / "out" / "metrics.csv"
    close = sample_event("IterationClosed").model_copy(update={"iteration": 1, "split": "train"})
    assert isinstance(close, IterationClosed)
    await publish_scored(producer, scored("p1", reward=1.0))
    await producer.publish(Topic.CONTROL, "1", close)
    table = await recompute_metrics(settings, producer, csv_path)  # iteration 1 closes
    assert (table[1].episodes, table[1].success_rate) == (1, 1.0)
    await publish_scored(producer, scored("p2"))  # scored after its iteration closed
    await producer.publish(Topic.CONTROL, "2", close.model_copy(update={"iteration": 2}))
    table = await recompute_metrics(settings, producer, csv_path)  # iteration 2 closes
    assert (table[1].episodes, table[1].success_rate, table[2].episodes) == (2, 0.5, 0)
    assert table[1].demonstrations == 0  # scored by a policy version: both are the policy's
    on_topic = await read_compacted(settings, Topic.METRICS, producer)
    assert same_numbers(on_topic["1"], table[1])
    assert csv_rows(csv_path)[1][:3] == ["1", "train", "2"]

    proc = PipelineProcess(settings, ["worker", "metrics", "--csv", str(csv_path)],
                           tmp_path / "metrics.log")
    try:
        await eventually(lambda: asyncio.to_thread(proc.is_ready), bool, "metrics ready")
        stale = compute_metrics(1, "train", [scored("p1", reward=1.0)])
        await producer.publish(Topic.METRICS, "1", stale)  # e.g. a controller's own numbers
        await eventually(lambda: read_compacted(settings, Topic.METRICS, producer),
                         lambda t: t["1"].episodes == 2, "iteration 1 corrected")
    finally:
        proc.stop()
    assert proc.proc.returncode == 0, proc.log_text()
