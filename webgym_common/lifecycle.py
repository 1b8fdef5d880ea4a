"""How a pipeline process ends: SIGTERM or SIGINT cancels its main task, whose cleanup runs."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable


async def run_until_signalled(work: Awaitable[None]) -> None:
    """Await `work`; on SIGTERM/SIGINT cancel it (its `finally` blocks hand over and leave)."""
    main = asyncio.current_task()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, main.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await work
