"""What `webgym infra up` refuses (infra/exposure.py): the embedded stack on a non-loopback
host with credentials nobody chose, and an embedded Kafka asked for TLS or SASL."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.exposure import credential_problems, is_loopback, kafka_protocol_problem, refusal
from webgym_common.config import Settings, load_settings
from webgym_common.config.stack_secrets import read

STACK = ["kafka", "minio", "sandbox", "vllm"]
STRONG = {"s3": {"access_key": "operator", "secret_key": "a" * 8 + "b" * 24},
          "vllm": {"api_key": "k" * 40}}


def settings(tmp_path: Path, host: str, **sections: dict) -> Settings:
    return load_settings(infra={"data_dir": tmp_path, "host": host}, **sections)


@pytest.mark.parametrize(("host", "loopback"), [
    ("127.0.0.1", True), ("127.0.1.1", True), ("localhost", True), ("::1", True),
    ("[::1]", True), ("0.0.0.0", False), ("::", False), ("10.0.0.5", False),
    ("stack-host", False),
])
def test_is_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_loopback_needs_nothing_more_than_the_generated_credentials(tmp_path: Path) -> None:
    s = settings(tmp_path, "127.0.0.1")
    assert credential_problems(s, read(tmp_path), STACK) == []


def test_a_public_host_with_generated_credentials_is_refused_naming_the_settings(
    tmp_path: Path,
) -> None:
    s = settings(tmp_path, "0.0.0.0")
    problems = credential_problems(s, read(tmp_path), STACK)
    assert problems == [f"{name} is not set explicitly" for name in
                        ("WEBGYM_S3__ACCESS_KEY", "WEBGYM_S3__SECRET_KEY", "WEBGYM_VLLM__API_KEY")]
    line = refusal(s, problems)
    assert "WEBGYM_INFRA__HOST=0.0.0.0" in line and "no authentication" in line
    # Without vLLM, its key is not asked for.
    assert len(credential_problems(s, read(tmp_path), ["kafka", "minio", "sandbox"])) == 2


def test_a_public_host_refuses_the_well_known_defaults(tmp_path: Path) -> None:
    s = settings(tmp_path, "0.0.0.0", s3={"access_key": "webgym", "secret_key": "webgym-secret"},
                 vllm={"api_key": "EMPTY"})
    assert credential_problems(s, read(tmp_path), STACK) == [
        "WEBGYM_S3__SECRET_KEY is a well-known default or shorter than 16 characters",
        "WEBGYM_VLLM__API_KEY is a well-known default or shorter than 16 characters"]


def test_a_public_host_with_explicit_strong_credentials_is_allowed(tmp_path: Path) -> None:
    s = settings(tmp_path, "0.0.0.0", **STRONG)
    assert credential_problems(s, read(tmp_path), STACK) == []


def test_the_embedded_kafka_speaks_plaintext_only(tmp_path: Path) -> None:
    sasl = {"security_protocol": "SASL_SSL", "sasl_username": "u", "sasl_password": "p"}
    s = settings(tmp_path, "127.0.0.1", kafka=sasl)
    problem = kafka_protocol_problem(s, STACK)
    assert problem is not None and "WEBGYM_KAFKA__SECURITY_PROTOCOL=SASL_SSL" in problem
    assert kafka_protocol_problem(s, ["minio"]) is None  # no embedded Kafka started
    external = settings(tmp_path, "127.0.0.1", kafka={**sasl, "bootstrap_servers": "k:9093"})
    assert kafka_protocol_problem(external, STACK) is None
    assert kafka_protocol_problem(settings(tmp_path, "127.0.0.1"), STACK) is None
