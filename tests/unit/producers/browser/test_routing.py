"""Where a browser worker's records go, what moves on a rebalance, what may be committed."""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from aiokafka import TopicPartition

from producers.browser.routing import (
    EarlyActions,
    Route,
    offsets_to_commit,
    on_partitions,
    remember,
    route_action,
    starts_episode,
)
from tests.factories import sample_event
from webgym_common.events import ActionChosen


def action(eid: str, step: int = 0) -> ActionChosen:
    a = sample_event("ActionChosen").model_copy(update={"episode_id": eid, "step": step})
    assert isinstance(a, ActionChosen)
    return a


@dataclass
class OnPartition:
    partition: int


def test_a_request_starts_an_episode_only_once() -> None:
    assert starts_episode("e", finished=set(), running={})
    assert not starts_episode("e", finished={"e"}, running={})
    assert not starts_episode("e", finished=set(), running={"e": object()})


def test_actions_go_to_their_episode_wait_for_it_or_are_dropped() -> None:
    assert route_action("e", finished={"e"}, running={}) is Route.DROP
    assert route_action("e", finished=set(), running={"e": object()}) is Route.DELIVER
    assert route_action("e", finished=set(), running={}) is Route.EARLY


def test_what_moves_is_chosen_by_partition_number_across_topics() -> None:
    sessions = {"a": OnPartition(0), "b": OnPartition(1), "c": OnPartition(0)}
    assert on_partitions(sessions, {0}) == ["a", "c"]
    assert on_partitions(sessions, set()) == []


def test_only_assigned_partitions_are_committed() -> None:
    p0, p1, p2 = (TopicPartition("t", p) for p in range(3))
    committable = {p0: 5, p1: 7, p2: 9}
    assert offsets_to_commit(committable, {p0, p1}) == {p0: 5, p1: 7}
    assert offsets_to_commit(committable, {p0, p1}, only={p1, p2}) == {p1: 7}


def test_remember_forgets_the_oldest_beyond_the_limit() -> None:
    store: OrderedDict[str, str | None] = OrderedDict()
    for key in "abcd":
        remember(store, key, None, limit=3)
    assert list(store) == ["b", "c", "d"]


def test_early_actions_wait_in_order_until_taken() -> None:
    early = EarlyActions()
    first, second = action("e", 0), action("e", 1)
    early.add(first, partition=2, now=10.0)
    early.add(second, partition=2, now=11.0)
    assert early.take("e") == [first, second]
    assert early.take("e") == []


def test_early_actions_expire_by_their_first_arrival() -> None:
    early = EarlyActions()
    early.add(action("old"), partition=0, now=0.0)
    early.add(action("old", 1), partition=0, now=50.0)
    early.add(action("new"), partition=1, now=50.0)
    assert early.stale(now=61.0, ttl_s=60) == ["old"]
    early.drop("old")
    early.drop("never-there")
    assert early.stale(now=1000.0, ttl_s=60) == ["new"]


def test_early_actions_move_with_their_partition() -> None:
    early = EarlyActions()
    early.add(action("a"), partition=0, now=0.0)
    early.add(action("b"), partition=1, now=0.0)
    assert early.on_partitions({1, 3}) == ["b"]
