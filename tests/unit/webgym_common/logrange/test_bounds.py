"""Range selection for `webgym reprocess`: bounds, iteration lists, one partition's span."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from webgym_common.logrange.bounds import (
    Bound,
    LogRange,
    RangeError,
    parse_bound,
    parse_iterations,
    span,
)


def test_a_bound_is_an_offset_or_an_iso_time_utc_unless_zoned() -> None:
    assert parse_bound("1200") == Bound(offset=1200)
    assert parse_bound(None) is None and parse_bound(" ") is None
    utc = int(datetime(2026, 11, 24, 2, 0, tzinfo=UTC).timestamp() * 1000)
    assert parse_bound("2026-11-24T02:00") == Bound(time_ms=utc)
    assert parse_bound("2026-11-24T02:00:00Z") == Bound(time_ms=utc)
    assert parse_bound("2026-11-24T03:00:00+01:00") == Bound(time_ms=utc)
    with pytest.raises(RangeError):
        parse_bound("yesterday")


def test_iterations_are_numbers_and_ranges() -> None:
    assert parse_iterations("3") == {3}
    assert parse_iterations("0,2-4") == {0, 2, 3, 4}
    assert parse_iterations("") is None
    assert LogRange(iterations=frozenset({1})).wants(1)
    assert not LogRange(iterations=frozenset({1})).wants(2) and LogRange().wants(7)
    for bad in ("x", "4-2", "1-"):
        with pytest.raises(RangeError):
            parse_iterations(bad)


def test_a_span_is_clamped_to_the_log_and_never_inverted() -> None:
    assert span(None, None, 5, 100) == (5, 100)
    assert span(Bound(offset=10), Bound(offset=20), 0, 100) == (10, 20)
    assert span(Bound(offset=0), Bound(offset=500), 30, 100) == (30, 100)  # retention ate 0-29
    assert span(Bound(offset=90), Bound(offset=20), 0, 100) == (90, 90)
    # time bounds: the broker's offset for the time; None = every record is older (the end)
    assert span(Bound(time_ms=1), Bound(time_ms=2), 0, 100, 40, 60) == (40, 60)
    assert span(Bound(time_ms=1), Bound(time_ms=2), 0, 100, 40, None) == (40, 100)
    assert span(Bound(time_ms=1), None, 0, 100, None) == (100, 100)
