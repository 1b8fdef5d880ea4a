import gc
from collections.abc import Iterator

import pytest

from webgym_common import lifecycle


class Node:
    def __init__(self) -> None:
        self.me = self


def walked(obj: object) -> bool:
    return any(o is obj for o in gc.get_objects())


@pytest.fixture
def fresh_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(lifecycle, "_heap_frozen", False)
    monkeypatch.delenv(lifecycle.READY_FILE_ENV, raising=False)
    gc.unfreeze()
    yield
    gc.unfreeze()


def test_ready_freezes_the_startup_heap_once(fresh_process: None) -> None:
    startup = Node()
    lifecycle.mark_ready()
    assert not walked(startup)  # made before serving: no collection walks it
    later = Node()
    lifecycle.mark_ready("again, after a rebalance")
    assert walked(later)  # a second freeze would keep the cycles made since the first


def test_ready_writes_the_file_the_launcher_names(fresh_process: None, tmp_path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    ready = tmp_path / "ready"
    monkeypatch.setenv(lifecycle.READY_FILE_ENV, str(ready))
    lifecycle.mark_ready("policy owns 6 partitions")
    assert ready.read_text() == "policy owns 6 partitions\n"
