"""Loads the Avro schemas in schemas/*.avsc: the one source of truth for event shapes.

A schema may name a type defined in another file (EpisodeRequested carries a
`webgym.events.Task`); every schema is expanded to a standalone form so its
fingerprint (CRC-64-AVRO of the parsing canonical form) identifies it alone.
Older versions of a schema live in schemas/archive/ so readers can still
resolve messages written with them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from fastavro.schema import (
    expand_schema,
    fingerprint,
    parse_schema,
    to_parsing_canonical_form,
)

from webgym_common.config import PROJECT_ROOT

SCHEMA_DIR = PROJECT_ROOT / "schemas"
NAMESPACE = "webgym.events"


class SchemaError(ValueError):
    """A schema file is missing, malformed or refers to an unknown type."""


@dataclass(frozen=True)
class EventSchema:
    """One version of one event type."""

    name: str  # short name, e.g. "StepObserved"
    full_name: str  # e.g. "webgym.events.StepObserved"
    raw: dict[str, Any]  # expanded JSON, no references to other files
    parsed: dict[str, Any]  # fastavro's parsed form
    canonical: str
    fingerprint: bytes  # 8 bytes, little-endian, as in Avro single-object encoding
    version: int


def _version_of(schema: dict[str, Any]) -> int:
    for field in schema.get("fields", []):
        if field["name"] == "schema_version":
            return int(field.get("default", 1))
    return 1


def _load_dir(directory: Path, named: dict[str, Any]) -> list[dict[str, Any]]:
    """Parse every .avsc in a directory, resolving cross-file names in any order."""
    pending = []
    for path in sorted(directory.glob("*.avsc")):
        try:
            pending.append((path, json.loads(path.read_text())))
        except json.JSONDecodeError as err:
            raise SchemaError(f"{path}: not valid JSON: {err}") from None
    loaded: list[dict[str, Any]] = []
    while pending:
        still = []
        for path, raw in pending:
            try:
                parse_schema(raw, named_schemas=named)
                loaded.append(raw)
            except Exception as err:  # fastavro raises UnknownType and friends
                still.append((path, raw, err))
        if len(still) == len(pending):
            path, _, first_error = still[0]
            raise SchemaError(f"{path}: {first_error}")
        pending = [(p, r) for p, r, _ in still]
    return loaded


def build_schema(raw: dict[str, Any], named: dict[str, Any] | None = None) -> EventSchema:
    """Expand and fingerprint one schema; `named` resolves types defined in other files."""
    parsed = parse_schema(raw, named_schemas={} if named is None else named)
    expanded = expand_schema(parsed)
    standalone = parse_schema(expanded, named_schemas={})
    if not isinstance(expanded, dict) or not isinstance(standalone, dict):
        raise SchemaError(f"not a record schema: {raw!r:.80}")
    canonical = to_parsing_canonical_form(standalone)
    full_name = standalone["name"]
    return EventSchema(
        name=full_name.rsplit(".", 1)[-1],
        full_name=full_name,
        raw=expanded,
        parsed=standalone,
        canonical=canonical,
        fingerprint=bytes.fromhex(fingerprint(canonical, "CRC-64-AVRO")),
        version=_version_of(raw),
    )


@dataclass(frozen=True)
class SchemaSet:
    """Current schemas by name, and every known version by fingerprint."""

    current: dict[str, EventSchema]
    by_fingerprint: dict[bytes, EventSchema]

    def get(self, name: str) -> EventSchema:
        try:
            return self.current[name]
        except KeyError:
            raise SchemaError(f"no schema named {name!r} in {SCHEMA_DIR}") from None

    def with_versions(self, schemas: list[dict[str, Any]]) -> SchemaSet:
        """A copy that also knows these (older or foreign) writer schemas."""
        extra = {}
        for raw in schemas:
            built = build_schema(raw, {})
            extra[built.fingerprint] = built
        return SchemaSet(self.current, {**self.by_fingerprint, **extra})


def load_schema_set(directory: Path = SCHEMA_DIR) -> SchemaSet:
    named: dict[str, Any] = {}
    current = {}
    for raw in _load_dir(directory, named):
        built = build_schema(raw, named)
        current[built.name] = built
    by_fp = {s.fingerprint: s for s in current.values()}
    archive = directory / "archive"
    if archive.is_dir():
        for path in sorted(archive.glob("*.avsc")):
            built = build_schema(json.loads(path.read_text()), dict(named))
            by_fp.setdefault(built.fingerprint, built)
    return SchemaSet(current, by_fp)


@lru_cache(maxsize=1)
def default_schema_set() -> SchemaSet:
    return load_schema_set()
