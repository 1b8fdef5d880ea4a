"""What the env server's tests share: a two-task catalog and a producer that records."""

from __future__ import annotations

from typing import Any

from webgym_common.events import Event, Task
from webgym_common.topics import Topic

TASKS = [Task(task_id=f"shop-00{i}", task_name=f"task {i}", domain="sandbox-shop",
              subdomain="s", website="{sandbox}/shop/", difficulty=1) for i in (2, 1)]


class FakeProducer:
    def __init__(self) -> None:
        self.sent: list[tuple[Topic, str, Event]] = []

    async def publish(self, topic: Topic, key: str, event: Event) -> None:
        self.sent.append((topic, key, event))

    def of(self, kind: type) -> list[Any]:
        return [e for _, _, e in self.sent if isinstance(e, kind)]
