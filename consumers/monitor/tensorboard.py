"""The metrics for the loggers the field already uses: TensorBoard and Weights & Biases.

`scalars(event)` says which scalars an event is (pure); each sink writes a (tag, step)
once per value. The monitor reads the log from its beginning at each start, so the
TensorBoard sink starts from an empty directory (its own event files removed) and
rewrites them: the files are derived from the log, like metrics.csv. W&B runs are
append-only, so each monitor start is a new run (offline by default: `wandb sync` uploads).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from webgym_common.choices import WandbMode
from webgym_common.events import EvaluationResult, Event, RolloutMetrics, TrainingProgress
from webgym_common.metrics.fold import DEMONSTRATION_COLUMNS, METRICS, column

Scalar = tuple[str, float, int]  # tag, value, step
FAMILIES = ("rollout", "eval", "train")  # a tag's first part; W&B steps each on its own axis


class Sink(Protocol):
    def write(self, event: Event) -> int: ...

    def close(self) -> None: ...


class Sinks:
    """Every configured sink, written in turn (none configured: writes nothing)."""

    def __init__(self, sinks: list[Sink]) -> None:
        self.sinks = sinks

    def write(self, event: Event) -> int:
        return sum(s.write(event) for s in self.sinks)

    def close(self) -> None:
        for s in self.sinks:
            s.close()


def scalars(event: Event) -> list[Scalar]:
    """The scalars one event carries (none for most events)."""
    if isinstance(event, RolloutMetrics):
        # success_rate and the other rates are the policy's own; the demonstrations' success
        # is a tag apart, and only where there were demonstrations (else there is no rate).
        names = [*METRICS, "episodes", *DEMONSTRATION_COLUMNS]
        if not event.demonstrations:
            names.remove("demonstration_success_rate")
        return [(f"rollout/{event.split}/{name}", float(column(event, name)), event.iteration)
                for name in names]
    if isinstance(event, EvaluationResult):
        prefix = f"eval/{event.model_name}/{event.suite}/{event.split}"
        if event.version < 0:  # the scripted baseline: no version, one level
            return [(f"{prefix}/baseline_success_rate", event.success_rate, 0)]
        return [(f"{prefix}/success_rate", event.success_rate, event.version)]
    if isinstance(event, TrainingProgress) and event.loss is not None:
        return [(f"train/v{event.version}/loss", event.loss, event.step)]
    return []


class ScalarSink:
    """Writes each (tag, step) once per value: compacted topics and restarts bring the same
    numbers again. Subclasses say how one scalar is written (`emit`)."""

    def __init__(self) -> None:
        self.written: dict[tuple[str, int], float] = {}

    def write(self, event: Event) -> int:
        fresh = [(t, v, s) for t, v, s in scalars(event) if self.written.get((t, s)) != v]
        for tag, value, step in fresh:
            self.written[(tag, step)] = value
            self.emit(tag, value, step)
        return len(fresh)

    def emit(self, tag: str, value: float, step: int) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


class TensorBoardSink(ScalarSink):
    """Event files under `directory` (its old event files removed: rewritten from the log)."""

    def __init__(self, directory: Path) -> None:
        from tensorboardX import SummaryWriter  # imported here: only a monitor that writes

        super().__init__()
        directory.mkdir(parents=True, exist_ok=True)
        for old in directory.glob("events.out.tfevents.*"):
            old.unlink()
        self.writer = SummaryWriter(str(directory), flush_secs=5)

    def emit(self, tag: str, value: float, step: int) -> None:
        self.writer.add_scalar(tag, value, step)

    def close(self) -> None:
        self.writer.close()


class WandbSink(ScalarSink):
    """Writes scalars to a Weights & Biases run (`mode` offline: files under `directory`,
    nothing leaves the machine). Each family steps on its own axis (`<family>_step`:
    iteration, model version, training step), as W&B wants one increasing step per axis."""

    def __init__(self, project: str, mode: WandbMode, directory: Path, name: str) -> None:
        import wandb  # imported here: only a monitor configured for W&B needs it

        super().__init__()
        directory.mkdir(parents=True, exist_ok=True)
        self.run: Any = wandb.init(project=project, dir=str(directory), name=name,
                                   mode="online" if mode == WandbMode.ONLINE else "offline",
                                   settings=wandb.Settings(silent=True))
        for family in FAMILIES:
            self.run.define_metric(f"{family}_step")
            self.run.define_metric(f"{family}/*", step_metric=f"{family}_step")

    def emit(self, tag: str, value: float, step: int) -> None:
        self.run.log({tag: value, f"{tag.split('/', 1)[0]}_step": step})

    def close(self) -> None:
        import wandb

        self.run.finish()
        # finish() returns once the service acknowledged the exit, which can be before its
        # writer closed the run file (CI read a header-only file under load); teardown waits
        # for the service process itself to end.
        wandb.teardown()
