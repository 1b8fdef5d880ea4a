"""Codec: framing, schema resolution, bad input, export files (pure logic, no broker)."""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path

import fastavro
import pytest

from tests.factories import all_sample_events, sample_event
from webgym_common.codec import (
    MAX_EVENT_BYTES,
    SINGLE_OBJECT_MAGIC,
    Codec,
    DecodeError,
    read_container,
    write_container,
)
from webgym_common.events import EpisodeScored, Task
from webgym_common.schemas import build_schema


@pytest.mark.parametrize("event", all_sample_events(), ids=lambda e: type(e).__name__)
def test_every_event_type_round_trips(event) -> None:
    codec = Codec()
    data = codec.encode(event)
    assert data[:2] == SINGLE_OBJECT_MAGIC
    assert data[2:10] == type(event).schema.fingerprint
    assert codec.decode(data) == event


def test_fingerprint_is_crc64_avro_little_endian() -> None:
    # Avro spec: fingerprint of '"int"' is 0x7275d51a3f395c8f; single-object framing is LE.
    expected = (0x7275D51A3F395C8F).to_bytes(8, "little")
    got = bytes.fromhex(fastavro.schema.fingerprint('"int"', "CRC-64-AVRO"))
    assert got == expected


@pytest.mark.parametrize(
    "garbage",
    [b"", b"\x00", b"hello world", b"\xc3\x01short", b"\xc3\x01" + b"\x01" * 8 + b"x"],
)
def test_garbage_is_a_decode_error(garbage: bytes) -> None:
    with pytest.raises(DecodeError):
        Codec().decode(garbage)


def test_truncated_body_is_a_decode_error() -> None:
    data = Codec().encode(sample_event("StepObserved"))
    for cut in (11, len(data) // 2, len(data) - 1):
        with pytest.raises(DecodeError):
            Codec().decode(data[:cut])


def test_old_writer_schema_resolves_against_new_reader() -> None:
    current = Task.schema.raw
    old = {**current, "fields": [f for f in current["fields"] if f["name"] != "extra_json"]}
    record = sample_event("Task").to_avro()
    del record["extra_json"]
    old_schema = build_schema(old)
    body = io.BytesIO()
    fastavro.schemaless_writer(body, old_schema.parsed, record)
    data = SINGLE_OBJECT_MAGIC + old_schema.fingerprint + body.getvalue()

    with pytest.raises(DecodeError, match="unknown writer schema"):
        Codec().decode(data)
    codec = Codec(Codec().schemas.with_versions([old]))
    task = codec.decode(data)
    assert task.extra_json is None and task.task_id == record["task_id"]


def test_archived_schemas_are_loaded(tmp_path: Path) -> None:
    from webgym_common.schemas import SCHEMA_DIR, load_schema_set

    for p in SCHEMA_DIR.glob("*.avsc"):
        (tmp_path / p.name).write_text(p.read_text())
    (tmp_path / "archive").mkdir()
    old = json.loads((SCHEMA_DIR / "DeadLetter.avsc").read_text())
    old["fields"] = [f for f in old["fields"] if f["name"] != "consumer_group"]
    (tmp_path / "archive" / "DeadLetter.v0.avsc").write_text(json.dumps(old))
    schemas = load_schema_set(tmp_path)
    assert len(schemas.by_fingerprint) == len(schemas.current) + 1


def test_confluent_framing_is_not_read() -> None:
    # There is no schema registry: a Confluent-framed value (0x00 + 4-byte id) is not an event.
    event = sample_event("EpisodeScored")
    body = Codec().encode(event)[10:]
    with pytest.raises(DecodeError, match="not an Avro event"):
        Codec().decode(b"\x00" + struct.pack(">I", 1) + body)


def test_a_record_larger_than_any_event_is_a_decode_error_before_parsing() -> None:
    data = Codec().encode(sample_event("EpisodeScored"))
    huge = data + b"\x00" * (MAX_EVENT_BYTES - len(data) + 1)
    with pytest.raises(DecodeError, match="larger than any event"):
        Codec().decode(huge)


def test_a_tombstone_is_a_decode_error() -> None:
    with pytest.raises(DecodeError, match="tombstone"):
        Codec().decode(None)


def test_export_container_uses_zstandard(tmp_path: Path) -> None:
    scored = [sample_event("EpisodeScored") for _ in range(5)]
    path = tmp_path / "iteration3.avro"
    assert write_container(path, scored, EpisodeScored) == 5
    with path.open("rb") as f:
        assert fastavro.reader(f).codec == "zstandard"
    assert list(read_container(path)) == scored
