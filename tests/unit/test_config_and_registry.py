"""Settings, schemas and the topic registry: the single sources of truth agree."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from webgym_common.config import SettingsError, load_settings
from webgym_common.events import EVENT_TYPES
from webgym_common.schemas import SCHEMA_DIR
from webgym_common.topics import Topic, topic_specs

REFERENCE_TASK_FIELDS = {
    "task_name", "domain", "subdomain", "website", "difficulty", "evaluator_reference",
    "definite_answer", "reference_answer", "task_id", "attempt_level", "max_steps",
    "benchmark_name",
}
DESIGN_EVENT_TYPES = {
    "Task", "TaskHistory", "EpisodeRequested", "StepObserved", "ActionChosen",
    "EpisodeCompleted", "EpisodeScored", "ReplaySample", "ModelVersion", "IterationStarted",
    "IterationClosed", "CancelEpisode", "RolloutMetrics", "DeadLetter",
}


def test_env_vars_override_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEBGYM_KAFKA__PARTITIONS", "12")
    monkeypatch.setenv("WEBGYM_S3__BUCKET", "other")
    s = load_settings()
    assert s.kafka.partitions == 12 and s.s3.bucket == "other"


def test_yaml_file_is_read_and_env_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "webgym.yaml"
    cfg.write_text(
        "kafka:\n  topic_prefix: fromyaml\n  partitions: 3\ninfra:\n  kafka_port: 9999\n"
    )
    monkeypatch.setenv("WEBGYM_CONFIG", str(cfg))
    monkeypatch.setenv("WEBGYM_KAFKA__PARTITIONS", "5")
    s = load_settings()
    assert s.kafka.topic_prefix == "fromyaml"
    assert s.kafka.partitions == 5
    # The broker address follows the embedded stack's port unless set.
    assert s.kafka.bootstrap_servers == "127.0.0.1:9999"


def test_bad_value_names_the_setting_and_what_is_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEBGYM_KAFKA__COMPRESSION", "brotli")
    with pytest.raises(SettingsError) as err:
        load_settings()
    msg = str(err.value)
    assert "WEBGYM_KAFKA__COMPRESSION" in msg and "'zstd'" in msg and "brotli" in msg


def test_missing_yaml_file_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEBGYM_CONFIG", "/nonexistent/webgym.yaml")
    with pytest.raises(SettingsError, match="WEBGYM_CONFIG"):
        load_settings()


def test_every_design_event_type_has_a_schema_with_an_envelope() -> None:
    assert DESIGN_EVENT_TYPES <= set(EVENT_TYPES)
    for name in EVENT_TYPES:
        raw = json.loads((SCHEMA_DIR / f"{name}.avsc").read_text())
        fields = [f["name"] for f in raw["fields"]]
        assert fields[:3] == ["event_id", "produced_at", "schema_version"], name


def test_task_schema_carries_every_reference_field() -> None:
    fields = {f["name"] for f in json.loads((SCHEMA_DIR / "Task.avsc").read_text())["fields"]}
    assert REFERENCE_TASK_FIELDS <= fields


def test_registry_names_only_known_event_types_and_copartitions_episode_topics() -> None:
    specs = topic_specs(load_settings(kafka={"partitions": 6}).kafka)
    assert set(specs) == set(Topic)
    for spec in specs.values():
        assert set(spec.value_types) <= set(EVENT_TYPES), spec.name
    keyed_by_episode = [Topic.EPISODES, Topic.OBSERVATIONS, Topic.ACTIONS,
                        Topic.EPISODES_COMPLETED, Topic.EPISODES_SCORED]
    assert {specs[t].partitions for t in keyed_by_episode} == {6}
    assert specs[Topic.EPISODES].name == "webgym.episodes"
    assert specs[Topic.EPISODES_COMPLETED].name == "webgym.episodes.completed"
    compacted = {t for t, s in specs.items() if s.cleanup_policy == "compact"}
    assert compacted == {Topic.TASKS, Topic.TASK_HISTORY, Topic.MODELS, Topic.METRICS,
                         Topic.BLOCKLIST}
