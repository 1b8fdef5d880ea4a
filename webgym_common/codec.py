"""Event <-> bytes.

Default framing is Avro single-object encoding (0xC3 0x01, 8-byte CRC-64-AVRO
fingerprint of the writer schema, Avro binary body). With a schema registry
configured, the Confluent wire format (0x00, 4-byte schema id, body) is written
instead; both framings are always readable. The reader resolves the writer's
schema (found by fingerprint or id) against the current one, so an event written
with an older schema decodes into today's model, new fields taking defaults.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Iterable, Iterator
from pathlib import Path

import fastavro
import httpx

from webgym_common.events import EVENT_TYPES, Event
from webgym_common.schemas import EventSchema, SchemaSet, build_schema, default_schema_set

SINGLE_OBJECT_MAGIC = b"\xc3\x01"
CONFLUENT_MAGIC = b"\x00"
EXPORT_CODEC = "zstandard"


class DecodeError(ValueError):
    """Bytes that are not an event this codec knows."""


class SchemaRegistry:
    """Minimal async client for the Confluent schema-registry REST API (Redpanda has one)."""

    def __init__(self, url: str, timeout_s: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.id_by_fingerprint: dict[bytes, int] = {}
        self.schema_by_id: dict[int, EventSchema] = {}

    async def register(self, subject: str, schema: EventSchema) -> int:
        if schema.fingerprint in self.id_by_fingerprint:
            return self.id_by_fingerprint[schema.fingerprint]
        async with httpx.AsyncClient(timeout=self.timeout_s) as client:
            resp = await client.post(
                f"{self.url}/subjects/{subject}/versions",
                json={"schema": schema.canonical, "schemaType": "AVRO"},
                headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
            )
            resp.raise_for_status()
        schema_id = int(resp.json()["id"])
        self.id_by_fingerprint[schema.fingerprint] = schema_id
        self.schema_by_id[schema_id] = schema
        return schema_id

    async def fetch(self, schema_id: int) -> EventSchema:
        if schema_id not in self.schema_by_id:
            async with httpx.AsyncClient(timeout=self.timeout_s) as client:
                resp = await client.get(f"{self.url}/schemas/ids/{schema_id}")
                resp.raise_for_status()
            self.schema_by_id[schema_id] = build_schema(json.loads(resp.json()["schema"]))
        return self.schema_by_id[schema_id]


class Codec:
    def __init__(
        self, schemas: SchemaSet | None = None, registry: SchemaRegistry | None = None
    ) -> None:
        self.schemas = schemas or default_schema_set()
        self.registry = registry

    # -- writing -------------------------------------------------------------

    async def prepare(self, subject_prefix: str) -> None:
        """Register every current schema with the registry (no-op without one)."""
        if self.registry is None:
            return
        for schema in self.schemas.current.values():
            await self.registry.register(f"{subject_prefix}-{schema.full_name}", schema)

    def encode(self, event: Event) -> bytes:
        schema = type(event).schema
        body = io.BytesIO()
        fastavro.schemaless_writer(body, schema.parsed, event.to_avro())
        if self.registry is not None and schema.fingerprint in self.registry.id_by_fingerprint:
            header = CONFLUENT_MAGIC + struct.pack(
                ">I", self.registry.id_by_fingerprint[schema.fingerprint]
            )
        else:
            header = SINGLE_OBJECT_MAGIC + schema.fingerprint
        return header + body.getvalue()

    # -- reading -------------------------------------------------------------

    async def resolve(self, data: bytes) -> None:
        """Fetch an unknown Confluent writer schema so `decode` can read the message."""
        if self.registry is None or not data.startswith(CONFLUENT_MAGIC) or len(data) < 5:
            return
        (schema_id,) = struct.unpack(">I", data[1:5])
        await self.registry.fetch(schema_id)

    def writer_schema(self, data: bytes) -> tuple[EventSchema, int]:
        if data is None:
            raise DecodeError("empty message (tombstone or null value)")
        if data.startswith(SINGLE_OBJECT_MAGIC) and len(data) >= 10:
            fp = bytes(data[2:10])
            schema = self.schemas.by_fingerprint.get(fp)
            if schema is None:
                raise DecodeError(f"unknown writer schema fingerprint {fp.hex()}")
            return schema, 10
        if data.startswith(CONFLUENT_MAGIC) and len(data) >= 5 and self.registry is not None:
            (schema_id,) = struct.unpack(">I", data[1:5])
            schema = self.registry.schema_by_id.get(schema_id)
            if schema is None:
                raise DecodeError(f"schema id {schema_id} not resolved from the registry")
            return schema, 5
        raise DecodeError(f"not an Avro event: starts with {bytes(data[:4])!r}")

    def decode(self, data: bytes) -> Event:
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
        reader = fastavro.reader(src)
        name = reader.writer_schema["name"].rsplit(".", 1)[-1]
        model = EVENT_TYPES[name]
        reader_schema = model.schema.parsed
        src.seek(0)
        for record in fastavro.reader(src, reader_schema=reader_schema):
            yield model.model_validate(record)
