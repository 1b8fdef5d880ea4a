"""What a chaos scenario is: its tasks, its options and the settings its pipeline runs with.

The tasks' reference actions post forms, so a re-run action shows on the sandbox's
per-episode post counter (the chaos-only hostile-page tasks post nothing); the settings
give the run a topic prefix of its own and keep the controller from papering over a hang
(no straggler cancel, no deadline inside the scenario's bound).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from environments.app import TASKS_FILE
from environments.tasks.common import answer, button, task
from webgym_common.choices import PolicyKind, SamplingStrategy
from webgym_common.config import Settings

# Train tasks (the iteration is a train one) whose reference actions post forms (cart,
# checkout, login, reply, upvote, booking), 4 to 10 steps each: 8 tasks x 6 draws = 48
# episodes.
CHAOS_TASKS = ("shop-012", "shop-016", "forum-007", "forum-010", "forum-011", "travel-008",
               "travel-010", "travel-014")


def _hostile(task_id: str, page: str, actions: list[dict]) -> dict:
    record = task(task_id, f"Open the {page} page, act on it as it asks, and say which page "
                  "it is.", site="hostile", subdomain=page, path=f"/hostile/{page}",
                  difficulty=1, facts=[("Page", [f"The page is the {page} page"])],
                  actions=actions, template=f"chaos-{page}", entities=[])
    return {**record, "split": "train"}


# Chaos-only train tasks (not in the bank) whose start page is a hostile sandbox page
# (environments/hostile.py): a 10 MB title, a 1 MB URL and a 1 MB alert; a 50 MB tree.
# None of their reference actions posts a form.
HOSTILE_TASKS = {t["task_id"]: t for t in (
    _hostile("chaos-huge-title", "huge-title",
             [button("Show notice"), button("Continue"), answer("huge title")]),
    _hostile("chaos-huge-tree", "huge-tree", [button("Continue"), answer("huge tree")]),
)}


@dataclass(frozen=True)
class Options:
    episodes: int = 48
    contexts: int = 8  # the browser worker's contexts: episodes in flight
    policy: str = "teacher"
    teacher_delay_s: float = 0.3
    bound_s: float = 300.0  # the iteration must end by then; what is missing is lost
    settle_s: float = 45.0  # after it ended: time for history/DLQ to catch up
    tasks: tuple[str, ...] = CHAOS_TASKS
    seed: int = 7
    replay: bool = False  # run a replay processor too, and check its samples


def all_tasks() -> dict[str, dict]:
    bank = {t["task_id"]: t for t in map(json.loads, TASKS_FILE.read_text().splitlines())}
    return {**bank, **HOSTILE_TASKS}


def chaos_settings(base: Settings, options: Options) -> Settings:
    """The stack's settings with a fresh prefix and the scenario's pipeline tuning."""
    kafka = base.kafka.model_copy(update={"topic_prefix": f"c{uuid.uuid4().hex[:10]}"})
    browser = base.browser.model_copy(update={
        "contexts": options.contexts, "settle_s": 0.2, "wait_action_s": 1.0,
        "observe_timeout_s": 10.0, "action_timeout_s": 8.0, "navigation_timeout_s": 10.0})
    policy = base.policy.model_copy(update={
        "kind": PolicyKind(options.policy), "teacher_delay_s": options.teacher_delay_s})
    rollout = base.rollout.model_copy(update={
        "strategy": SamplingStrategy.UNIFORM, "seed": options.seed,
        # The controller must not paper over a hang: no straggler cancel before the bound,
        # no deadline inside it. A lost episode stays visible as lost.
        "completion_threshold": 1.0, "grace_period_s": 0.0,
        "task_timeout_minutes": 30.0, "cancel_wait_s": 15.0, "score_wait_s": 60.0})
    return base.model_copy(update={"kafka": kafka, "browser": browser, "policy": policy,
                                   "rollout": rollout})
