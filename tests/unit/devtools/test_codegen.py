"""The generated event classes are exactly what schemas/*.avsc give."""

from __future__ import annotations

import json
import types
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import pytest
from pydantic import BaseModel

from devtools import codegen
from webgym_common import events
from webgym_common.eventbase import AvroRecord, Event, utc_now
from webgym_common.schemas import SCHEMA_DIR, default_schema_set, load_schema_set

_PRIMITIVES: dict[str, Any] = {
    "string": str, "int": int, "long": int, "float": float, "double": float,
    "boolean": bool, "bytes": bytes, "null": type(None),
}
_FACTORY_FIELDS = {"event_id", "produced_at"}


def _committed() -> dict[str, str]:
    return {p.name: p.read_text() for p in codegen.TARGET.glob("*.py")}


def test_committed_package_is_what_the_schemas_give() -> None:
    expected = codegen.render(load_schema_set(SCHEMA_DIR))
    assert _committed() == expected, (
        "webgym_common/events/ is stale: run .venv/bin/python -m devtools.codegen"
    )


def test_every_generated_module_stays_short() -> None:
    for name, source in _committed().items():
        assert source.count("\n") <= 400, f"{name}: split it in codegen.MODULES"


def _copy_schemas(tmp_path: Path) -> Path:
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    for p in SCHEMA_DIR.glob("*.avsc"):
        (schemas / p.name).write_text(p.read_text())
    return schemas


def test_a_schema_change_makes_the_check_fail(tmp_path: Path) -> None:
    schemas = _copy_schemas(tmp_path)
    out = tmp_path / "events"
    out.mkdir()
    for name, source in _committed().items():
        (out / name).write_text(source)
    (out / "leftover.py").write_text("# a module no schema gives any more\n")
    args = ["--schemas", str(schemas), "--out", str(out)]
    assert codegen.main([*args, "--check"]) == 1  # the leftover module is stale too
    (out / "leftover.py").unlink()
    assert codegen.main([*args, "--check"]) == 0

    raw = json.loads((schemas / "CancelEpisode.avsc").read_text())
    raw["fields"].append({"name": "note", "type": ["null", "string"], "default": None})
    (schemas / "CancelEpisode.avsc").write_text(json.dumps(raw))
    assert codegen.main([*args, "--check"]) == 1
    assert (out / "episodes.py").read_text() == _committed()["episodes.py"]  # wrote nothing
    (out / "leftover.py").write_text("# stale\n")
    assert codegen.main(args) == 0
    assert "    note: str | None = None\n" in (out / "episodes.py").read_text()
    assert not (out / "leftover.py").exists()
    assert codegen.main([*args, "--check"]) == 0


def test_a_new_event_must_be_given_a_module(tmp_path: Path) -> None:
    schemas = _copy_schemas(tmp_path)
    (schemas / "Surprise.avsc").write_text(json.dumps({
        "type": "record", "name": "Surprise", "namespace": "webgym.events",
        "fields": [{"name": "event_id", "type": "string"}],
    }))
    with pytest.raises(codegen.CodegenError, match="place Surprise in a module"):
        codegen.render(load_schema_set(schemas))


def test_nested_types_live_with_their_users_or_in_records() -> None:
    files = codegen.render(load_schema_set())
    # Used by episode events only, so written with them.
    assert "class Mark(AvroRecord)" in files["episodes.py"]
    # Split is named by tasks, episodes and evaluations alike.
    assert "Split: TypeAlias" in files["records.py"]
    assert "from webgym_common.events.records import Split" in files["episodes.py"]
    assert events.Split is events.records.Split


def test_rendering_is_deterministic() -> None:
    assert codegen.render(load_schema_set()) == codegen.render(load_schema_set())


