"""Evaluator inputs built by hand: a sandbox task's facts, trajectory steps, episodes."""

from __future__ import annotations

from processors.evaluator.trajectory import Episode, FactGroupRef, StepEvidence, TaskFacts

TASK = TaskFacts(
    task_id="shop-001", task_name="What is the price of the Cobalt Pulse 311?",
    domain="sandbox-shop",
    fact_groups=(FactGroupRef(1, "Product page", ("The page shows Cobalt Pulse 311",)),
                 FactGroupRef(2, "Price", ("The price is $335.99", "It costs 335.99 dollars"))),
    definite_answer="$335.99",
)


def step(n: int, sha: str | None = None, action: str | None = "Click [1]", **kw) -> StepEvidence:
    return StepEvidence(step=n, url=f"http://shop.test/{n}", title=f"page {n}",
                        page_text=f"text of page {n}", screenshot_uri=f"s3://b/{sha or n}",
                        screenshot_sha256=sha or f"sha{n}", action_string=action,
                        action_kind=(action or "").split(" ")[0] or None, **kw)


def episode(steps: int = 3, termination: str = "answer", answer: str | None = "$335.99",
            task: TaskFacts = TASK, max_steps: int = 10, trajectory=None) -> Episode:
    traj = trajectory if trajectory is not None else tuple(
        step(i, action=f"ANSWER [{answer}]" if i == steps and answer else
             (None if i == steps else "Click [1]")) for i in range(steps + 1))
    return Episode(episode_id="ep-1", task=task, termination=termination, answer=answer,
                   steps_taken=steps, max_steps=max_steps, trajectory=traj)
