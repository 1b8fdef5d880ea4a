"""Helpers to write sandbox tasks and their reference action sequences compactly."""

from __future__ import annotations

from typing import Any

Action = dict[str, Any]

BENCHMARK = "webgym-sandbox"


def click(role: str, name: str, nth: int | None = None) -> Action:
    step: Action = {"action": "Click", "role": role, "name": name}
    if nth is not None:
        step["nth"] = nth
    return step


def link(name: str) -> Action:
    return click("link", name)


def button(name: str) -> Action:
    return click("button", name)


def type_(role: str, name: str, text: str) -> Action:
    """Clear the field, type, press Enter (WebGym's Type semantics)."""
    return {"action": "Type", "role": role, "name": name, "text": text}


def field(name: str, text: str) -> Action:
    return type_("textbox", name, text)


def number(name: str, text: str) -> Action:
    return type_("spinbutton", name, text)


def go_back() -> Action:
    return {"action": "GoBack"}


def scroll_down() -> Action:
    return {"action": "Scroll", "direction": "down"}


def wait() -> Action:
    return {"action": "Wait"}


def answer(text: str) -> Action:
    return {"action": "ANSWER", "text": text}


def max_steps(difficulty: int) -> int:
    """WebGym's training step limits: 10 / 20 / 30 for easy / medium / hard."""
    return 10 if difficulty <= 3 else 20 if difficulty <= 6 else 30


def task(
    task_id: str,
    instruction: str,
    *,
    site: str,
    subdomain: str,
    path: str,
    difficulty: int,
    facts: list[tuple[str, list[str]]],
    actions: list[Action],
    definite: bool = True,
    reference_answer: str | None = None,
    template: str | None = None,
    entities: list[str] | None = None,
) -> dict[str, Any]:
    """One JSONL record. The final ANSWER doubles as the definite answer unless told not to.

    A hand-written task names its `template` (its kind of question) and its `entities` (what
    its answer and steps depend on, in the generators' format): build_tasks decides its split
    from them (generators/splits.py)."""
    final = actions[-1]
    assert final["action"] == "ANSWER", task_id
    record: dict[str, Any] = {
        "task_id": task_id,
        "task_name": instruction,
        "domain": f"sandbox-{site}",
        "subdomain": subdomain,
        "website": "{sandbox}" + path,
        "difficulty": difficulty,
        "evaluator_reference": [
            {"id": i, "description": d, "facts": f} for i, (d, f) in enumerate(facts, start=1)
        ],
        "attempt_level": 0,
        "max_steps": max_steps(difficulty),
        "benchmark_name": BENCHMARK,
        "reference_actions": actions,
    }
    if definite:
        record["definite_answer"] = final["text"]
    if reference_answer:
        record["reference_answer"] = reference_answer
    if template is not None:
        record["template"] = template
    if entities is not None:
        record["entities"] = entities
    return record
