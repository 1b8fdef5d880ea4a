"""The catalog loader: bad lines are reported by number and skipped, good ones all load."""

from __future__ import annotations

import json
import random
from pathlib import Path

from rich.console import Console
from rich.progress import Progress

from producers.catalog import load_tasks, print_load_report
from webgym_common.events import Event, Task
from webgym_common.topics import Topic


class FakeProducer:
    """Collects what would be published (the broker path is in the integration test)."""

    def __init__(self) -> None:
        self.sent: list[tuple[Topic, str, Event]] = []

    async def publish(self, topic: Topic, key: str, event: Event) -> None:
        self.sent.append((topic, key, event))


def good_line(i: int) -> str:
    return json.dumps({
        "task_id": f"task-{i}", "task_name": f"Find fact number {i}", "domain": "example.org",
        "website": f"https://example.org/{i}", "difficulty": 1 + i % 9,
        "evaluator_reference": [{"id": 1, "description": "fact", "facts": [f"it is {i}"]}],
        "max_steps": 10, "benchmark_name": "unit", "split": "train",
        "source_row": i,  # unknown field: kept
    })


BAD_KINDS = [
    lambda i: f'{{"task_id": "broken-{i}", "task_name": ',  # truncated JSON
    lambda i: f"not json at all [{i}]",
    lambda i: json.dumps([f"task-{i}"]),  # JSON, but not an object
    lambda i: json.dumps({"task_id": f"bad-{i}", "task_name": "no domain or website",
                          "difficulty": 1}),
    lambda i: json.dumps({"task_id": f"bad-{i}", "task_name": "x", "domain": "d",
                          "website": "w", "difficulty": "hard"}),  # wrong type
    lambda i: json.dumps({"task_id": " ", "task_name": "x", "domain": "d", "website": "w",
                          "difficulty": 2}),  # empty id
    lambda i: json.dumps({"task_id": f"bad-{i}", "task_name": "x", "domain": "d", "website": "w",
                          "difficulty": 2, "evaluator_reference": [{"id": "one"}]}),
]


async def test_200_bad_lines_are_reported_by_number_and_every_good_line_loads(
    tmp_path: Path,
) -> None:
    rng = random.Random(7)
    kinds = ["good"] * 300 + ["bad"] * 200 + ["blank"] * 20
    rng.shuffle(kinds)
    lines, bad_numbers, good_ids = [], [], []
    for number, kind in enumerate(kinds, 1):
        if kind == "good":
            lines.append(good_line(number))
            good_ids.append(f"task-{number}")
        elif kind == "bad":
            lines.append(rng.choice(BAD_KINDS)(number))
            bad_numbers.append(number)
        else:
            lines.append("   ")  # blank lines are neither tasks nor errors
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(lines) + "\n")

    producer = FakeProducer()
    shown = Console(record=True, width=200)
    with Progress(console=shown) as progress:
        report = await load_tasks(path, producer, progress)
    bars = {t.description.split(":")[0]: t for t in progress.tasks}
    assert bars["reading"].completed == path.stat().st_size
    assert bars["publishing"].completed == bars["publishing"].total == 300
    assert report.lines == len(kinds) and report.lines_per_s > 0

    assert [b.line_number for b in report.bad] == bad_numbers
    assert len(report.bad) == 200 and all(b.reason for b in report.bad)
    assert sorted(key for _, key, _ in producer.sent) == sorted(good_ids)
    for topic, key, task in producer.sent:
        assert topic == Topic.TASKS and isinstance(task, Task) and task.task_id == key
        assert json.loads(task.extra_json)["source_row"] == int(key.split("-")[1])

    console = Console(record=True, width=200)
    print_load_report(report, "webgym.tasks", console)
    text = console.export_text()
    for number in bad_numbers:
        assert f"{path}:{number}: skipped:" in text
    assert "loaded 300 tasks into webgym.tasks; skipped 200 bad lines" in text
    assert f"{len(kinds)} lines in " in text and "lines/s)" in text


async def test_a_repeated_task_id_loads_once_with_its_last_line(tmp_path: Path) -> None:
    first = json.loads(good_line(1))
    last = {**first, "task_name": "the newer wording"}
    path = tmp_path / "tasks.jsonl"
    path.write_text(f"{json.dumps(first)}\n{good_line(2)}\n{json.dumps(last)}\n")
    producer = FakeProducer()
    report = await load_tasks(path, producer)
    assert report.duplicates == ["task-1"] and not report.bad
    by_key = {key: task for _, key, task in producer.sent}
    assert len(producer.sent) == 2 and by_key["task-1"].task_name == "the newer wording"
