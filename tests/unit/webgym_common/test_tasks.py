"""WebGym's task-file variants load unchanged (webgym_common.tasks)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from webgym_common.choices import Split
from webgym_common.events import Task
from webgym_common.tasks import (
    TaskLineError,
    fact_groups,
    parse_task_line,
    read_task_file,
    step_limit,
)

BASE = {"task_name": "Find the opening hours", "domain": "travel", "subdomain": "museums",
        "website": "www.example-museum.org", "difficulty": 4, "split": "train"}


def line(**fields: object) -> str:
    return json.dumps({**BASE, **fields})


def test_an_integer_task_id_becomes_a_string_and_an_absent_one_a_stable_digest() -> None:
    assert parse_task_line(line(task_id=17)).task_id == "17"
    derived = parse_task_line(line()).task_id
    assert derived.startswith("t-") and len(derived) == 18
    assert parse_task_line(line(task_id=None)).task_id == derived  # null is absent
    # The same task (even with other optional fields) gets the same id on a resumed run...
    assert parse_task_line(line(attempt_level=3, definite_answer=None)).task_id == derived
    # A website written with its scheme is the same task (as the repeats check sees it).
    assert parse_task_line(line(website="https://www.example-museum.org")).task_id == derived
    # ... another task another one.
    assert parse_task_line(line(difficulty=5)).task_id != derived
    with pytest.raises(TaskLineError, match="must not be empty"):
        parse_task_line(line(task_id="  "))


def test_a_website_without_a_scheme_gets_https_and_ours_stay_as_they_are() -> None:
    assert parse_task_line(line(task_id=1)).website == "https://www.example-museum.org"
    for url in ("http://plain.example/", "https://x.example/a", "{sandbox}/shop/"):
        assert parse_task_line(line(task_id=1, website=url)).website == url


def test_every_evaluator_reference_shape_becomes_fact_groups() -> None:
    groups = [{"id": 3, "description": "Hours", "facts": ["9 to 5", "9am-5pm"]}]
    assert fact_groups("Opens at 9") == [{"id": 1, "description": "", "facts": ["Opens at 9"]}]
    assert fact_groups(["a", "b"]) == [{"id": 1, "description": "", "facts": ["a"]},
                                       {"id": 2, "description": "", "facts": ["b"]}]
    assert fact_groups([{"description": "Shows the hours", "difficulty": 2}]) == [
        {"id": 1, "description": "Shows the hours", "facts": ["Shows the hours"]}]
    assert fact_groups(groups) == groups
    assert fact_groups(None) == [] and fact_groups("  ") == []
    task = parse_task_line(line(task_id=1, evaluator_reference=["a", {"description": "d"}]))
    assert [(g.id, g.description, g.facts) for g in task.evaluator_reference] == [
        (1, "", ["a"]), (2, "d", ["d"])]
    for bad in (42, [1], [{"difficulty": 2}], {"facts": ["x"]}):
        with pytest.raises(TaskLineError, match="evaluator_reference"):
            parse_task_line(line(task_id=1, evaluator_reference=bad))


def test_optional_webgym_fields_load_and_unknown_ones_are_kept() -> None:
    task = parse_task_line(line(task_id=1, definite_answer=None, attempt_level=2,
                                _trajectory_index=7, reference_answer="9 to 5"))
    assert (task.definite_answer, task.attempt_level, task.reference_answer) == (
        None, 2, "9 to 5")
    assert json.loads(task.extra_json or "{}") == {"_trajectory_index": 7}


def test_repeats_of_a_task_are_reported_with_the_line_they_repeat(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join([
        line(task_id=1), line(task_id=2, difficulty=5),
        line(task_id=3),  # the same (subdomain, website, difficulty, task_name) as line 1
        line(task_id=4, subdomain="galleries"), "{broken",
    ]) + "\n")
    progress: list[tuple[int, int]] = []
    tasks, bad = read_task_file(path, on_lines=lambda n, b: progress.append((n, b)))
    assert [t.task_id for t in tasks] == ["1", "2", "4"]
    assert [(b.line_number, b.reason[:17]) for b in bad] == [
        (3, "a repeat of line "), (5, "not JSON: Expecti")]
    assert "line 1" in bad[0].reason
    assert progress[-1] == (5, path.stat().st_size)


def test_a_line_without_a_split_is_refused_naming_its_line_unless_the_file_gives_one(
        tmp_path: Path) -> None:
    path = tmp_path / "webgym_test.jsonl"
    path.write_text("\n".join([
        line(task_id=1, split=None), json.dumps({k: v for k, v in BASE.items() if k != "split"}
                                                | {"task_id": 2, "difficulty": 5}),
        line(task_id=3, difficulty=6, split="test"), line(task_id=4, difficulty=7),
    ]) + "\n")
    tasks, bad = read_task_file(path)
    assert [(t.task_id, t.split) for t in tasks] == [("3", "test"), ("4", "train")]
    assert [b.line_number for b in bad] == [1, 2]
    assert bad[0].reason.startswith("no split: give the line a \"split\" (train, test, ood, "
                                    "validation) or the file one")
    tasks, bad = read_task_file(path, split=Split.TEST)
    assert [(t.task_id, t.split) for t in tasks] == [("1", "test"), ("2", "test"), ("3", "test")]
    assert [(b.line_number, b.reason) for b in bad] == [
        (4, "split 'train' in a file loaded as 'test'")]


def test_the_step_limit_is_the_tasks_own_else_the_bands_and_at_most_the_cap() -> None:
    hard = Task(task_id="t", task_name="n", domain="d", website="w", difficulty=8)
    assert (step_limit(hard, "train"), step_limit(hard, "test")) == (30, 70)
    assert step_limit(hard, "test", cap=8) == 8
    own = hard.model_copy(update={"max_steps": 5})
    assert (step_limit(own, "test"), step_limit(own, "train", cap=8)) == (5, 5)
