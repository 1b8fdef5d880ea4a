"""The `.avsc` schemas: every event of the design, each with the envelope."""

from __future__ import annotations

import json

from webgym_common.events import EVENT_TYPES
from webgym_common.schemas import SCHEMA_DIR

REFERENCE_TASK_FIELDS = {
    "task_name", "domain", "subdomain", "website", "difficulty", "evaluator_reference",
    "definite_answer", "reference_answer", "task_id", "attempt_level", "max_steps",
    "benchmark_name",
}
DESIGN_EVENT_TYPES = {
    "Task", "TaskHistory", "EpisodeRequested", "StepObserved", "ActionChosen",
    "EpisodeCompleted", "EpisodeScored", "ReplaySample", "ModelVersion", "IterationStarted",
    "IterationClosed", "CancelEpisode", "RolloutMetrics", "DeadLetter",
}


def test_every_design_event_type_has_a_schema_with_an_envelope() -> None:
    assert DESIGN_EVENT_TYPES <= set(EVENT_TYPES)
    for name in EVENT_TYPES:
        raw = json.loads((SCHEMA_DIR / f"{name}.avsc").read_text())
        fields = [f["name"] for f in raw["fields"]]
        assert fields[:3] == ["event_id", "produced_at", "schema_version"], name


def test_task_schema_carries_every_reference_field() -> None:
    fields = {f["name"] for f in json.loads((SCHEMA_DIR / "Task.avsc").read_text())["fields"]}
    assert REFERENCE_TASK_FIELDS <= fields
