"""`webgym infra up`: `--brokers N` is an override for this command's settings; it names the
credentials file and warns when the stack listens beyond loopback."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from infra import stack
from webgym_cli import infra as infra_cli
from webgym_cli.main import app
from webgym_common.config import Settings, get_settings


def test_brokers_option_sets_the_cluster_size_and_says_how_to_keep_it(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WEBGYM_INFRA__DATA_DIR", str(tmp_path))
    seen: list[Settings] = []

    async def up(settings: Settings, **kwargs: Any) -> None:
        seen.append(settings)

    monkeypatch.setattr(stack, "up", up)
    monkeypatch.setattr(infra_cli, "print_status", lambda settings: True)
    result = runner.invoke(app, ["infra", "up", "--brokers", "3"])
    assert result.exit_code == 0, result.output
    (settings,) = seen
    assert settings.infra.brokers == 3 and settings.kafka.replication_factor == 3
    assert settings.kafka.bootstrap_servers.count(",") == 2
    assert "WEBGYM_INFRA__BROKERS=3" in result.output
    result = runner.invoke(app, ["infra", "up"])
    assert seen[-1].infra.brokers == 1 and "WEBGYM_INFRA__BROKERS" not in result.output


def test_up_names_the_credentials_file_and_warns_of_a_public_host(
    runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("WEBGYM_INFRA__DATA_DIR", str(tmp_path))

    async def up(settings: Settings, **kwargs: Any) -> None:
        pass

    monkeypatch.setattr(stack, "up", up)
    monkeypatch.setattr(infra_cli, "print_status", lambda settings: True)
    result = runner.invoke(app, ["infra", "up"])
    assert result.exit_code == 0, result.output
    assert "secrets.json" in result.output and "warning" not in result.output
    monkeypatch.setenv("WEBGYM_INFRA__HOST", "0.0.0.0")
    get_settings.cache_clear()
    result = runner.invoke(app, ["infra", "up"])
    assert "warning" in result.output and "Kafka and the sandbox web" in result.output
