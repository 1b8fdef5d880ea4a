"""What the evaluator knows about one episode, and how it keeps it in faust tables.

The tables hold plain JSON records (they must read back the same after recovery
from the changelog): the task from EpisodeRequested, one record per observed
step and one per action. `build_episode` assembles them into an `Episode`
when the EpisodeCompleted arrives.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webgym_common.events import (
    ActionChosen,
    EpisodeCompleted,
    EpisodeRequested,
    StepObserved,
    TrajectoryStep,
)

# Aria-snapshot attributes that help a browser find an element but tell a judge nothing.
_NOISE = re.compile(r"\s*\[(?:ref|box|cursor)=[^\]]*\]")


@dataclass(frozen=True)
class FactGroupRef:
    id: int
    description: str
    facts: tuple[str, ...]  # alternatives joined by OR: any one suffices


@dataclass(frozen=True)
class TaskFacts:
    task_id: str
    task_name: str
    domain: str
    fact_groups: tuple[FactGroupRef, ...] = ()
    definite_answer: str | None = None
    # A page that scores itself (Task.environment), e.g. "miniwob click-button, seed 3".
    environment: str | None = None


@dataclass(frozen=True)
class StepEvidence:
    """One step: the page the browser saw and the action the policy chose on it."""

    step: int
    observed: bool = True  # False: an action whose observation never arrived
    url: str = ""
    title: str = ""
    page_text: str = ""
    screenshot_uri: str | None = None
    screenshot_sha256: str | None = None
    screenshot_format: str | None = None
    action_string: str | None = None  # None: no action was recorded for this step
    action_kind: str | None = None
    action_url: str | None = None
    action_valid: bool = True
    thought: str | None = None
    memory_json: str | None = None
    raw_response: str = ""
    prompt_uri: str | None = None  # the messages the policy was given (object store)
    policy_version: str | None = None  # the model version that chose the action


@dataclass(frozen=True)
class Episode:
    episode_id: str
    task: TaskFacts
    termination: str
    answer: str | None
    steps_taken: int
    max_steps: int
    trajectory: tuple[StepEvidence, ...]
    reason: str | None = None  # why the browser ended it that way (blocked, crashed, ...)
    policy_version: str = "unknown"
    page_reward: float | None = None  # a self-scoring page's raw reward (EpisodeCompleted)

    @property
    def submitted(self) -> bool:
        """The agent ended the episode with an ANSWER."""
        return self.termination == "answer" and self.answer is not None


# -- table records ---------------------------------------------------------------


def step_key(episode_id: str, step: int) -> str:
    return f"{episode_id}/{step}"


def page_excerpt(tree: str, limit: int) -> str:
    """The accessibility tree as page text for a judge, without marks, cut to `limit`."""
    text = "\n".join(line.rstrip() for line in _NOISE.sub("", tree).splitlines() if line.strip())
    return text if len(text) <= limit else text[:limit].rstrip() + " ..."


def environment_label(req: EpisodeRequested) -> str | None:
    env = req.task.environment
    return None if env is None else f"{env.kind} {env.name}, seed {env.seed}"


def request_record(req: EpisodeRequested) -> dict[str, Any]:
    task = req.task
    return {
        "task_id": task.task_id, "task_name": task.task_name, "domain": task.domain,
        "fact_groups": [{"id": g.id, "description": g.description, "facts": list(g.facts)}
                        for g in task.evaluator_reference],
        "definite_answer": task.definite_answer, "max_steps": req.max_steps,
        "policy_version": req.policy_version, "environment": environment_label(req),
    }


def observation_record(obs: StepObserved, text_chars: int) -> dict[str, Any]:
    return {
        "url": obs.url, "title": obs.title,
        "text": page_excerpt(obs.accessibility_tree, text_chars),
        "screenshot_uri": obs.screenshot_uri, "screenshot_sha256": obs.screenshot_sha256,
        "screenshot_format": obs.screenshot_format,
    }


def action_record(chosen: ActionChosen) -> dict[str, Any]:
    a = chosen.action
    return {
        "action_string": chosen.action_string, "kind": a.kind, "url": a.url, "valid": a.valid,
        "thought": chosen.thought, "memory_json": chosen.memory_json,
        "raw_response": chosen.raw_response,
        "prompt_uri": chosen.prompt_uri,
        "policy_version": chosen.policy_version,
    }


def steps_in(table: Mapping[str, Any], done: EpisodeCompleted) -> dict[int, dict[str, Any]]:
    """An episode's step records in a table: 0 .. its ANSWER step, and on while there are more."""
    out, step = {}, 0
    while step <= done.steps + 1 or step_key(done.episode_id, step) in table:
        if (record := table.get(step_key(done.episode_id, step))) is not None:
            out[step] = record
        step += 1
    return out


def expected_parts(done: EpisodeCompleted) -> tuple[range, range]:
    """Steps whose observation and whose action must exist before this episode is judged.

    A crashed step's observation may never have been taken; an ANSWER is the action
    of the last observed step; a terminal observation (max_steps, blocked, timeout)
    has no action.
    """
    observed = range(done.steps if done.termination == "crashed" else done.steps + 1)
    acted = range(done.steps + 1 if done.termination == "answer" else done.steps)
    return observed, acted


def build_episode(
    done: EpisodeCompleted,
    request: dict[str, Any] | None,
    observations: dict[int, dict[str, Any]],
    actions: dict[int, dict[str, Any]],
) -> Episode:
    request = request or {}
    task = TaskFacts(
        task_id=request.get("task_id", done.task_id),
        task_name=request.get("task_name", ""),
        domain=request.get("domain", ""),
        fact_groups=tuple(FactGroupRef(g["id"], g["description"], tuple(g["facts"]))
                          for g in request.get("fact_groups", [])),
        definite_answer=request.get("definite_answer"),
        environment=request.get("environment"),  # absent in records from before it existed
    )
    steps = []
    for step in sorted(set(observations) | set(actions)):
        obs, act = observations.get(step), actions.get(step)
        fields: dict[str, Any] = {"step": step, "observed": obs is not None}
        if obs is not None:
            fields.update(url=obs["url"], title=obs["title"], page_text=obs["text"],
                          screenshot_uri=obs["screenshot_uri"],
                          screenshot_sha256=obs["screenshot_sha256"],
                          screenshot_format=obs["screenshot_format"])
        if act is not None:
            fields.update(action_string=act["action_string"], action_kind=act["kind"],
                          action_url=act["url"], action_valid=act["valid"],
                          thought=act["thought"], memory_json=act["memory_json"],
                          raw_response=act["raw_response"], prompt_uri=act.get("prompt_uri"),
                          policy_version=act.get("policy_version"))
        steps.append(StepEvidence(**fields))
    return Episode(
        episode_id=done.episode_id, task=task, termination=done.termination, answer=done.answer,
        steps_taken=done.steps, max_steps=request.get("max_steps", done.steps),
        trajectory=tuple(steps), reason=done.reason,
        policy_version=request.get("policy_version", "unknown"), page_reward=done.page_reward,
    )


def trajectory_steps(episode: Episode) -> list[TrajectoryStep]:
    """The trajectory as EpisodeScored carries it, ordered by step."""
    return [
        TrajectoryStep(
            step=s.step, url=s.url, screenshot_uri=s.screenshot_uri,
            screenshot_sha256=s.screenshot_sha256, action_string=s.action_string or "",
            thought=s.thought, memory_json=s.memory_json, raw_response=s.raw_response,
            action_valid=s.action_valid, prompt_uri=s.prompt_uri, policy_version=s.policy_version,
        )
        for s in episode.trajectory
    ]
