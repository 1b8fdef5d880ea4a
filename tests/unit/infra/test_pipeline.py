"""infra/pipeline.py: processes are started as `python -m webgym_cli` and ready by their file."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from infra import pipeline
from infra.procs import InfraError, ManagedProcess
from webgym_common.config import Settings, load_settings

# Stands in for a worker: says it is ready after a moment (as mark_ready would), then serves.
READY_LATER = ("import os, pathlib, time; time.sleep(0.5); "
               "pathlib.Path(os.environ['WEBGYM_READY_FILE']).write_text('ready'); time.sleep(60)")


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return load_settings(infra={"home": tmp_path, "data_dir": tmp_path / "data",
                                "stop_timeout_s": 5})


def test_processes_run_the_cli_package() -> None:
    assert pipeline.command("policy")[1:] == ["-m", "webgym_cli", "-v", "worker", "policy"]


def test_up_waits_for_the_ready_file_and_status_shows_it(
    settings: Settings, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pipeline, "available", lambda: ["history"])
    monkeypatch.setattr(pipeline, "command", lambda name: [sys.executable, "-c", READY_LATER])
    stale = pipeline.ready_file(settings, "history")
    stale.parent.mkdir(parents=True)
    stale.write_text("from a run before")  # must not count: it is removed before the start
    try:
        assert asyncio.run(pipeline.up(settings, timeout_s=30)) == ["history"]
        (row,) = pipeline.status(settings)
        assert row.name == "history" and row.pid is not None and row.ready
        assert asyncio.run(pipeline.up(settings)) == []  # already running
    finally:
        assert pipeline.down(settings) == ["history"]
    assert not stale.exists()
    (row,) = pipeline.status(settings)
    assert row.pid is None and not row.ready


def test_up_fails_with_the_log_when_a_process_exits(
    settings: Settings, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pipeline, "available", lambda: ["metrics"])
    monkeypatch.setattr(pipeline, "command", lambda name: [
        sys.executable, "-c", "print('no broker at all'); raise SystemExit(1)"])
    with pytest.raises(InfraError, match="pipeline metrics exited") as err:
        asyncio.run(pipeline.up(settings, timeout_s=30))
    assert "no broker at all" in str(err.value)
    assert ManagedProcess("pipeline-metrics", settings.infra.data_dir).pid() is None
