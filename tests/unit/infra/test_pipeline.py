"""infra/pipeline.py: processes are started as `python -m webgym_cli` and ready by their file."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from infra import pipeline
from infra.procs import InfraError, ManagedProcess, pid_alive
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


def test_an_optional_process_is_selected_only_when_its_setting_asks(
    settings: Settings, monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked = settings.model_copy(update={"envserver": settings.envserver.model_copy(
        update={"supervised": True})})
    assert "envserver" in pipeline.available()
    assert "envserver" not in pipeline.selected(settings)
    assert set(pipeline.selected(asked)) - set(pipeline.selected(settings)) == {"envserver"}
    training = settings.model_copy(update={"rollout": settings.rollout.model_copy(
        update={"train": True})})
    assert "envserver" not in pipeline.selected(training)  # training does not ask for it
    monkeypatch.setenv("WEBGYM_ENVSERVER__SUPERVISED", "true")
    assert "envserver" in pipeline.selected(load_settings())


def test_up_starts_an_optional_process_only_when_asked_and_down_stops_it(
    settings: Settings, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pipeline, "available", lambda: ["history", "envserver"])
    monkeypatch.setattr(pipeline, "command", lambda name: [sys.executable, "-c", READY_LATER])
    asked = settings.model_copy(update={"envserver": settings.envserver.model_copy(
        update={"supervised": True})})
    try:
        assert asyncio.run(pipeline.up(settings, timeout_s=30)) == ["history"]
        rows = {r.name: r for r in pipeline.status(settings)}
        assert rows["history"].started and rows["history"].ready
        assert not rows["envserver"].started and rows["envserver"].pid is None
    finally:
        assert pipeline.down(settings) == ["history"]
    try:
        assert asyncio.run(pipeline.up(asked, timeout_s=30)) == ["history", "envserver"]
        # `status` without the setting still shows what the running supervisor started.
        server = next(r for r in pipeline.status(settings) if r.name == "envserver")
        assert server.started and server.ready and server.pid is not None
    finally:
        assert sorted(pipeline.down(settings)) == ["envserver", "history"]
    assert not pid_alive(server.pid)
    assert not list((settings.infra.data_dir / "run").glob("pipeline-*.pid"))


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


def test_a_killed_process_is_restarted_and_down_leaves_nothing(
    settings: Settings, monkeypatch: pytest.MonkeyPatch,
) -> None:
    fast = settings.model_copy(update={"infra": settings.infra.model_copy(
        update={"restart_backoff_s": 0.2, "restart_backoff_max_s": 0.4})})
    monkeypatch.setattr(pipeline, "available", lambda: ["history", "metrics"])
    monkeypatch.setattr(pipeline, "command", lambda name: [sys.executable, "-c", READY_LATER])
    try:
        assert asyncio.run(pipeline.up(fast, timeout_s=30)) == ["history", "metrics"]
        supervisor = pipeline.supervisor_pid(fast)
        assert supervisor is not None
        before = {r.name: r.pid for r in pipeline.status(fast)}
        assert all(r.restarts == 0 and r.last_exit == "-" for r in pipeline.status(fast))
        os.killpg(before["history"], signal.SIGKILL)
        row = wait_for(lambda: next(r for r in pipeline.status(fast)
                                    if r.name == "history" and r.ready and r.restarts))
        assert row.pid not in (None, before["history"])
        assert row.restarts == 1 and row.last_exit == "SIGKILL" and row.last_restart_at
        metrics = next(r for r in pipeline.status(fast) if r.name == "metrics")
        assert metrics.pid == before["metrics"] and metrics.restarts == 0
        pids = [r.pid for r in pipeline.status(fast)]
    finally:
        assert sorted(pipeline.down(fast)) == ["history", "metrics"]
    assert not pid_alive(supervisor)
    assert not any(pid_alive(p) for p in pids if p)
    time.sleep(1.0)  # longer than the backoff: a restart after down would show by now
    assert all(r.pid is None and not r.ready for r in pipeline.status(fast))
    assert not list((fast.infra.data_dir / "run").glob("pipeline-*.pid"))


def test_up_is_a_no_op_while_the_supervisor_runs_and_restarts_after_it_was_killed(
    settings: Settings, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(pipeline, "available", lambda: ["history"])
    monkeypatch.setattr(pipeline, "command", lambda name: [sys.executable, "-c", READY_LATER])
    try:
        asyncio.run(pipeline.up(settings, timeout_s=30))
        assert asyncio.run(pipeline.up(settings)) == []
        (orphan,) = [r.pid for r in pipeline.status(settings)]
        sup = pipeline.supervisor_pid(settings)
        assert sup is not None and orphan is not None
        os.killpg(sup, signal.SIGKILL)
        wait_for(lambda: pipeline.supervisor_pid(settings) is None or None)
        # The orphaned worker is stopped and a supervised one started in its place.
        assert asyncio.run(pipeline.up(settings, timeout_s=30)) == ["history"]
        assert not pid_alive(orphan)
        (row,) = pipeline.status(settings)
        assert row.pid not in (None, orphan) and row.ready
    finally:
        pipeline.down(settings)


def wait_for(probe, timeout_s: float = 20.0):  # type: ignore[no-untyped-def]
    """probe()'s first truthy value (StopIteration counts as not yet)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if found := probe():
                return found
        except StopIteration:
            pass
        time.sleep(0.1)
    raise AssertionError("condition not met in time")
