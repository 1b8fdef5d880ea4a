"""The metrics as TensorBoard event files (tensorboardX), the logger the field already uses.

`scalars(event)` says which scalars an event is (pure); `TensorBoardSink` writes each
(tag, step) once per value. The monitor reads the log from its beginning at each start,
so the sink starts from an empty directory (its own event files removed) and rewrites
them: the files are derived from the log, like metrics.csv.
"""

from __future__ import annotations

from pathlib import Path

from webgym_common.events import EvaluationResult, Event, RolloutMetrics, TrainingProgress
from webgym_common.metrics import METRICS

Scalar = tuple[str, float, int]  # tag, value, step


def scalars(event: Event) -> list[Scalar]:
    """The scalars one event carries (none for most events)."""
    if isinstance(event, RolloutMetrics):
        return [(f"rollout/{event.split}/{name}", float(getattr(event, name)), event.iteration)
                for name in (*METRICS, "episodes")]
    if isinstance(event, EvaluationResult):
        return [(f"eval/{event.model_name}/{event.suite}/{event.split}/success_rate",
                 event.success_rate, event.version)]
    if isinstance(event, TrainingProgress) and event.loss is not None:
        return [(f"train/v{event.version}/loss", event.loss, event.step)]
    return []


class TensorBoardSink:
    """Writes scalars under `directory`; a (tag, step) already written with the same value
    is skipped (compacted topics and restarts bring the same numbers again)."""

    def __init__(self, directory: Path) -> None:
        from tensorboardX import SummaryWriter  # imported here: only a monitor that writes

        directory.mkdir(parents=True, exist_ok=True)
        for old in directory.glob("events.out.tfevents.*"):
            old.unlink()
        self.writer = SummaryWriter(str(directory), flush_secs=5)
        self.written: dict[tuple[str, int], float] = {}

    def write(self, event: Event) -> int:
        n = 0
        for tag, value, step in scalars(event):
            if self.written.get((tag, step)) != value:
                self.written[(tag, step)] = value
                self.writer.add_scalar(tag, value, step)
                n += 1
        return n

    def close(self) -> None:
        self.writer.close()
