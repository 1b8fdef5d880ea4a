"""Tasks published to webgym.tasks by hand: the catalog the leak guard reads, for tests and
benches that publish episodes or samples of tasks no task file holds."""

from __future__ import annotations

from collections.abc import Iterable

from webgym_common.events import ReferenceAction, Task
from webgym_common.stream.bus import EventProducer
from webgym_common.topics import Topic


def made_task(task_id: str, split: str = "train", answer: str | None = None) -> Task:
    """A task of `split`; `answer` gives it a one-step reference solution (ANSWER [answer])."""
    refs = [ReferenceAction(action="ANSWER", text=answer)] if answer is not None else []
    return Task(task_id=task_id, task_name=f"task {task_id}", domain="test.example",
                website="http://test.example/", difficulty=1, split=split,
                reference_actions=refs)


async def publish_tasks(producer: EventProducer, tasks: Iterable[Task]) -> None:
    for task in tasks:
        await producer.publish(Topic.TASKS, task.task_id, task)


async def publish_train_tasks(producer: EventProducer, task_ids: Iterable[str]) -> None:
    """Train tasks the leak guard lets train (no solution, nothing held out)."""
    await publish_tasks(producer, (made_task(t) for t in task_ids))
