"""The metrics process publishes only numbers that differ from what webgym.metrics holds."""

from __future__ import annotations

from processors.metrics import to_publish
from tests.factories import sample_event
from webgym_common.events import RolloutMetrics, utc_now


def metrics(iteration: int, success_rate: float) -> RolloutMetrics:
    m = sample_event("RolloutMetrics").model_copy(update={"iteration": iteration,
                                                          "success_rate": success_rate})
    assert isinstance(m, RolloutMetrics)
    return m


def test_unchanged_numbers_are_not_published_again() -> None:
    table = {1: metrics(1, 0.5), 2: metrics(2, 0.5)}
    same_as_1 = table[1].model_copy(update={"event_id": "another", "produced_at": utc_now()})
    changed_2, new_3 = metrics(2, 0.75), metrics(3, 0.0)
    assert to_publish([same_as_1, changed_2, new_3], table) == [changed_2, new_3]
    assert to_publish([], table) == []
