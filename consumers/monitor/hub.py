"""What the monitor's reading side and its pages share: the view, the open live pages
(subscribers, each a bounded queue of server-sent events) and the topics followed.

app.py folds the log into the Monitor and announces changes; pages.py renders it. Both
import this module and not each other.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

from consumers.monitor.state import Change, View, progress
from webgym_common.config import Settings
from webgym_common.topics import Topic, topic_name

# Everything the pages show; webgym.tasks is not read (EpisodeRequested carries its task).
FOLLOWED = (Topic.EPISODES, Topic.OBSERVATIONS, Topic.ACTIONS, Topic.EPISODES_COMPLETED,
            Topic.CONTROL, Topic.METRICS, Topic.EVALUATIONS, Topic.TRAINING, Topic.MODELS,
            Topic.MODELS_SERVED, Topic.TASK_HISTORY, Topic.BLOCKLIST, Topic.DLQ)


def scored_topic(settings: Settings) -> str:
    return settings.monitor.scored_topic or topic_name(settings.kafka, Topic.EPISODES_SCORED)


def followed_topics(settings: Settings) -> list[str]:
    return [*(topic_name(settings.kafka, t) for t in FOLLOWED), scored_topic(settings)]


def sse(kind: str, data: dict[str, Any]) -> str:
    """One server-sent event."""
    return f"event: {kind}\ndata: {json.dumps(data)}\n\n"


@dataclass(eq=False)  # by identity: kept in a set
class Subscriber:
    """One open live page: a bounded queue of SSE messages; dropped when it falls behind."""

    queue: asyncio.Queue[str]
    dropped: bool = False


@dataclass
class Monitor:
    settings: Settings
    view: View
    subscribers: set[Subscriber] = field(default_factory=set)
    lags: dict[str, dict[str, int]] = field(default_factory=dict)

    def push(self, kind: str, data: dict[str, Any]) -> None:
        message = sse(kind, data)
        for sub in list(self.subscribers):
            try:
                sub.queue.put_nowait(message)
            except asyncio.QueueFull:  # a tab that cannot keep up reconnects: a snapshot
                sub.dropped = True
                self.subscribers.discard(sub)

    def announce(self, change: Change, timestamp_ms: int, cause: str = "") -> None:
        """`timestamp_ms`: the record's Kafka timestamp (its publication), which the page
        compares with its clock when the row is in the DOM; `cause`: the event's type."""
        if change.iteration is not None:
            self.push("iteration", {"iteration": change.iteration})
        if change.episode is not None:
            self.push("episode", {**change.episode, "ts": timestamp_ms, "cause": cause})

    def snapshot(self) -> list[str]:
        """What a page (re)connecting is told first: the current iteration and its rows as
        they are now, so a change between the page's render and its subscription is not lost.
        `row` events carry no publication time: they are not latencies."""
        it = self.view.current_iteration
        if it is None:
            return []
        return [sse("iteration", {"iteration": it}),
                *(sse("row", e.row()) for e in self.view.grid(it))]

    def stats(self) -> dict[str, Any]:
        it = self.view.current_iteration
        started = self.view.iterations.get(it) if it is not None else None
        return {"iteration": it,
                "progress": progress(self.view.grid(it),
                                     started.tasks_requested if started else None),
                **self.view.rates(int(time.time() * 1000)), "lag": self.lags,
                "closed": it in self.view.closed}
