"""What a decision's failures mean (policies.py): retry, an explicit Invalid action, or a bug."""

from __future__ import annotations

import httpx
import openai
from aiokafka.errors import KafkaTimeoutError

from processors.policy.policies import Failure, TeacherForcingPolicy, failure_kind, refused
from tests.factories import sample_event
from webgym_common.agent.prompts import EpisodeContext, build_messages
from webgym_common.events import Mark, StepObserved
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


TREE = """- heading "Checkout" [level=1] [ref=e1] [box=0,0,100,20]
- button "Go" [pressed] [ref=e4] [box=1,2,3,4]"""


def observation(step: int) -> StepObserved:
    obs = sample_event("StepObserved")
    assert isinstance(obs, StepObserved)
    mark = Mark(index=4, ref="e4", role="button", name="Go", x=1, y=2, width=3, height=4)
    return obs.model_copy(update={"step": step, "url": "http://site/a", "marks": [mark],
                                  "screenshot_uri": "s3://shots/sha256/ab/ab.jpg",
                                  "accessibility_tree": TREE})


async def test_the_teacher_returns_the_prompt_a_model_would_have_had_with_its_reply() -> None:
    ctx = EpisodeContext(episode_id="ep", task_id="t", task_name="press go",
                         reference_actions=[{"action": "Click", "role": "button", "name": "Go"}])
    obs = observation(0)
    decision = await TeacherForcingPolicy(max_element_chars=500).decide(ctx, obs)
    # the very messages the model is given (set of marks: no image), so they can be stored
    assert decision.messages == build_messages(ctx, "http://site/a", obs.marks, None, 500,
                                               tree=TREE)
    # ... whose page view is read from the snapshot: its text and the element's state
    assert 'Checkout\n"Go" button pressed [4]' in decision.messages[1]["content"]
    # the thought names what the step does, to which element
    assert decision.reply.raw == ('Thought: click the button "Go"\nAction: Click [4]\n'
                                  "Memory_Updated: {}")


async def test_in_coordinates_mode_the_teachers_prompt_refers_to_the_screenshot() -> None:
    ctx = EpisodeContext(episode_id="ep", task_id="t", task_name="x", mode="coordinates")
    decision = await TeacherForcingPolicy().decide(ctx, observation(3))
    assert decision.messages is not None
    parts = decision.messages[1]["content"]
    # the screenshot's object-store reference, never its bytes
    assert parts[1] == {"type": "image_url",
                        "image_url": {"url": "s3://shots/sha256/ab/ab.jpg"}}
