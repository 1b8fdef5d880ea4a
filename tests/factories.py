"""Sample events built from the schemas themselves, so every field of every type is exercised."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

from webgym_common.events import EVENT_TYPES, Event

_counter = itertools.count(1)


def sample_value(avro: Any, named: dict[str, Any]) -> Any:
    """A non-default value for an Avro type (nulls become the other branch)."""
    n = next(_counter)
    if isinstance(avro, list):
        non_null = [t for t in avro if t != "null"]
        return sample_value(non_null[0], named) if non_null else None
    if isinstance(avro, str):
        return {
            "string": f"s{n}",
            "int": n,
            "long": 10_000_000_000 + n,
            "float": n + 0.5,
            "double": n + 0.25,
            "boolean": n % 2 == 0,
            "bytes": bytes([n % 256, 0, 255]),
        }.get(avro) if avro in (
            "string", "int", "long", "float", "double", "boolean", "bytes"
        ) else sample_value(named[avro], named)
    kind = avro["type"]
    if avro.get("logicalType") == "timestamp-millis":
        return datetime(2026, 1, 2, 3, 4, 5, (n % 1000) * 1000, tzinfo=UTC)
    if kind == "record":
        named[avro["name"]] = avro
        named[avro["name"].rsplit(".", 1)[-1]] = avro
        return {f["name"]: sample_value(f["type"], named) for f in avro["fields"]}
    if kind == "enum":
        named[avro["name"]] = avro
        return avro["symbols"][n % len(avro["symbols"])]
    if kind == "array":
        return [sample_value(avro["items"], named) for _ in range(2)]
    if kind == "map":
        return {f"k{n}": sample_value(avro["values"], named)}
    return sample_value(kind, named)


def sample_event(name: str) -> Event:
    model = EVENT_TYPES[name]
    record = sample_value(model.schema.raw, {})
    return model.model_validate(record)


def all_sample_events() -> list[Event]:
    return [sample_event(name) for name in sorted(EVENT_TYPES)]
