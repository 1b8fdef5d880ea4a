"""Trying a decision again (retry.py): while useful, a refusal once, a bug never."""

from __future__ import annotations

import httpx
import openai
import pytest

from processors.policy.retry import retried
from webgym_common.objectstore import ObjectStoreError
from webgym_common.stream import handlers

REQUEST = httpx.Request("POST", "http://vllm/v1/chat/completions")


class Flaky:
    def __init__(self, *failures: BaseException) -> None:
        self.failures, self.calls = list(failures), 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "decided"


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []

    async def sleep(s: float) -> None:
        slept.append(s)
    monkeypatch.setattr(handlers.asyncio, "sleep", sleep)  # the backoff loop lives there
    return slept


async def test_a_dependency_down_is_tried_again_with_growing_waits(no_sleep: list[float]) -> None:
    call = Flaky(openai.APIConnectionError(request=REQUEST), ObjectStoreError("down"),
                 openai.APIConnectionError(request=REQUEST), TimeoutError())
    assert await retried(call, "ep step 0", lambda _: True, 1.5) == "decided"
    assert call.calls == 5 and no_sleep == [0.5, 1.0, 1.5, 1.5]


async def test_it_gives_up_once_the_episode_can_no_longer_use_an_action() -> None:
    tries = iter([True, True, False])
    call = Flaky(*[openai.APITimeoutError(REQUEST)] * 10)
    assert await retried(call, "ep", lambda _: next(tries), 10) is None
    assert call.calls == 3


async def test_a_refusal_gives_the_callers_answer_at_once_and_a_bug_is_raised() -> None:
    bad = openai.APIStatusError("bad request", response=httpx.Response(400, request=REQUEST),
                                body=None)
    call = Flaky(bad)
    assert await retried(call, "ep", lambda _: True, 10, lambda err: f"invalid: {err}") == (
        "invalid: bad request")
    assert call.calls == 1
    with pytest.raises(openai.APIStatusError):  # a refusal where none is expected: a bug
        await retried(Flaky(bad), "ep", lambda _: True, 10)
    with pytest.raises(KeyError):
        await retried(Flaky(KeyError("choices")), "ep", lambda _: True, 10)
