"""Settings: environment, YAML, overrides given when loading; frozen once built."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from webgym_common.choices import PolicyKind
from webgym_common.config import (
    KafkaSettings,
    Settings,
    SettingsError,
    get_settings,
    load_settings,
    settings_env,
    stack_secrets,
)


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


def test_a_bad_stack_port_is_named_with_its_section(monkeypatch: pytest.MonkeyPatch) -> None:
    # The addresses derived from infra's ports must not hide infra's own error.
    monkeypatch.setenv("WEBGYM_INFRA__KAFKA_PORT", "ninety")
    with pytest.raises(SettingsError, match="WEBGYM_INFRA__KAFKA_PORT"):
        load_settings()


def test_missing_yaml_file_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEBGYM_CONFIG", "/nonexistent/webgym.yaml")
    with pytest.raises(SettingsError, match="WEBGYM_CONFIG"):
        load_settings()


def test_an_override_keeps_the_sections_other_env_vars(monkeypatch: pytest.MonkeyPatch) -> None:
    # What `webgym worker policy --kind teacher` does: one field laid over the environment.
    monkeypatch.setenv("WEBGYM_POLICY__KIND", "vllm")
    monkeypatch.setenv("WEBGYM_POLICY__BASE_URL", "http://gpu-box:8000/v1")
    monkeypatch.setenv("WEBGYM_POLICY__MAX_INFLIGHT", "3")
    s = load_settings(policy={"kind": "teacher"})
    assert s.policy.kind == PolicyKind.TEACHER
    assert s.policy.base_url == "http://gpu-box:8000/v1"
    assert s.policy.max_inflight == 3


def test_settings_and_every_section_are_frozen() -> None:
    s = load_settings()
    with pytest.raises(ValidationError, match="frozen"):
        s.policy = s.policy  # type: ignore[misc]
    for section in type(s).model_fields:
        model = getattr(s, section)
        name = next(iter(type(model).model_fields))
        with pytest.raises(ValidationError, match="frozen"):
            setattr(model, name, getattr(model, name))


def test_cached_settings_are_unchanged_by_overrides() -> None:
    cached = get_settings()
    before = cached.model_dump()
    load_settings(policy={"kind": "teacher"}, browser={"contexts": 9})
    assert get_settings() is cached and cached.model_dump() == before


def test_addresses_default_to_the_embedded_stack() -> None:
    s = load_settings(infra={"host": "10.0.0.2", "kafka_port": 9001, "minio_port": 9002},
                      vllm={"port": 9003})
    assert s.kafka.bootstrap_servers == "10.0.0.2:9001"
    assert s.s3.endpoint == "10.0.0.2:9002"
    assert s.policy.base_url == "http://10.0.0.2:9003/v1"
    # Given addresses win, whether as a dict or as a section object.
    s = load_settings(kafka=KafkaSettings(bootstrap_servers="broker:9092"),
                      s3={"endpoint": "s3:9000"})
    assert s.kafka.bootstrap_servers == "broker:9092" and s.s3.endpoint == "s3:9000"
    # A section object without an address gets the embedded stack's.
    assert load_settings(kafka=KafkaSettings(partitions=3)).kafka.bootstrap_servers == \
        "127.0.0.1:19092"


def test_data_dir_defaults_under_home(tmp_path: Path) -> None:
    assert load_settings(infra={"home": tmp_path}).infra.data_dir == tmp_path / "data"
    given = tmp_path / "elsewhere"
    assert load_settings(infra={"home": tmp_path, "data_dir": given}).infra.data_dir == given


def test_the_local_vllm_key_is_what_its_clients_send_unless_they_have_their_own(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    here = {"data_dir": tmp_path}
    s = load_settings(infra=here, vllm={"api_key": "k1"})
    assert (s.policy.api_key, s.evaluator.api_key) == ("k1", "k1")
    s = load_settings(infra=here, vllm={"api_key": "k1"}, policy={"api_key": "mine"})
    assert (s.policy.api_key, s.evaluator.api_key) == ("mine", "k1")
    s = load_settings(infra=here)  # no key anywhere: the one generated for the data dir
    made = stack_secrets.read(tmp_path)
    assert made is not None
    assert (s.policy.api_key, s.evaluator.api_key, s.vllm.api_key) == (made.vllm_api_key,) * 3
    monkeypatch.setenv("WEBGYM_VLLM__API_KEY", "from-env")
    assert load_settings(infra=here).policy.api_key == "from-env"


def test_the_local_vllm_key_is_never_sent_to_another_server(tmp_path: Path) -> None:
    s = load_settings(infra={"data_dir": tmp_path}, vllm={"api_key": "local"},
                      policy={"base_url": "https://api.example.com/v1"})
    assert (s.policy.api_key, s.evaluator.api_key) == ("EMPTY", "EMPTY")
    s = load_settings(infra={"data_dir": tmp_path}, vllm={"api_key": "local"},
                      evaluator={"base_url": "https://judge.example.com/v1"})
    assert (s.policy.api_key, s.evaluator.api_key) == ("local", "EMPTY")


def test_the_embedded_stack_gets_credentials_generated_once_per_data_dir(tmp_path: Path) -> None:
    first = load_settings(infra={"data_dir": tmp_path})
    made = stack_secrets.read(tmp_path)
    assert made is not None
    assert (first.s3.access_key, first.s3.secret_key, first.vllm.api_key) == (
        made.minio_access_key, made.minio_secret_key, made.vllm_api_key)
    assert first.s3.secret_key not in ("webgym-secret", "") and len(first.s3.secret_key) >= 32
    # Every later process of the stack reads the same ones, and passes them to its children.
    again = load_settings(infra={"data_dir": tmp_path})
    assert (again.s3, again.vllm) == (first.s3, first.vllm)
    assert settings_env(first)["WEBGYM_S3__SECRET_KEY"] == made.minio_secret_key
    other = load_settings(infra={"data_dir": tmp_path / "other"})
    assert other.s3.secret_key != first.s3.secret_key


def test_explicit_credentials_win_and_a_remote_store_gets_no_generated_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WEBGYM_S3__ACCESS_KEY", "me")
    monkeypatch.setenv("WEBGYM_S3__SECRET_KEY", "my-own-secret-1234")
    s = load_settings(infra={"data_dir": tmp_path})
    assert (s.s3.access_key, s.s3.secret_key) == ("me", "my-own-secret-1234")
    monkeypatch.delenv("WEBGYM_S3__ACCESS_KEY")
    monkeypatch.delenv("WEBGYM_S3__SECRET_KEY")
    remote = load_settings(infra={"data_dir": tmp_path / "remote"},
                           s3={"endpoint": "store.example.com:9000"},
                           policy={"base_url": "https://api.example.com/v1"})
    assert (remote.s3.access_key, remote.s3.secret_key, remote.vllm.api_key) == ("", "", None)
    assert not (tmp_path / "remote").exists()  # nothing generated, nothing written


def test_task_urls_name_the_sandbox_where_the_browsers_reach_it() -> None:
    here = Settings()
    port = here.infra.sandbox_port
    assert here.resolve_url("{sandbox}/shop/") == f"http://127.0.0.1:{port}/shop/"
    composed = Settings(infra={"host": "0.0.0.0", "sandbox_host": "sandbox"})
    assert composed.resolve_url("{sandbox}/shop/") == (
        f"http://sandbox:{composed.infra.sandbox_port}/shop/")
