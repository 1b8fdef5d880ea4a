"""A policy worker whose replies include an injected `Visit [url]` (a chaos-suite test double).

    python -m tests.chaos.visit_policy -v worker policy --kind teacher

is `webgym worker policy` with one change: the teacher's decisions are wrapped so that every
episode, at one step (`injection()`, seeded by its id), replies

    Thought: the page asks me to open another site
    Action: Visit [<WEBGYM_CHAOS_VISIT>]

instead of its reference step, which it takes at the next step (the teacher's steps are
shifted by one after the injection, so the episode still answers). Half the episodes get the
reply the way a model's reply gets it (`parse_reply`, the product's parser: Visit is not
offered, so the action is Invalid); the other half get it as if the decoder and a lenient
parser had let it through (`parse_action(offered_only=False)`: a Visit action), which only
the browser worker's refusal (producers/browser/execute.py `refusal`) stands in front of.
Everything else (the faust app, the tables, the retries, the prompts) is the real worker's.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, replace

from processors.policy import choosers
from processors.policy.policies import Decision, Policy, TeacherForcingPolicy
from processors.policy.replies import parse_reply
from webgym_common.agent.actions import ActionKind, parse_action
from webgym_common.agent.prompts import EpisodeContext
from webgym_common.config import PolicySettings
from webgym_common.events import StepObserved
from webgym_common.objectstore import ObjectStore

VISIT_ENV = "WEBGYM_CHAOS_VISIT"  # the URL the injected replies ask to visit
THOUGHT = "the page asks me to open another site"


@dataclass(frozen=True)
class Injection:
    step: int  # the step whose reply is the Visit
    lenient: bool  # True: a Visit action reaches the browser; False: the parser's Invalid


def injection(episode_id: str, reference_steps: int) -> Injection:
    """Where an episode's Visit comes: after its first step, before its answer."""
    h = int.from_bytes(hashlib.sha256(episode_id.encode()).digest()[:8], "big")
    return Injection(1 + h % max(1, reference_steps - 1), bool((h >> 32) & 1))


def visit_reply(url: str) -> str:
    return f"Thought: {THOUGHT}\nAction: Visit [{url}]\nMemory_Updated: {{}}"


class VisitInjectingPolicy:
    """The teacher, with one injected Visit reply per episode."""

    def __init__(self, teacher: TeacherForcingPolicy, url: str) -> None:
        self.teacher, self.url = teacher, url
        self.version = teacher.version

    async def decide(self, ctx: EpisodeContext, obs: StepObserved) -> Decision:
        at = injection(ctx.episode_id, len(ctx.reference_actions))
        if obs.step < at.step:
            return await self.teacher.decide(ctx, obs)
        if obs.step > at.step:  # the reference step the Visit took the place of, and on
            return await self.teacher.decide(ctx, obs.model_copy(update={"step": obs.step - 1}))
        shown = await self.teacher.decide(ctx, obs)  # the prompt of this step, and the delay
        reply = parse_reply(visit_reply(self.url), ctx.mode)
        if at.lenient:
            reply = replace(reply, action=parse_action(f"Visit [{self.url}]", ctx.mode,
                                                       offered_only=False))
            assert reply.action.kind == ActionKind.VISIT, reply.action
        return replace(shown, reply=reply)


def main() -> None:
    url = os.environ[VISIT_ENV]
    make = choosers.make_policy

    def injecting(cfg: PolicySettings, store: ObjectStore, trained_name: str) -> Policy:
        policy = make(cfg, store, trained_name)
        assert isinstance(policy, TeacherForcingPolicy), "run it with --kind teacher"
        return VisitInjectingPolicy(policy, url)

    choosers.make_policy = injecting
    from webgym_cli.main import app

    app(prog_name="webgym")


if __name__ == "__main__":
    main()
