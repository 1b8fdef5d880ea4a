"""Browser worker processes in a test: waiting until they own their partitions."""

from __future__ import annotations

import asyncio


async def wait_until_owning(*workers, timeout_s: float = 60) -> None:
    async with asyncio.timeout(timeout_s):
        while not all(w.owns_partitions() for w in workers):  # noqa: ASYNC110 (a log file)
            await asyncio.sleep(0.2)
