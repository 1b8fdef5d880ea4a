"""Event <-> bytes.

Framing is Avro single-object encoding: 0xC3 0x01, the 8-byte CRC-64-AVRO
fingerprint of the writer schema (little-endian), then the Avro binary body.
The reader finds the writer's schema by fingerprint (current schemas and those
in schemas/archive/) and resolves it against the current one, so an event
written with an older schema decodes into today's class, new fields taking
their defaults. There is no schema registry: the fingerprint is the schema's id.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator
from pathlib import Path

import fastavro

from webgym_common.events import EVENT_TYPES, Event
from webgym_common.schemas import EventSchema, SchemaSet, default_schema_set

SINGLE_OBJECT_MAGIC = b"\xc3\x01"
EXPORT_CODEC = "zstandard"


# No producer of ours can publish more than KafkaSettings.max_request_size (4 MiB by default);
# a bigger record is not one of our events, and passing it on (into a table's changelog, or
# whole into the DLQ) fails the very produce call that should get rid of it.
MAX_EVENT_BYTES = 4 * 1024 * 1024


class DecodeError(ValueError):
    """Bytes that are not an event this codec knows."""


class Codec:
    def __init__(self, schemas: SchemaSet | None = None) -> None:
        self.schemas = schemas or default_schema_set()

    def encode(self, event: Event) -> bytes:
        schema = type(event).schema
        body = io.BytesIO()
        fastavro.schemaless_writer(body, schema.parsed, event.to_avro())
        return SINGLE_OBJECT_MAGIC + schema.fingerprint + body.getvalue()

    # -- reading -------------------------------------------------------------

    def writer_schema(self, data: bytes) -> tuple[EventSchema, int]:
        """The schema the event was written with, and where its body starts."""
        if data.startswith(SINGLE_OBJECT_MAGIC) and len(data) >= 10:
            fp = bytes(data[2:10])
            schema = self.schemas.by_fingerprint.get(fp)
            if schema is None:
                raise DecodeError(f"unknown writer schema fingerprint {fp.hex()}")
            return schema, 10
        raise DecodeError(f"not an Avro event: starts with {bytes(data[:4])!r}")

    def decode(self, data: bytes | None) -> Event:
        if data is None:
            raise DecodeError("empty message (tombstone or null value)")
        if len(data) > MAX_EVENT_BYTES:
            raise DecodeError(f"{len(data)} bytes: larger than any event ({MAX_EVENT_BYTES})")
        writer, offset = self.writer_schema(data)
        reader = self.schemas.current.get(writer.name)
        if reader is None:
            raise DecodeError(f"no current schema for {writer.full_name}")
        try:
            record = fastavro.schemaless_reader(
                io.BytesIO(data[offset:]), writer.parsed, reader.parsed
            )
        except Exception as err:  # fastavro raises many kinds on corrupt bodies
            raise DecodeError(f"{writer.name}: corrupt Avro body: {err}") from None
        try:
            return EVENT_TYPES[writer.name].model_validate(record)
        except Exception as err:
            raise DecodeError(f"{writer.name}: does not validate: {err}") from None


# -- trajectory export files -------------------------------------------------


def write_container(path: Path, events: Iterable[Event], event_type: type[Event]) -> int:
    """Write events to an Avro object container file compressed with zstandard."""
    records = [e.to_avro() for e in events]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as out:
        fastavro.writer(out, event_type.schema.parsed, records, codec=EXPORT_CODEC)
    return len(records)


def read_container(path: Path) -> Iterator[Event]:
    with path.open("rb") as src:
        writer = fastavro.reader(src).writer_schema
        if not isinstance(writer, dict) or writer.get("type") != "record":
            raise DecodeError(f"{path}: not a file of events")
        model = EVENT_TYPES[writer["name"].rsplit(".", 1)[-1]]
        reader_schema = model.schema.parsed
        src.seek(0)
        for record in fastavro.reader(src, reader_schema=reader_schema):
            yield model.model_validate(record)
