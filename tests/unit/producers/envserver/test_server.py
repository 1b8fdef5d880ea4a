"""The env server's bookkeeping without HTTP: its catalog, read once however many wait."""

from __future__ import annotations

import asyncio

import pytest

from producers.envserver.server import BadRequest, EnvServer
from tests.unit.producers.envserver.fakes import TASKS, FakeProducer
from webgym_common.config import load_settings
from webgym_common.events import Task


class CountingCatalog:
    """The catalog loader, counting its reads (each is a read of all of webgym.tasks)."""

    def __init__(self) -> None:
        self.reads = 0

    async def __call__(self) -> list[Task]:
        self.reads += 1
        await asyncio.sleep(0.01)  # a read takes a while: resets pile up behind it
        return list(reversed(TASKS))


async def test_an_idx_out_of_range_is_refused_without_reading_the_catalog_again() -> None:
    read = CountingCatalog()
    server = EnvServer(load_settings(), FakeProducer(), read)  # type: ignore[arg-type]
    assert (await server.catalog(0)).task_id == "shop-001" and read.reads == 1
    for idx in (len(TASKS), 10**9, -1) * 50:
        with pytest.raises(BadRequest, match="out of range"):
            await server.catalog(idx)
    assert read.reads == 1
    assert (await server.catalog(len(TASKS) - 1)).task_id == "shop-002"


async def test_a_stale_catalog_is_read_once_however_many_resets_wait_for_it() -> None:
    read = CountingCatalog()
    server = EnvServer(load_settings(envserver={"catalog_refresh_s": 3600}), FakeProducer(),
                       read)  # type: ignore[arg-type]
    results = await asyncio.gather(*(server.catalog(i % 4) for i in range(40)),
                                   return_exceptions=True)
    assert read.reads == 1 and server.catalog_reads == 1
    assert sum(isinstance(r, BadRequest) for r in results) == 20  # idx 2 and 3 of 2 tasks
    server.tasks_read_at -= 3600  # an hour on: read again, once
    await asyncio.gather(*(server.catalog(0) for _ in range(10)))
    assert read.reads == 2
