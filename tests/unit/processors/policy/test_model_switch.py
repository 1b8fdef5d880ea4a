"""VllmPolicy after a model switch: it asks for the served name, and a decision carries the
version it was requested under and the model name the server says it answered with."""

from __future__ import annotations

import asyncio
import json
import logging

import httpx
import pytest
from openai import AsyncOpenAI

from processors.policy.policies import VllmPolicy
from processors.policy.replicas import Replicas
from webgym_common.agent.prompts import EpisodeContext
from webgym_common.config import load_settings
from webgym_common.events import StepObserved, Viewport

REPLY = "Thought: look\nAction: Click [1]\nMemory_Updated: {}"


def completion(model: str) -> dict:
    return {"id": "c1", "object": "chat.completion", "created": 0, "model": model,
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": REPLY}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}


class FakeServer:
    """Answers as vLLM does (response.model = the model asked for) unless told to lie."""

    def __init__(self, policy: VllmPolicy, answer_as: str | None = None) -> None:
        self.policy, self.answer_as = policy, answer_as
        self.asked: list[str] = []
        self.switch_midway: tuple[str, str] | None = None

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        model = json.loads(request.content)["model"]
        self.asked.append(model)
        if self.switch_midway is not None:  # the next version is served while this is answered
            self.policy.use_model(*self.switch_midway)
            await asyncio.sleep(0)
        return httpx.Response(200, json=completion(self.answer_as or model))


def policy_with(answer_as: str | None = None) -> tuple[VllmPolicy, FakeServer]:
    cfg = load_settings(policy={"base_url": "http://vllm/v1", "structured_output": False}).policy
    policy = VllmPolicy(cfg, store=None)  # type: ignore[arg-type]  # no screenshots asked for
    server = FakeServer(policy, answer_as)
    policy.replicas = Replicas({"http://vllm/v1": AsyncOpenAI(
        base_url="http://vllm/v1", api_key="k", max_retries=0,
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(server)))}, 5.0)
    return policy, server


CTX = EpisodeContext(episode_id="ep", task_id="t", task_name="find it")
OBS = StepObserved(episode_id="ep", task_id="t", step=0, url="http://x/",
                   viewport=Viewport(width=1, height=1))


async def test_before_any_switch_the_base_model_answers_as_version_base() -> None:
    policy, server = policy_with()
    decision = await policy.decide(CTX, OBS)
    assert server.asked == ["webgym-policy"]
    assert (decision.policy_version, decision.served_model) == ("base", "webgym-policy")


async def test_after_a_switch_the_adapter_is_asked_for_and_reported() -> None:
    policy, server = policy_with()
    policy.use_model("webgym-policy-v1", "v1")
    decision = await policy.decide(CTX, OBS)
    assert server.asked == ["webgym-policy-v1"]
    assert (decision.policy_version, decision.served_model) == ("v1", "webgym-policy-v1")
    assert policy.version == "v1"


async def test_a_switch_while_a_request_is_answered_does_not_relabel_it() -> None:
    policy, server = policy_with()
    policy.use_model("webgym-policy-v1", "v1")
    server.switch_midway = ("webgym-policy-v2", "v2")
    decision = await policy.decide(CTX, OBS)
    assert (decision.policy_version, decision.served_model) == ("v1", "webgym-policy-v1")
    server.switch_midway = None
    assert (await policy.decide(CTX, OBS)).policy_version == "v2"
    assert server.asked == ["webgym-policy-v1", "webgym-policy-v2"]


async def test_a_server_answering_as_another_model_is_logged_as_an_error(
        caplog: pytest.LogCaptureFixture) -> None:
    policy, _ = policy_with(answer_as="webgym-policy")  # a stale or missing adapter
    policy.use_model("webgym-policy-v2", "v2")
    with caplog.at_level(logging.INFO, logger="processors.policy.policies"):
        decision = await policy.decide(CTX, OBS)
    assert decision.served_model == "webgym-policy"
    errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
    assert errors == ["ep step 0: asked for webgym-policy-v2, the server answered as "
                      "webgym-policy"]


def _evaluation(tag: str) -> EpisodeContext:
    return EpisodeContext(episode_id="ev", task_id="t", task_name="find it",
                          policy_version=tag, evaluation=True)


async def test_an_evaluation_asks_for_exactly_its_version_even_after_a_newer_one() -> None:
    policy, server = policy_with()
    policy.use_model("webgym-policy-v3", "v3")
    decision = await policy.decide(_evaluation("v1"), OBS)
    assert server.asked == ["webgym-policy-v1"]
    assert decision.policy_version == "v1"
    await policy.decide(CTX, OBS)  # a training episode still asks for the newest
    assert server.asked[-1] == "webgym-policy-v3"


async def test_an_evaluation_of_version_0_asks_for_the_base_model() -> None:
    policy, server = policy_with()
    policy.use_model("webgym-policy-v2", "v2")
    decision = await policy.decide(_evaluation("base"), OBS)
    assert server.asked == ["webgym-policy"] and decision.policy_version == "base"


async def test_an_evaluation_of_the_control_asks_for_the_control_line() -> None:
    policy, server = policy_with()
    policy.use_model("webgym-policy-v3", "v3")
    decision = await policy.decide(_evaluation("control-v1"), OBS)
    assert server.asked == ["webgym-policy-control-v1"]
    assert decision.policy_version == "control-v1"


def test_an_evaluation_samples_at_the_evaluation_temperature_and_seed() -> None:
    cfg = load_settings(policy={"temperature": 1.0, "eval_temperature": 0.3,
                                "eval_seed": 7}).policy
    policy = VllmPolicy(cfg, store=None)  # type: ignore[arg-type]
    assert policy.choice(_evaluation("v2"))[2:] == (0.3, 7)
    assert policy.choice(CTX)[2:] == (1.0, None)
