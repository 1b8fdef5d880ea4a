"""Re-scoring reads the parts with a projected reader schema (Codec.projected, rescore.READS),
stopping after the last field it reads: the fields it keeps decode as in full (from the
current writer schemas and the archived ones), the others take their defaults, and the
episode it scores from them is scored as from a full decode."""

from __future__ import annotations

import io
import json
from pathlib import Path

import fastavro
import pytest

from processors.evaluator.reward import RULES_VERSION
from processors.reprocess.agreement import Provenance
from processors.reprocess.rescore import READS, score_episode
from tests.factories import sample_event, sample_value
from tests.unit.processors.reprocess.test_rescore import episode_events, log_of
from webgym_common.codec import SINGLE_OBJECT_MAGIC, Codec, projected_schema, writer_prefix
from webgym_common.config import load_settings
from webgym_common.events import EVENT_TYPES, Event, Mark, StepObserved
from webgym_common.schemas import SCHEMA_DIR, build_schema

RULES = Provenance("rules", RULES_VERSION, None, None, "run-1")
# What two scorings of one episode may differ in: made now, each with its own id.
FRESH = {"event_id", "produced_at"}


def full_and_projected(event: Event) -> tuple[Event, Event]:
    codec = Codec()
    data = codec.encode(event)
    return codec.decode(data), codec.projected(READS).decode(data)


@pytest.mark.parametrize("name", sorted(READS))
def test_the_fields_kept_decode_as_in_full_the_others_take_their_defaults(name: str) -> None:
    event = sample_event(name)  # every field set, none at its default
    full, projected = full_and_projected(event)
    assert full == event
    model = EVENT_TYPES[name]
    for field in model.schema.raw["fields"]:
        name_ = field["name"]
        if name_ in READS[name] or "default" not in field:  # no default: always read
            assert getattr(projected, name_) == getattr(full, name_), name_
        else:
            default = model.model_fields[name_].get_default(call_default_factory=True)
            assert getattr(projected, name_) == default, name_
    assert type(projected) is type(full)


@pytest.mark.parametrize("name", sorted(READS))
def test_every_field_a_rescore_reads_is_one_of_the_event(name: str) -> None:
    assert READS[name] <= {f["name"] for f in EVENT_TYPES[name].schema.raw["fields"]}


def test_a_field_without_a_default_is_read_whatever_the_projection_says() -> None:
    schema = projected_schema(Codec().schemas.get("StepObserved"), keep=set())
    kept = {f["name"] for f in schema["fields"]}
    assert {"episode_id", "step", "url", "viewport"} <= kept
    assert not {"marks", "timings_ms", "accessibility_tree"} & kept


def test_an_observation_is_read_no_further_than_its_page() -> None:
    codec = Codec()
    observed = codec.schemas.get("StepObserved")
    cut = writer_prefix(observed, projected_schema(observed, READS["StepObserved"]))
    assert [f["name"] for f in cut["fields"]][-1] == "accessibility_tree"
    data = codec.encode(sample_event("StepObserved"))
    garbage = data + b"\xff" * 10  # past the page: never looked at
    assert codec.projected(READS).decode(garbage) == codec.projected(READS).decode(data)


ARCHIVED = [p for p in sorted((SCHEMA_DIR / "archive").glob("*.avsc"))
            if p.name.split(".")[0] in READS]


@pytest.mark.parametrize("path", ARCHIVED, ids=lambda p: p.name)
def test_an_event_written_with_an_archived_schema_decodes_as_in_full(path: Path) -> None:
    writer = build_schema(json.loads(path.read_text()), {})
    body = io.BytesIO()
    fastavro.schemaless_writer(body, writer.parsed, sample_value(writer.raw, {}))
    data = SINGLE_OBJECT_MAGIC + writer.fingerprint + body.getvalue()
    codec = Codec(Codec().schemas.with_versions([writer.raw]))
    full, projected = codec.decode(data), codec.projected(READS).decode(data)
    for name in READS[writer.name]:
        assert getattr(projected, name) == getattr(full, name), name


def test_events_the_projection_does_not_name_decode_in_full() -> None:
    event = sample_event("EpisodeCompleted")
    full, projected = full_and_projected(event)
    assert projected == full == event


async def test_an_episode_read_projected_is_scored_as_one_read_in_full() -> None:
    cfg = load_settings().evaluator
    marks = [Mark(index=i, ref=f"e{i}", role="link", name=f"l{i}", x=1.0, y=2.0, width=3.0,
                  height=4.0) for i in range(5)]
    for answer in ("42", "41"):  # right and wrong
        events = [e.model_copy(update={"marks": marks, "timings_ms": {"total": 3.0},
                                       "worker_id": "w1", "terminal": False})
                  if isinstance(e, StepObserved) else e
                  for e in episode_events("e1", answer)]
        decoded = [full_and_projected(e) for e in events]
        full = await score_episode(log_of([f for f, _ in decoded]), "e1", None, RULES, cfg)
        projected = await score_episode(log_of([p for _, p in decoded]), "e1", None, RULES,
                                        cfg)
        assert not isinstance(full, str) and not isinstance(projected, str)
        assert projected.model_dump(exclude=FRESH) == full.model_dump(exclude=FRESH)
