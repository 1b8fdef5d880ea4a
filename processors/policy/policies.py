"""Policies behind one interface: decide the next action for an episode's observation.

- `VllmPolicy`: any OpenAI-compatible chat endpoint (vLLM locally, on a GPU, in compose), or
  several replicas of it (policy.replicas), each request to the least busy one
  (processors/policy/replicas.py).
- `TeacherForcingPolicy`: replays the task's reference actions (the upper bound, for debugging).
  It also returns the chat messages a model would have been shown (a screenshot only as its
  s3:// reference), so its prompts are stored like the model's and its rollouts are
  demonstrations to train on.

`failure_kind` sorts what a decision can raise: the model server or the object store
unreachable (retry while the episode can still use an action), the model refusing
the request (an explicit Invalid action: `refused`), or a bug. Kafka failing to take
the action is a passing failure too.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import random
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol, cast

import urllib3
from aiokafka.errors import KafkaError
from minio.error import S3Error
from openai import (
    APIConnectionError,
    APIStatusError,
    AsyncOpenAI,
    DefaultAsyncHttpxClient,
    InternalServerError,
    NotFoundError,
)
from openai.types.chat import ChatCompletionMessageParam
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from processors.policy.replicas import Replicas
from processors.policy.replies import ParsedReply, parse_reply
from webgym_common.agent.actions import format_action, invalid, reply_regex
from webgym_common.agent.prompts import PAGE_CHARS, EpisodeContext, build_messages
from webgym_common.agent.teacher import reference_thought, resolve_reference_action
from webgym_common.choices import ScreenshotFormat
from webgym_common.config import PolicySettings
from webgym_common.events import ReferenceAction, StepObserved
from webgym_common.objectstore import ObjectStore, ObjectStoreError
from webgym_common.versions import (
    control_model,
    control_number,
    served_name,
    version_number,
)

log = logging.getLogger(__name__)


@dataclass
class Decision:
    reply: ParsedReply
    messages: list[dict[str, Any]] | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_ms: float = 0.0
    # The model server's: the version in use when the request was made (a switch may come
    # while it is answered) and the model name it reports it served.
    policy_version: str | None = None
    served_model: str | None = None


class Policy(Protocol):
    version: str

    async def decide(self, ctx: EpisodeContext, obs: StepObserved) -> Decision: ...


class TeacherForcingPolicy:
    version = "teacher-forcing"

    def __init__(self, delay_s: float = 0.0, jitter_s: float = 0.0,
                 max_element_chars: int = PAGE_CHARS) -> None:
        self.delay_s, self.jitter_s = delay_s, jitter_s
        self.max_element_chars = max_element_chars

    async def decide(self, ctx: EpisodeContext, obs: StepObserved) -> Decision:
        if self.delay_s or self.jitter_s:
            await asyncio.sleep(self.delay_s + random.uniform(0, self.jitter_s))
        refs = ctx.reference_actions
        if obs.step < len(refs):
            ref = ReferenceAction(**refs[obs.step])
            action = resolve_reference_action(ref, obs.marks)
            thought = reference_thought(ref)
        else:
            action = resolve_reference_action(ReferenceAction(action="ANSWER", text=""), [])
            thought = "the reference sequence has no more steps"
        raw = f"Thought: {thought}\nAction: {format_action(action)}\nMemory_Updated: {{}}"
        # The prompt a model would have had for this reply: together they are a demonstration.
        # In coordinates mode the screenshot is part of it, by reference (never its bytes).
        image = obs.screenshot_uri if ctx.mode == "coordinates" else None
        messages = build_messages(ctx, obs.url, obs.marks, image, self.max_element_chars,
                                  tree=obs.accessibility_tree)
        return Decision(
            ParsedReply(thought=thought, action=action, memory_json=None, reasoning=None, raw=raw),
            messages=messages,
        )


class VllmPolicy:
    def __init__(self, cfg: PolicySettings, store: ObjectStore,
                 trained_name: str = "webgym-policy") -> None:
        self.cfg = cfg
        self.trained_name = trained_name  # trainer.model_name: its versions' served names
        self.store = store
        self.model = cfg.model
        self.version = cfg.version
        self.replicas = Replicas({url: AsyncOpenAI(
            base_url=url, api_key=cfg.api_key, timeout=cfg.timeout_s, max_retries=0,
            http_client=DefaultAsyncHttpxClient(verify=cfg.tls_verify),
        ) for url in cfg.replica_urls}, cfg.replica_cooldown_s)
        self.backoff = wait_exponential(multiplier=0.5, max=10)

    def use_model(self, model: str, version: str) -> None:
        """From the next request on, ask for `model` (a name vLLM serves: the base model's or
        an adapter's `<model>-v<N>`) and tag the actions `version` ("v<N>")."""
        self.model, self.version = model, version

    def choice(self, ctx: EpisodeContext) -> tuple[str, str, float, int | None]:
        """The served name, version tag, temperature and sampling seed for this episode's
        next request. An evaluation asks for exactly the version it was requested on (the
        base model for "base"), at the evaluation temperature with a fixed seed, so two
        evaluations of one version see the same model; training asks for the newest. A
        "control-vN" evaluation asks for the bank-only control's vN."""
        control = control_number(ctx.policy_version) if ctx.evaluation else None
        if control is not None:  # the bank-only control's line, beside the policy's own
            return (served_name(control_model(self.trained_name), control), ctx.policy_version,
                    self.cfg.eval_temperature, self.cfg.eval_seed)
        number = version_number(ctx.policy_version) if ctx.evaluation else None
        if number is None:  # training, or a tag naming no version
            return self.model, self.version, self.cfg.temperature, None
        name = served_name(self.trained_name, number) if number else self.cfg.model
        return name, ctx.policy_version, self.cfg.eval_temperature, self.cfg.eval_seed

    async def decide(self, ctx: EpisodeContext, obs: StepObserved) -> Decision:
        image = await self._image(obs) if self.cfg.vision or ctx.mode == "coordinates" else None
        messages = build_messages(ctx, obs.url, obs.marks, image, self.cfg.max_element_chars,
                                  tree=obs.accessibility_tree)
        # a switch mid-request does not relabel it
        model, version, temperature, seed = self.choice(ctx)
        extra: dict[str, Any] = {} if seed is None else {"seed": seed}
        if self.cfg.structured_output:
            extra["structured_outputs"] = {"regex": reply_regex(ctx.mode, self.cfg.thinking)}
        started = time.perf_counter()
        async for attempt in AsyncRetrying(
            stop=stop_after_attempt(self.cfg.retries + len(self.replicas.clients)),
            wait=self._wait, retry=retry_if_exception(self._try_again), reraise=True,
        ):
            with attempt:
                resp, replica = await self.replicas.ask(
                    lambda client: client.chat.completions.create(
                        model=model, messages=cast(list[ChatCompletionMessageParam], messages),
                        max_tokens=self.cfg.max_tokens,
                        temperature=temperature, extra_body=extra or None,
                    ))
        latency = (time.perf_counter() - started) * 1000
        raw = resp.choices[0].message.content or ""
        usage = resp.usage
        if resp.model != model:
            log.error("%s step %d: asked for %s, the server answered as %s", ctx.episode_id,
                      obs.step, model, resp.model)
        log.info("%s step %d: served by %s (%s) at %s", ctx.episode_id, obs.step, resp.model,
                 version, replica)
        return Decision(
            parse_reply(raw, ctx.mode), messages,
            prompt_tokens=usage.prompt_tokens if usage else 0,
            completion_tokens=usage.completion_tokens if usage else 0,
            latency_ms=latency, policy_version=version, served_model=resp.model,
        )

    def _try_again(self, err: BaseException) -> bool:
        """A replica away or failing is tried again (another one first, where one is ready);
        a 404 for the model only on another replica (one restarted lacks it for a while)."""
        if isinstance(err, APIConnectionError | InternalServerError):  # timeouts included
            return True
        return isinstance(err, NotFoundError) and self.replicas.ready()

    def _wait(self, state: RetryCallState) -> float:
        """No wait when another replica is ready; else the single server's backoff."""
        return 0.0 if self.replicas.ready() else float(self.backoff(state))

    async def _image(self, obs: StepObserved) -> str | None:
        if not obs.screenshot_uri:
            return None
        if self.cfg.image_transport == "presigned":
            return await self.store.presign(obs.screenshot_uri)
        data = await self.store.get_blob(obs.screenshot_uri)
        mime = ScreenshotFormat.mime_of(obs.screenshot_format)
        return f"data:{mime};base64,{base64.b64encode(data).decode()}"


class Failure(StrEnum):
    TRANSIENT = "transient"  # a dependency is down or slow: try again
    REFUSED = "refused"  # the model server rejects this request: trying again will not help
    BUG = "bug"


# 408 (timeout), 409 (conflict) and 429 (rate limit) are 4xx that pass.
_PASSING_4XX = {408, 409, 429}


def failure_kind(err: BaseException) -> Failure:
    """What kind of failure a decision (model call, screenshot, prompt blob) raised."""
    if isinstance(err, APIStatusError):
        if 400 <= err.status_code < 500 and err.status_code not in _PASSING_4XX:
            return Failure.REFUSED
        return Failure.TRANSIENT
    if isinstance(err, (APIConnectionError, ObjectStoreError, S3Error, KafkaError,
                        urllib3.exceptions.HTTPError, OSError, TimeoutError)):
        return Failure.TRANSIENT
    return Failure.BUG


def refused(err: BaseException, mode: str) -> Decision:
    """The decision when the model server refuses the request: an explicit Invalid action."""
    reason = f"the model server refused the request: {type(err).__name__}: {err}"[:1000]
    action = invalid("", reason, mode)
    return Decision(ParsedReply(thought=None, action=action, memory_json=None, reasoning=None,
                                raw=""), messages=None)


def make_policy(cfg: PolicySettings, store: ObjectStore, trained_name: str) -> Policy:
    if cfg.kind == "teacher":
        return TeacherForcingPolicy(cfg.teacher_delay_s, cfg.teacher_delay_jitter_s,
                                    cfg.max_element_chars)
    return VllmPolicy(cfg, store, trained_name)


def prompt_blob(messages: list[dict[str, Any]]) -> bytes:
    return json.dumps(messages, ensure_ascii=False, sort_keys=True).encode()
