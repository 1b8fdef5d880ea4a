"""Python event classes, derived at import time from schemas/*.avsc.

Each Avro record becomes a pydantic model with the same field names, types and
defaults, so code writes `events.StepObserved(episode_id=..., step=0, ...)` and
gets validation, while the .avsc files stay the only place a shape is written.
`event_id` and `produced_at` fill themselves in.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from webgym_common.schemas import EventSchema, SchemaSet, default_schema_set


class AvroRecord(BaseModel):
    """Base of every derived model."""

    model_config = ConfigDict(extra="forbid", frozen=False)
    avro_name: ClassVar[str] = ""

    def to_avro(self) -> dict[str, Any]:
        return self.model_dump(mode="python")


class Event(AvroRecord):
    """A top-level event: has an id, a timestamp and a schema version."""

    event_id: str
    produced_at: datetime
    schema_version: int
    schema: ClassVar[EventSchema]


def new_event_id() -> str:
    return uuid.uuid4().hex


def utc_now() -> datetime:
    """Now, at the millisecond precision Avro's timestamp-millis keeps."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)


_PRIMITIVES: dict[str, Any] = {
    "string": str,
    "int": int,
    "long": int,
    "float": float,
    "double": float,
    "boolean": bool,
    "bytes": bytes,
    "null": type(None),
}


class _ModelBuilder:
    def __init__(self) -> None:
        self.models: dict[str, type[AvroRecord]] = {}

    def py_type(self, avro: Any) -> Any:
        if isinstance(avro, str):
            if avro in _PRIMITIVES:
                return _PRIMITIVES[avro]
            return self.models[avro.rsplit(".", 1)[-1]]
        if isinstance(avro, list):
            members = [self.py_type(m) for m in avro]
            out = members[0]
            for m in members[1:]:
                out = out | m
            return out
        kind = avro["type"]
        if kind == "record":
            return self.record(avro)
        if kind == "enum":
            return Literal[tuple(avro["symbols"])]
        if kind == "array":
            return list[self.py_type(avro["items"])]
        if kind == "map":
            return dict[str, self.py_type(avro["values"])]
        if avro.get("logicalType") in ("timestamp-millis", "timestamp-micros"):
            return datetime
        return self.py_type(kind)

    def record(self, schema: dict[str, Any], base: type[AvroRecord] = AvroRecord) -> type:
        name = schema["name"].rsplit(".", 1)[-1]
        if name in self.models:
            return self.models[name]
        fields: dict[str, Any] = {}
        for f in schema["fields"]:
            typ = self.py_type(f["type"])
            if f["name"] == "event_id":
                fields[f["name"]] = (str, Field(default_factory=new_event_id))
            elif f["name"] == "produced_at":
                fields[f["name"]] = (datetime, Field(default_factory=utc_now))
            elif "default" in f:
                default = f["default"]
                if isinstance(default, list | dict):
                    fields[f["name"]] = (typ, Field(default_factory=lambda d=default: type(d)(d)))
                else:
                    fields[f["name"]] = (typ, default)
            else:
                fields[f["name"]] = (typ, ...)
        model = create_model(name, __base__=base, __doc__=schema.get("doc"), **fields)
        model.avro_name = schema["name"] if "." in schema["name"] else f"webgym.events.{name}"
        self.models[name] = model
        return model


def build_event_models(schemas: SchemaSet) -> dict[str, type[Event]]:
    builder = _ModelBuilder()
    out: dict[str, type[Event]] = {}
    # Build in dependency order: a schema that embeds another comes after it.
    pending = list(schemas.current.values())
    while pending:
        progress = []
        for s in pending:
            try:
                model = builder.record(s.raw, base=Event)
            except KeyError:
                continue
            model.schema = s
            out[s.name] = model
            progress.append(s)
        if not progress:
            raise RuntimeError(f"cannot order schemas: {[s.name for s in pending]}")
        pending = [s for s in pending if s not in progress]
    return {**builder.models, **out}


MODELS = build_event_models(default_schema_set())
EVENT_TYPES: dict[str, type[Event]] = {
    name: model for name, model in MODELS.items() if name in default_schema_set().current
}

# Named handles for code and type checkers.
Task = MODELS["Task"]
FactGroup = MODELS["FactGroup"]
ReferenceAction = MODELS["ReferenceAction"]
TaskHistory = MODELS["TaskHistory"]
EpisodeRequested = MODELS["EpisodeRequested"]
StepObserved = MODELS["StepObserved"]
Viewport = MODELS["Viewport"]
Mark = MODELS["Mark"]
ActionChosen = MODELS["ActionChosen"]
ParsedAction = MODELS["ParsedAction"]
EpisodeCompleted = MODELS["EpisodeCompleted"]
EpisodeScored = MODELS["EpisodeScored"]
TrajectoryStep = MODELS["TrajectoryStep"]
ReplaySample = MODELS["ReplaySample"]
ChatMessage = MODELS["ChatMessage"]
ModelVersion = MODELS["ModelVersion"]
IterationStarted = MODELS["IterationStarted"]
IterationClosed = MODELS["IterationClosed"]
CancelEpisode = MODELS["CancelEpisode"]
RolloutMetrics = MODELS["RolloutMetrics"]
DeadLetter = MODELS["DeadLetter"]
DomainBlocked = MODELS["DomainBlocked"]
