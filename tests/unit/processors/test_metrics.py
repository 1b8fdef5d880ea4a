"""The metrics process's state: closed iterations are reported once, and again when late
episodes change their numbers."""

from __future__ import annotations

from processors.metrics import MetricsState
from tests.factories import sample_event
from tests.unit.scored import scored
from webgym_common.bus import Received
from webgym_common.events import Event, IterationClosed
from webgym_common.metrics import same_numbers


def received(event: Event) -> Received:
    return Received("t", 0, 0, "k", event, 0)


def test_state_reports_closed_iterations_once_and_again_on_late_episodes() -> None:
    state = MetricsState()
    close = sample_event("IterationClosed").model_copy(update={"iteration": 3, "split": "train"})
    assert isinstance(close, IterationClosed)
    state.fold([received(scored("a", reward=1.0)), received(scored("z", iteration=4))])
    assert state.take_ready() == []  # nothing closed yet
    state.fold([received(close), received(scored("a"))])
    (m,) = state.take_ready()
    assert (m.iteration, m.episodes, m.success_rate) == (3, 1, 1.0)
    assert state.take_ready() == []
    state.fold([received(scored("late", reward=0.0))])
    (m2,) = state.take_ready()
    assert m2.episodes == 2 and not same_numbers(m2, m)
    assert same_numbers(m2, m2.model_copy(update={"event_id": "other"}))
