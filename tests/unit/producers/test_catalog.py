"""The catalog loader: bad lines are reported by number and skipped, good ones all load."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from pathlib import Path

from rich.console import Console
from rich.progress import Progress

from producers.catalog import (
    MAX_REPORTED,
    LoadReport,
    load_tasks,
    print_load_report,
    publish_tasks,
)
from webgym_common.events import Event, Task
from webgym_common.tasks import parse_task_lines
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


# -- streaming: the file is never held whole ---------------------------------------------


class WatchingProducer(FakeProducer):
    """Notes, at each publish, how far the stream of lines had been read."""

    def __init__(self, read_so_far: Callable[[], int]) -> None:
        super().__init__()
        self.read_so_far = read_so_far
        self.read_at_publish: list[int] = []

    async def publish(self, topic: Topic, key: str, event: Event) -> None:
        self.read_at_publish.append(self.read_so_far())
        await super().publish(topic, key, event)


async def test_lines_are_taken_from_a_generator_only_as_batches_are_published() -> None:
    taken = 0

    def lines() -> Iterator[tuple[int, str]]:
        nonlocal taken
        for i in range(1, 10_001):
            taken = i
            yield i, good_line(i) if i % 10 else "not json"

    producer = WatchingProducer(lambda: taken)
    report = LoadReport(Path("stream.jsonl"))
    await publish_tasks(parse_task_lines(lines()), producer, report, batch_size=100)
    # When the first task went out, at most two batches (the one published and the next
    # one being parsed) had been read: 2 x 100 tasks and their bad lines, of 10,000 lines.
    assert producer.read_at_publish[0] <= 2 * 100 * 10 // 9 + 2
    assert taken == 10_000 and producer.read_at_publish[-1] >= 9_999  # (10,000 is bad)
    assert report.loaded == len(producer.sent) == 9_000
    assert report.bad_lines == 1_000 and [b.line_number for b in report.bad[:2]] == [10, 20]


async def test_a_file_is_published_while_it_is_still_being_read(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(good_line(i) + "\n" for i in range(20_000)))
    size = path.stat().st_size
    with Progress(console=Console(record=True)) as progress:
        def read_so_far() -> int:
            return int(next(t for t in progress.tasks
                            if t.description.startswith("reading")).completed)

        producer = WatchingProducer(read_so_far)
        report = await load_tasks(path, producer, progress)
    assert producer.read_at_publish[0] < size // 4  # not read whole before publishing
    assert producer.read_at_publish[-1] == size
    assert report.loaded == 20_000 and report.lines == 20_000


async def test_a_repeated_id_in_a_later_batch_is_published_again_after_the_first(
        tmp_path: Path) -> None:
    first = json.loads(good_line(1))
    lines = [json.dumps(first), good_line(2), good_line(3),
             json.dumps({**first, "task_name": "the newer wording"})]
    producer = FakeProducer()
    report = LoadReport(tmp_path)
    await publish_tasks(parse_task_lines(enumerate(lines, 1)), producer, report, batch_size=2)
    keys = [key for _, key, _ in producer.sent]
    assert keys.count("task-1") == 2 and keys.index("task-1") < len(keys) - 1
    last = [t for _, k, t in producer.sent if k == "task-1"][-1]
    assert isinstance(last, Task) and last.task_name == "the newer wording"  # last line wins
    assert report.loaded == 3 and report.duplicates == ["task-1"] and report.repeated == 1


async def test_the_report_lists_the_first_bad_lines_and_counts_the_rest(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(f"bad {i}\n" for i in range(MAX_REPORTED + 500)) + good_line(1))
    report = await load_tasks(path, FakeProducer())
    assert len(report.bad) == MAX_REPORTED and report.bad_lines == MAX_REPORTED + 500
    console = Console(record=True, width=200)
    print_load_report(report, "webgym.tasks", console)
    text = console.export_text()
    assert "... and 500 more bad lines" in text
    assert f"loaded 1 tasks into webgym.tasks; skipped {MAX_REPORTED + 500} bad lines" in text
