"""Starting real evaluator processes and reading their scores, for the evaluator's
integration tests (the pipeline's episodes: test_evaluator.py; hand-published trajectories,
restarts and poison: test_evaluator_recovery.py), and publishing events by hand."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from harness.launch import PipelineProcess
from webgym_common.config import Settings
from webgym_common.events import EpisodeRequested, EpisodeScored, Event, Task
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.tasks import read_task_file
from webgym_common.topics import Topic

TASKS = {t.task_id: t for t in read_task_file(Path("environments/tasks/sandbox_tasks.jsonl"))[0]}


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
                    event = received.event
                    if isinstance(event, EpisodeScored) and event.episode_id in scores:
                        scores[event.episode_id].append(event)
                if done_at is None and all(scores.values()):
                    done_at = clock()
    return scores


async def publish_all(producer: EventProducer,
                      events: Sequence[tuple[Topic, Event]]) -> None:
    """Publish in order without a round trip per event (thousands of them)."""
    sent = [await producer.producer.send(producer.topic(topic), producer.codec.encode(event),
                                         key=_episode_key(event))
            for topic, event in events]
    async with asyncio.timeout(120):
        await asyncio.gather(*sent)


def _episode_key(event: Event) -> bytes:
    """The key an episode's events are published under: its episode id."""
    episode_id = getattr(event, "episode_id", None)
    if not isinstance(episode_id, str):
        raise TypeError(f"{type(event).__name__} has no episode_id to key it by")
    return episode_id.encode()


def answered_tasks() -> list[Task]:
    return [t for t in TASKS.values() if t.definite_answer and t.domain != "sandbox-hostile"]
