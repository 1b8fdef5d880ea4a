"""Which episodes ended, per partition, and how far back the completions log was read."""

from __future__ import annotations

from producers.browser.finished import FinishedEpisodes


def test_the_first_record_of_a_partition_asks_for_a_read_from_before_its_time() -> None:
    finished = FinishedEpisodes()
    assert finished.read_from(3, record_ms=100_000, margin_ms=10_000) == 90_000
    finished.was_read(3, 90_000, ["a", "b"])
    assert set(finished.of(3)) == {"a", "b"} and not finished.of(2)


def test_later_records_need_no_new_read_older_ones_need_one_further_back() -> None:
    finished = FinishedEpisodes()
    finished.was_read(0, 90_000, [])
    assert finished.read_from(0, record_ms=100_000, margin_ms=10_000) is None
    assert finished.read_from(0, record_ms=500_000, margin_ms=10_000) is None
    # An actions record older than the first request read: read further back.
    assert finished.read_from(0, record_ms=50_000, margin_ms=10_000) == 40_000
    finished.was_read(0, 40_000, ["old"])
    assert finished.read_from(0, record_ms=90_000, margin_ms=10_000) is None
    assert "old" in finished.of(0)


def test_own_completions_are_added_and_a_moved_partition_is_forgotten() -> None:
    finished = FinishedEpisodes()
    finished.was_read(1, 0, ["a"])
    finished.add(1, ["b"])
    finished.add(2, ["c"])
    finished.forget([1])
    assert not finished.of(1)
    # Owned again: read again from the log (another owner may have ended episodes meanwhile).
    assert finished.read_from(1, record_ms=100, margin_ms=0) == 100
    assert list(finished.of(2)) == ["c"]


def test_the_oldest_are_forgotten_beyond_the_limit() -> None:
    finished = FinishedEpisodes(limit=2)
    finished.add(0, ["a", "b", "c"])
    assert list(finished.of(0)) == ["b", "c"]
