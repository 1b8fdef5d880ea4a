"""Where a browser worker's records go, and which offsets it may commit (pure decisions).

A request starts an episode unless that episode is running or finished here. An
action goes to its running episode; an action of a finished episode is dropped
(committed with its neighbours); an action whose request is further along the
episodes partition waits in EarlyActions until the request comes or its time is up.
"""

from __future__ import annotations

from collections import OrderedDict, defaultdict
from collections.abc import Collection, Iterable, Mapping
from enum import StrEnum
from typing import Protocol, TypeVar

from aiokafka import TopicPartition

from webgym_common.events import ActionChosen

REMEMBERED_EPISODES = 10_000
V = TypeVar("V")


class Route(StrEnum):
    DROP = "drop"  # nothing to do: committed with its neighbours
    DELIVER = "deliver"  # into the running episode's inbox
    EARLY = "early"  # keep until its request comes


class OnPartition(Protocol):
    @property
    def partition(self) -> int: ...


def starts_episode(eid: str, finished: Collection[str], running: Collection[str]) -> bool:
    """A request starts an episode unless it already runs or ended here (a redelivery)."""
    return eid not in finished and eid not in running


def route_action(eid: str, finished: Collection[str], running: Collection[str]) -> Route:
    if eid in finished:
        return Route.DROP
    return Route.DELIVER if eid in running else Route.EARLY


def on_partitions(items: Mapping[str, OnPartition], numbers: Collection[int]) -> list[str]:
    """Keys of the items (e.g. sessions) whose episode partition is one of `numbers`.

    Episodes and actions are co-partitioned, so the number alone says what moves.
    """
    return [k for k, item in items.items() if item.partition in numbers]


def offsets_to_commit(
    committable: Mapping[TopicPartition, int], assigned: Collection[TopicPartition],
    only: Collection[TopicPartition] | None = None,
) -> dict[TopicPartition, int]:
    """Committable offsets of partitions still assigned (and in `only`, when given)."""
    return {tp: off for tp, off in committable.items()
            if tp in assigned and (only is None or tp in only)}


def remember(store: OrderedDict[str, V], key: str, value: V,
             limit: int = REMEMBERED_EPISODES) -> None:
    """Add `key`, forgetting the oldest keys beyond `limit`."""
    store[key] = value
    while len(store) > limit:
        store.popitem(last=False)


class EarlyActions:
    """Actions read before their episode's request, per episode, with when and where."""

    def __init__(self) -> None:
        self.waiting: dict[str, list[tuple[float, int, ActionChosen]]] = defaultdict(list)

    def add(self, action: ActionChosen, partition: int, now: float) -> None:
        self.waiting[action.episode_id].append((now, partition, action))

    def take(self, eid: str) -> list[ActionChosen]:
        return [action for _, _, action in self.waiting.pop(eid, [])]

    def stale(self, now: float, ttl_s: float) -> list[str]:
        """Episodes whose first early action is older than `ttl_s`."""
        return [e for e, acts in self.waiting.items() if now - acts[0][0] > ttl_s]

    def on_partitions(self, numbers: Iterable[int]) -> list[str]:
        wanted = set(numbers)
        return [e for e, acts in self.waiting.items() if acts[0][1] in wanted]

    def drop(self, eid: str) -> None:
        self.waiting.pop(eid, None)
