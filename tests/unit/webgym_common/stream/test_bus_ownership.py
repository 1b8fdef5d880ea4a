"""Ownership (bus.py): a member rebuilds its state whenever partitions come in; ready once."""

from __future__ import annotations

from pathlib import Path

import pytest
from aiokafka import TopicPartition

from webgym_common.lifecycle import READY_FILE_ENV
from webgym_common.stream.bus import Ownership


async def test_every_assignment_makes_the_state_stale(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ready = tmp_path / "ready"
    monkeypatch.setenv(READY_FILE_ENV, str(ready))
    ownership = Ownership("history")
    assert ownership.stale  # nothing is folded before the first rebuild
    await ownership.on_partitions_assigned(set())  # joined, with nothing to fold yet
    assert ready.read_text() == "history owns 0 partitions\n"
    ownership.stale = False
    await ownership.on_partitions_revoked({TopicPartition("t", 0)})
    assert not ownership.stale
    ready.unlink()
    await ownership.on_partitions_assigned({TopicPartition("t", 0)})
    assert ownership.stale
    assert not ready.exists()  # ready is said once
