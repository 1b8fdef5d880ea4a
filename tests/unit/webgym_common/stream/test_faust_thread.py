"""faust_thread.py: a seek runs on the consumer's own thread, queued like faust's own calls."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from webgym_common.stream import faust_thread


class Thread:
    """Stands in for faust's consumer thread: runs what is queued, in turn, and logs it."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def call_thread(self, fun: Callable[..., Any], *args: Any) -> Any:
        self.log.append("queued")
        return fun(*args)

    def seek(self, tp: Any, offset: int) -> None:
        self.log.append(f"seek {tp} {offset}")


class Consumer:
    def __init__(self, thread: Thread | None, log: list[str]) -> None:
        if thread is not None:
            self._thread = thread
        self._read_offset: dict[Any, int | None] = {}
        self.log = log

    def seek(self, tp: Any, offset: int) -> Awaitable[None]:  # faust's own: from the app's thread
        self.log.append(f"direct seek {tp} {offset}")

        async def done() -> None:
            return None
        return done()


async def test_a_seek_is_queued_on_the_consumers_thread_and_the_read_offset_moves() -> None:
    log: list[str] = []
    consumer = Consumer(Thread(log), log)
    await faust_thread.seek(consumer, "t.obs[1]", 59)
    await faust_thread.seek(consumer, "t.obs[2]", 0)
    assert log == ["queued", "seek t.obs[1] 59", "queued", "seek t.obs[2] 0"]
    assert consumer._read_offset == {"t.obs[1]": 59, "t.obs[2]": None}  # as Consumer.seek


async def test_a_consumer_without_a_thread_seeks_itself() -> None:
    log: list[str] = []
    await faust_thread.seek(Consumer(None, log), "t.obs[1]", 3)
    assert log == ["direct seek t.obs[1] 3"]
