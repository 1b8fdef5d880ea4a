"""The sandbox sites served on a free loopback port for a test (stopped after it)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from environments.app import start_sandbox
from infra.procs import free_port


@asynccontextmanager
async def serving_sandbox() -> AsyncIterator[str]:
    """The sandbox's base URL while the block runs."""
    port = free_port()
    runner = await start_sandbox("127.0.0.1", port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await asyncio.wait_for(runner.cleanup(), 30)
