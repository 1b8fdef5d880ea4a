"""`webgym infra up` (infra/stack.py) refuses, before starting anything, what infra.exposure
refuses: one clear error naming the settings."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from infra import stack
from infra.procs import InfraError, ManagedProcess, free_port
from webgym_common.config import Settings, load_settings


def stack_settings(tmp_path: Path, host: str = "127.0.0.1", **sections: dict) -> Settings:
    ports = {name: free_port() for name in ("kafka_port", "kafka_controller_port", "minio_port",
                                            "minio_console_port", "sandbox_port")}
    return load_settings(infra={"data_dir": tmp_path, "host": host, **ports}, **sections)


@pytest.fixture(autouse=True)
def nothing_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a process was started")

    monkeypatch.setattr(ManagedProcess, "start", refuse)


def test_a_public_host_with_generated_credentials_starts_nothing(tmp_path: Path) -> None:
    settings = stack_settings(tmp_path, host="0.0.0.0")
    with pytest.raises(InfraError, match=r"WEBGYM_INFRA__HOST=0\.0\.0\.0 would publish") as err:
        asyncio.run(stack.up(settings))
    assert "WEBGYM_S3__SECRET_KEY is not set explicitly" in str(err.value)
    assert not (tmp_path / "run").exists()  # no pid file: nothing started


def test_an_embedded_kafka_asked_for_sasl_starts_nothing(tmp_path: Path) -> None:
    settings = stack_settings(tmp_path, kafka={
        "security_protocol": "SASL_PLAINTEXT", "sasl_username": "u", "sasl_password": "p"})
    with pytest.raises(InfraError, match="speaks PLAINTEXT only"):
        asyncio.run(stack.up(settings))
