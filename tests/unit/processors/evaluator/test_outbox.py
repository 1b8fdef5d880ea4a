"""The evaluator's outbox (outbox.py): table changes as changelog records."""

from __future__ import annotations

from processors.evaluator.outbox import Outbox, Record, oversize


def test_table_changes_become_changelog_records_on_the_events_partition() -> None:
    class Table:
        class changelog_topic:  # noqa: N801 (stands in for faust's topic object)
            @staticmethod
            def get_topic_name() -> str:
                return "p-evaluator-scored-changelog"

    class Event:
        class message:  # noqa: N801
            partition = 3

    put, delete = Outbox._changelog(Event, [(Table, "ep-1", 1700), (Table, "ep-2", None)])
    assert put == ("p-evaluator-scored-changelog", b'"ep-1"', b"1700", 3)
    assert delete == ("p-evaluator-scored-changelog", b'"ep-2"', None, 3)  # a tombstone


def test_a_record_over_the_producers_limit_is_named_before_anything_is_sent() -> None:
    small = Record("p.scored", b"task", b"x" * 100)
    tombstone = Record("p-evaluator-actions-changelog", b'"ep-1"', None)
    huge = Record("p-evaluator-actions-changelog", b'"ep-1/3"', b"y" * 5000)
    assert oversize([small, tombstone], limit=1000) is None
    why = oversize([small, huge], limit=1000)
    assert why is not None and "p-evaluator-actions-changelog" in why and "5008-byte" in why
