"""What a decision's failures mean (policies.py): retry, an explicit Invalid action, or a bug."""

from __future__ import annotations

import httpx
import openai
from aiokafka.errors import KafkaTimeoutError

from processors.policy.policies import Failure, failure_kind, refused
from webgym_common.objectstore import ObjectStoreError

REQUEST = httpx.Request("POST", "http://vllm/v1/chat/completions")


def status(code: int) -> openai.APIStatusError:
    return openai.APIStatusError(f"status {code}", response=httpx.Response(code, request=REQUEST),
                                 body=None)


def test_a_server_that_is_down_or_busy_is_tried_again() -> None:
    for err in (openai.APIConnectionError(request=REQUEST), openai.APITimeoutError(REQUEST),
                status(500), status(503), status(429), status(408),
                ObjectStoreError("MinIO did not answer"), ConnectionRefusedError(),
                TimeoutError(), KafkaTimeoutError()):
        assert failure_kind(err) is Failure.TRANSIENT, err


def test_a_request_the_model_server_rejects_is_refused_and_a_bug_is_a_bug() -> None:
    for code in (400, 404, 413, 422):
        assert failure_kind(status(code)) is Failure.REFUSED
    assert failure_kind(KeyError("choices")) is Failure.BUG


def test_a_refusal_becomes_an_explicit_invalid_action_carrying_the_error() -> None:
    decision = refused(status(400), "coordinates")
    action = decision.reply.action
    assert action.kind == "Invalid" and not action.valid
    assert "refused" in (action.error or "") and "status 400" in (action.error or "")
    assert action.mode == "coordinates" and decision.messages is None
