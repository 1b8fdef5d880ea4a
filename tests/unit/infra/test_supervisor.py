"""infra/supervisor.py: when a dead process is restarted, and how its death reads."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from infra import supervisor
from infra.supervisor import Child, describe_exit, failures_in_a_row, restart_delay

SPEC = {"backoff_s": 1.0, "backoff_max_s": 30.0, "reset_after_s": 60.0}


def test_backoff_doubles_from_one_second_up_to_thirty() -> None:
    assert [restart_delay(n, 1.0, 30.0) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]
    assert restart_delay(0, 1.0, 30.0) == 1.0
    assert restart_delay(1000, 1.0, 30.0) == 30.0  # no overflow


def test_a_process_that_ran_long_enough_starts_over() -> None:
    assert failures_in_a_row(0, 0.5, 60.0) == 1
    assert failures_in_a_row(3, 5.0, 60.0) == 4  # died quickly again: back off more
    assert failures_in_a_row(5, 60.0, 60.0) == 1  # ran for a minute: a fresh failure


def test_exits_read_as_people_say_them() -> None:
    assert describe_exit(None) == "-"
    assert describe_exit(0) == "exit 0"
    assert describe_exit(3) == "exit 3"
    assert describe_exit(-signal.SIGKILL) == "SIGKILL"
    assert describe_exit(-200) == "signal 200"


def child(tmp_path: Path, code: str) -> Child:
    return Child("x", [sys.executable, "-c", code], tmp_path / "x.pid", tmp_path / "x.log",
                 tmp_path / "x.ready")


def test_a_dead_child_is_restarted_after_its_backoff(tmp_path: Path) -> None:
    c = child(tmp_path, "raise SystemExit(3)")
    assert supervisor._step([c], SPEC, now=100.0)  # first start: not a restart
    assert c.popen is not None and c.restarts == 0
    first = c.popen.pid
    assert int(c.pid_file.read_text()) == first
    c.popen.wait(10)
    c.ready_file.write_text("ready")  # as if it had said so before dying
    assert supervisor._step([c], SPEC, now=100.5)  # reaped, restart planned at 101.5
    assert c.popen is None and c.last_exit == 3 and c.failures == 1
    assert not c.ready_file.exists()
    assert not supervisor._step([c], SPEC, now=101.0)  # not yet
    assert supervisor._step([c], SPEC, now=101.5)
    assert c.popen is not None and c.popen.pid != first and c.restarts == 1
    assert c.last_restart_at is not None
    c.popen.wait(10)
    supervisor._step([c], SPEC, now=102.0)  # second quick death: two seconds
    assert c.failures == 2 and c.next_start_at == 104.0


def test_state_reads_back_and_a_missing_file_is_empty(tmp_path: Path) -> None:
    c = child(tmp_path, "pass")
    c.restarts, c.last_exit = 2, -9
    supervisor.write_state(tmp_path / "s.json", [c])
    assert supervisor.read_state(tmp_path / "s.json") == {
        "x": {"pid": None, "restarts": 2, "last_exit": -9, "last_restart_at": None}}
    assert supervisor.read_state(tmp_path / "nothing.json") == {}
