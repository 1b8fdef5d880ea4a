"""Who decides a step, and the ActionChosen it makes: the model, the teacher or the baseline.

Demonstration episodes (EpisodeRequested.demonstration) are teacher-forced; episodes
requested on "baseline" (`webgym eval --baseline`) get the scripted baseline; the rest
go to the configured policy (vLLM on the newest served version, or the one an
evaluation names). The model's prompt is stored in MinIO and the action carries its
URI, so the replay buffer trains on exactly what the model saw.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import StrEnum

from processors.policy.baseline import BaselinePolicy, is_baseline
from processors.policy.decisions import action_event
from processors.policy.models import ServedModels
from processors.policy.policies import (
    Policy,
    TeacherForcingPolicy,
    VllmPolicy,
    make_policy,
    prompt_blob,
    refused,
)
from processors.policy.retry import retried
from webgym_common.agent.prompts import EpisodeContext
from webgym_common.config import Settings
from webgym_common.events import ActionChosen, StepObserved
from webgym_common.objectstore import ObjectStore
from webgym_common.timings import Timings

log = logging.getLogger(__name__)


class Chooser(StrEnum):
    POLICY = "policy"
    TEACHER = "teacher"
    BASELINE = "baseline"


def chooser_for(ctx: EpisodeContext) -> Chooser:
    """Who decides this episode's steps."""
    if ctx.demonstration:
        return Chooser.TEACHER
    return Chooser.BASELINE if is_baseline(ctx) else Chooser.POLICY


class Choosers:
    def __init__(self, settings: Settings) -> None:
        cfg = settings.policy
        self.store = ObjectStore(settings.s3)
        self.policy = make_policy(cfg, self.store, settings.trainer.model_name)
        self.by_kind: dict[Chooser, Policy] = {
            Chooser.POLICY: self.policy,
            Chooser.TEACHER: TeacherForcingPolicy(max_element_chars=cfg.max_element_chars),
            Chooser.BASELINE: BaselinePolicy(),
        }
        self.served = (ServedModels(settings, self.policy)
                       if isinstance(self.policy, VllmPolicy) else None)
        self.max_backoff_s = cfg.retry_max_backoff_s

    async def follow_models(self) -> None:
        if self.served is not None:
            await self.served.follow()

    async def choose(self, ctx: EpisodeContext, obs: StepObserved, what: str,
                     useful: Callable[[float], bool]) -> ActionChosen | None:
        """The step's action (None: a dependency stayed down while the episode could use it)."""
        kind = chooser_for(ctx)
        chooser = self.by_kind[kind]
        if self.served is not None and kind is Chooser.POLICY:  # the scripted need no model
            if not self.served.ready.is_set():
                log.info("%s: waiting until the model loader names the served version", what)
            await self.served.ready.wait()  # the newest served version, even right after a start
            if not ctx.evaluation:  # an evaluation names its version (VllmPolicy.choice)
                self.served.pin(ctx.policy_version)
        timings = Timings()
        with timings.phase("model"):
            decision = await retried(lambda: chooser.decide(ctx, obs), what, useful,
                                     self.max_backoff_s, lambda err: refused(err, ctx.mode))
        if decision is None:
            return None
        prompt_uri = None
        if decision.messages is not None:
            blob = prompt_blob(decision.messages)
            with timings.phase("prompt_store"):
                ref = await retried(lambda: self.store.put_blob(blob, "application/json"),
                                    what, useful, self.max_backoff_s)
            if ref is None:
                return None
            prompt_uri = ref.uri
        chosen = action_event(ctx, obs, decision, prompt_uri,
                              decision.policy_version or chooser.version)
        chosen.timings_ms.update(timings.ms)
        return chosen