def _records() -> dict[str, tuple[dict[str, Any], bool]]:
    """Every record definition in the schemas by short name, and whether it is top level."""
    found: dict[str, tuple[dict[str, Any], bool]] = {}
    current = default_schema_set().current

    def walk(avro: Any) -> None:
        if isinstance(avro, list):
            for member in avro:
                walk(member)
        elif isinstance(avro, dict):
            if avro["type"] == "record":
                name = avro["name"].rsplit(".", 1)[-1]
                found.setdefault(name, (avro, name in current))
                for f in avro["fields"]:
                    walk(f["type"])
            elif avro["type"] in ("array", "map"):
                walk(avro.get("items", avro.get("values")))

    for schema in current.values():
        walk(schema.raw)
    return found


def _expected_type(avro: Any) -> Any:
    """The Python type an Avro type maps to, written independently of the generator."""
    if isinstance(avro, str):
        return _PRIMITIVES.get(avro) or events.MODELS[avro.rsplit(".", 1)[-1]]
    if isinstance(avro, list):
        return Union[tuple(_expected_type(m) for m in avro)]  # noqa: UP007
    kind = avro["type"]
    if kind == "record":
        return events.MODELS[avro["name"].rsplit(".", 1)[-1]]
    if kind == "enum":
        return Literal[tuple(avro["symbols"])]
    if kind == "array":
        return list[_expected_type(avro["items"])]
    if kind == "map":
        return dict[str, _expected_type(avro["values"])]
    if avro.get("logicalType") == "timestamp-millis":
        return datetime
    return _expected_type(kind)


def _same_type(got: Any, want: Any) -> bool:
    if get_origin(want) is Union or isinstance(want, types.UnionType):
        return get_origin(got) in (Union, types.UnionType) and (
            sorted(map(repr, get_args(got))) == sorted(map(repr, get_args(want)))
        )
    if get_origin(want) in (list, dict):
        return get_origin(got) is get_origin(want) and all(
            _same_type(g, w) for g, w in zip(get_args(got), get_args(want), strict=True)
        )
    return got == want


def test_every_schema_record_has_a_class() -> None:
    assert set(events.MODELS) == set(_records())
    assert set(events.EVENT_TYPES) == set(default_schema_set().current)
    for name, model in events.MODELS.items():
        assert getattr(events, name) is model


@pytest.mark.parametrize("name", sorted(_records()))
def test_class_matches_its_schema_field_for_field(name: str) -> None:
    schema, top_level = _records()[name]
    model: type[BaseModel] = events.MODELS[name]
    assert issubclass(model, Event) is top_level and issubclass(model, AvroRecord)
    assert model.avro_name == f"webgym.events.{name}"
    assert model.__doc__ == schema.get("doc")
    if top_level:
        assert events.EVENT_TYPES[name].schema is default_schema_set().current[name]

    fields = {f["name"]: f for f in schema["fields"]}
    assert list(model.model_fields) == list(fields)
    for field_name, info in model.model_fields.items():
        avro = fields[field_name]
        where = f"{name}.{field_name}"
        assert _same_type(info.annotation, _expected_type(avro["type"])), where
        if field_name in _FACTORY_FIELDS:
            assert not info.is_required() and info.default_factory is not None, where
        elif "default" not in avro:
            assert info.is_required(), where
        elif isinstance(avro["default"], list | dict):
            assert info.default_factory is not None, where
            assert info.default_factory() == avro["default"], where
            assert info.default_factory() is not info.default_factory(), where
        else:
            assert not info.is_required() and info.default == avro["default"], where
            assert type(info.default) is type(avro["default"]), where


def test_defaults_fill_in_and_are_not_shared() -> None:
    a = events.TaskHistory(task_id="t", updated_at=utc_now())
    b = events.TaskHistory(task_id="t", updated_at=a.updated_at)
    assert a.event_id != b.event_id and len(a.event_id) == 32
    assert a.produced_at.tzinfo is not None and a.produced_at.microsecond % 1000 == 0
    a.last_rewards.append(1.0)
    assert b.last_rewards == []
