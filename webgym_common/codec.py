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
from collections.abc import Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import fastavro
from fastavro.schema import parse_schema

from webgym_common.events import EVENT_TYPES, Event
from webgym_common.schemas import EventSchema, SchemaError, SchemaSet, default_schema_set

SINGLE_OBJECT_MAGIC = b"\xc3\x01"
EXPORT_CODEC = "zstandard"


# No producer of ours can publish more than KafkaSettings.max_request_size (4 MiB by default);
# a bigger record is not one of our events, and passing it on (into a table's changelog, or
# whole into the DLQ) fails the very produce call that should get rid of it.
MAX_EVENT_BYTES = 4 * 1024 * 1024


class DecodeError(ValueError):
    """Bytes that are not an event this codec knows."""


def projected_schema(schema: EventSchema, keep: Collection[str]) -> dict[str, Any]:
    """`schema` (a current one) as a reader schema of the fields in `keep` and of those that
    have no default: fastavro's schema resolution then skips the others' bytes, and the
    event class fills in their defaults. For a job that reads none of them (a re-scoring
    needs no marks nor timings): an event decoded this way is a full decode with those
    fields at their defaults."""
    fields = [f for f in schema.raw["fields"] if f["name"] in keep or "default" not in f]
    raw = {**schema.raw, "fields": fields}
    # Expanded schemas define a named type where first used: a dropped field may take a
    # type a kept one refers to by name, which fails here, not at the first decode.
    parsed = parse_schema(raw, named_schemas={})
    if not isinstance(parsed, dict):
        raise SchemaError(f"{schema.name}: not a record schema once projected")
    return parsed


def writer_prefix(writer: EventSchema, reader: dict[str, Any]) -> dict[str, Any]:
    """The writer's schema cut after the last field `reader` (a projection) takes.

    A record's body is its fields one after the other in the writer's order, so a reader
    that takes none of the last ones can stop before them: their bytes are not even skipped
    (an observation's marks come after its page: skipping them still parses each mark).
    Bytes left over are never looked at, corrupt or not: for the replays' projected reads,
    not for the pipeline's own."""
    wanted = {f["name"] for f in reader["fields"]}
    fields = writer.raw["fields"]
    last = max((i for i, f in enumerate(fields) if f["name"] in wanted), default=-1)
    # A named type is defined where first used, so the fields kept define all they use.
    parsed = parse_schema({**writer.raw, "fields": fields[:last + 1]}, named_schemas={})
    if not isinstance(parsed, dict):
        raise SchemaError(f"{writer.name}: not a record schema once cut")
    return parsed


class Codec:
    def __init__(self, schemas: SchemaSet | None = None,
                 readers: Mapping[str, dict[str, Any]] | None = None) -> None:
        """`readers`: reader schemas by event name in place of the current ones (see
        `projected`)."""
        self.schemas = schemas or default_schema_set()
        self.readers = dict(readers or {})
        self._prefixes: dict[bytes, dict[str, Any]] = {}  # by writer fingerprint

    def projected(self, keep: Mapping[str, Collection[str]]) -> Codec:
        """A codec that decodes the named events with only the fields in `keep` (and those
        without a default: the event class requires them), reading a body no further than
        the last of them (`writer_prefix`); every other event in full."""
        readers = {name: projected_schema(self.schemas.get(name), fields)
                   for name, fields in keep.items()}
        return Codec(self.schemas, {**self.readers, **readers})

    def encode(self, event: Event) -> bytes:
        schema = type(event).schema
        body = io.BytesIO()
        fastavro.schemaless_writer(body, schema.parsed, event.to_avro())
        return SINGLE_OBJECT_MAGIC + schema.fingerprint + body.getvalue()

    # -- reading -------------------------------------------------------------

    def _prefix(self, writer: EventSchema, reader: dict[str, Any]) -> dict[str, Any]:
        found = self._prefixes.get(writer.fingerprint)
        if found is None:
            found = self._prefixes[writer.fingerprint] = writer_prefix(writer, reader)
        return found

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
        written, reader = writer.parsed, self.readers.get(writer.name)
        if reader is not None:
            written = self._prefix(writer, reader)
        else:
            current = self.schemas.current.get(writer.name)
            if current is None:
                raise DecodeError(f"no current schema for {writer.full_name}")
            reader = current.parsed
        try:
            record = fastavro.schemaless_reader(io.BytesIO(data[offset:]), written, reader)
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
