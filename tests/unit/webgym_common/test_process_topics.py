"""Each row of the process registry reads and writes the topics its code reads and writes
(tests/support/topic_uses.py reads the code), and a row that says otherwise is caught."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tests.support.topic_uses import ROOT, UnclassifiedUse, difference, topic_uses
from webgym_common.processes import PROCESSES, Process, ProcessSpec
from webgym_common.topics import Topic


def row_difference(spec: ProcessSpec, roots: tuple[Path, ...] = (ROOT,)) -> str:
    return difference(spec.name.value, [t.name for t in spec.reads],
                      [t.name for t in spec.writes], topic_uses(spec.entry, roots))


@pytest.mark.parametrize("process", list(Process))
def test_a_rows_topics_are_those_its_code_reads_and_writes(process: Process) -> None:
    spec = PROCESSES[process]
    assert Topic.DLQ not in (*spec.reads, *spec.writes)  # every process may dead-letter
    assert not (diff := row_difference(spec)), f"webgym_common/processes.py:\n{diff}"


def test_a_row_missing_what_its_code_reads_is_named() -> None:
    history = dataclasses.replace(PROCESSES[Process.HISTORY], reads=(Topic.EPISODES_SCORED,),
                                  writes=(Topic.TASK_HISTORY, Topic.METRICS))
    assert row_difference(history).splitlines() == [
        "history: its code reads TASKS, its row does not say so",
        "history: its code reads TASK_HISTORY, its row does not say so",
        "history: its row says it writes METRICS, its code does not",
    ]


def toy(tmp_path: Path, source: str) -> tuple[Path, ...]:
    """A package `toy` with one module, `toy.echo`, beside the project's."""
    (tmp_path / "toy").mkdir()
    (tmp_path / "toy" / "__init__.py").write_text("")
    (tmp_path / "toy" / "echo.py").write_text(source)
    return tmp_path, ROOT


ECHO = '''
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.topics import Topic

SOURCES = [Topic.EPISODES_SCORED]


async def run_echo(settings):
    async with EventProducer(settings) as producer:
        await echo(settings, producer)


async def echo(settings, producer):
    async with EventConsumer(settings, SOURCES, None, producer) as consumer:
        async for received in consumer.events():
            await producer.publish(Topic.METRICS, "key", received.event)


async def never_called(producer):
    await producer.publish(Topic.REPLAY, "key", None)
'''


def test_a_toy_process_is_read_through_its_names(tmp_path: Path) -> None:
    roots = toy(tmp_path, ECHO)
    uses = topic_uses("toy.echo:run_echo", roots)
    assert (uses.reads, uses.writes) == ({"EPISODES_SCORED"}, {"METRICS"})  # not REPLAY
    row = ProcessSpec(Process.METRICS, "toy.echo:run_echo", "echoes", None,
                      (Topic.EPISODES_SCORED,), ())
    assert row_difference(row, roots) == (
        "metrics: its code writes METRICS, its row does not say so")


def test_a_faust_topic_sent_on_is_written(tmp_path: Path) -> None:
    roots = toy(tmp_path, '''
from webgym_common.stream.faust_app import faust_topic
from webgym_common.topics import Topic


class Out:
    def __init__(self, app, kafka):
        self.out = faust_topic(app, kafka, Topic.ACTIONS)
        self.inbox = faust_topic(app, kafka, Topic.OBSERVATIONS)

    async def put(self, value):
        await self.out.send(value=value)


def build(app, kafka):
    return Out(app, kafka)
''')
    uses = topic_uses("toy.echo:build", roots)
    assert (uses.reads, uses.writes) == ({"OBSERVATIONS"}, {"ACTIONS"})


def test_a_topic_where_the_table_says_nothing_is_an_error_naming_the_line(
    tmp_path: Path,
) -> None:
    roots = toy(tmp_path, '''
from webgym_common.topics import Topic


def run(settings, reader):
    return reader.follow(settings, Topic.TASKS)
''')
    with pytest.raises(UnclassifiedUse, match=r"toy/echo.py:6: a topic passed to follow\(\)"):
        topic_uses("toy.echo:run", roots)
