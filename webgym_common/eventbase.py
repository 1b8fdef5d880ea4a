"""The hand-written base of the generated event classes in webgym_common/events/.

The events package is generated from schemas/*.avsc by `python -m devtools.codegen`;
what every event shares (the base classes and the id/timestamp factories) lives
here so the generated modules hold only shapes.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from webgym_common.schemas import EventSchema


class AvroRecord(BaseModel):
    """Base of every generated class: one Avro record, field for field."""

    model_config = ConfigDict(extra="forbid", frozen=False)
    avro_name: ClassVar[str] = ""

    def to_avro(self) -> dict[str, Any]:
        return self.model_dump(mode="python")


class Event(AvroRecord):
    """A top-level event: has an id, a timestamp and a schema version."""

    event_id: str
    produced_at: datetime
    schema_version: int
    # Bound by the events package once the class exists: the schema it is written with. The name
    # shadows pydantic's deprecated `BaseModel.schema()`, which nothing here calls.
    schema: ClassVar[EventSchema]  # type: ignore[assignment]


def new_event_id() -> str:
    return uuid.uuid4().hex


def utc_now() -> datetime:
    """Now, at the millisecond precision Avro's timestamp-millis keeps."""
    now = datetime.now(UTC)
    return now.replace(microsecond=now.microsecond // 1000 * 1000)
