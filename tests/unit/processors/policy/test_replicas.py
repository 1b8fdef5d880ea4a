"""Decisions spread over several vLLM replicas (policy.replicas): the fewest in flight first,
a replica that fails skipped for a cool-down and the decision tried again on another."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import openai
import pytest
from openai import AsyncOpenAI

from processors.policy.policies import VllmPolicy
from processors.policy.replicas import Replicas, pick_replica
from tests.unit.processors.policy.test_model_switch import CTX, OBS, completion
from webgym_common.config import load_settings

A, B = "http://a/v1", "http://b/v1"


def test_the_fewest_in_flight_is_picked_the_first_listed_of_equals() -> None:
    assert pick_replica({A: 2, B: 1}, set()) == B
    assert pick_replica({A: 1, B: 1}, set()) == A
    assert pick_replica({A: 0, B: 0, "c": 0}, set()) == A


def test_a_replica_cooling_down_is_skipped_and_none_when_all_are() -> None:
    assert pick_replica({A: 0, B: 5}, {A}) == B
    assert pick_replica({A: 0, B: 5}, {A, B}) is None
    assert pick_replica({}, set()) is None


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Server:
    """One replica: answers as vLLM does, or is down, or lacks adapters (restarted); can
    hold its answers until released, to count what is in flight."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.down = False
        self.lacks: set[str] = set()
        self.asked: list[str] = []
        self.hold: asyncio.Event | None = None
        self.arrivals: asyncio.Queue[str] | None = None

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        model = json.loads(request.content)["model"]
        self.asked.append(model)
        if self.down:
            raise httpx.ConnectError("connection refused", request=request)
        if model in self.lacks:
            return httpx.Response(404, json={"error": {"message": f"The model `{model}` does "
                                                              "not exist.", "code": 404}})
        if self.hold is not None and self.arrivals is not None:
            self.arrivals.put_nowait(self.url)
            await self.hold.wait()
        return httpx.Response(200, json=completion(model))


def policy_over(*urls: str) -> tuple[VllmPolicy, dict[str, Server], Clock]:
    cfg = load_settings(policy={"replicas": list(urls), "structured_output": False,
                                "replica_cooldown_s": 5}).policy
    policy = VllmPolicy(cfg, store=None)  # type: ignore[arg-type]
    servers = {u: Server(u) for u in urls}
    clock = Clock()
    policy.replicas = Replicas({u: AsyncOpenAI(
        base_url=u, api_key="k", max_retries=0,
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(s)))
        for u, s in servers.items()}, cfg.replica_cooldown_s, clock)
    policy.backoff = lambda state: 0.0  # type: ignore[assignment,method-assign]
    return policy, servers, clock


async def test_one_replica_by_default_the_base_url() -> None:
    cfg = load_settings(policy={"base_url": "http://vllm/v1"}).policy
    assert list(VllmPolicy(cfg, store=None).replicas.clients) == ["http://vllm/v1"]  # type: ignore[arg-type]


async def test_decisions_in_flight_are_spread_over_the_replicas() -> None:
    policy, servers, _ = policy_over(A, B)
    hold, arrivals = asyncio.Event(), asyncio.Queue[str]()
    for s in servers.values():
        s.hold, s.arrivals = hold, arrivals
    decisions = [asyncio.create_task(policy.decide(CTX, OBS)) for _ in range(5)]
    assert sorted([await arrivals.get() for _ in range(5)]) == [A, A, A, B, B]
    assert policy.replicas.in_flight == {A: 3, B: 2}
    hold.set()
    await asyncio.gather(*decisions)
    assert policy.replicas.in_flight == {A: 0, B: 0}


async def test_a_replica_that_dies_is_skipped_for_a_while_and_the_decision_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    policy, servers, clock = policy_over(A, B)
    servers[A].down = True
    decision = await policy.decide(CTX, OBS)  # a refused the connection: b answered it
    assert decision.served_model == "webgym-policy"
    assert (len(servers[A].asked), len(servers[B].asked)) == (1, 1)
    assert f"replica {A} failed" in caplog.text
    await policy.decide(CTX, OBS)  # a cools down: not asked
    assert (len(servers[A].asked), len(servers[B].asked)) == (1, 2)
    servers[A].down = False
    clock.now += 6  # the cool-down is over: a is asked again, first as the first listed
    await policy.decide(CTX, OBS)
    assert (len(servers[A].asked), len(servers[B].asked)) == (2, 2)
    assert policy.replicas.cooling() == set()


async def test_a_restarted_replica_lacking_the_adapter_passes_the_decision_on() -> None:
    policy, servers, _ = policy_over(A, B)
    policy.use_model("webgym-policy-v2", "v2")
    servers[A].lacks = {"webgym-policy-v2"}  # restarted: the loader's check has not run yet
    decision = await policy.decide(CTX, OBS)
    assert (decision.served_model, decision.policy_version) == ("webgym-policy-v2", "v2")
    assert servers[B].asked == ["webgym-policy-v2"]


async def test_a_model_no_replica_serves_is_refused_as_with_one_server() -> None:
    for urls in ((A,), (A, B)):
        policy, servers, _ = policy_over(*urls)
        policy.use_model("webgym-policy-v9", "v9")
        for s in servers.values():
            s.lacks = {"webgym-policy-v9"}
        with pytest.raises(openai.NotFoundError):
            await policy.decide(CTX, OBS)
        assert [len(s.asked) for s in servers.values()] == [1] * len(urls)


async def test_every_replica_down_is_tried_with_backoff_then_raised() -> None:
    policy, servers, _ = policy_over(A, B)
    waits: list[Any] = []
    policy.backoff = lambda state: waits.append(state.attempt_number) or 0.0  # type: ignore[assignment,method-assign,func-returns-value]
    for s in servers.values():
        s.down = True
    with pytest.raises(openai.APIConnectionError):
        await policy.decide(CTX, OBS)
    attempts = policy.cfg.retries + 2
    assert len(servers[A].asked) + len(servers[B].asked) == attempts
    # no backoff before b's first try (a had just failed), the backoff after that
    assert 1 not in waits and waits[:2] == [2, 3]
