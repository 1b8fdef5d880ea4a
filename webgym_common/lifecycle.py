"""How a pipeline process ends: SIGTERM or SIGINT cancels its main task, whose cleanup runs."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Awaitable
from pathlib import Path

READY_FILE_ENV = "WEBGYM_READY_FILE"


async def run_until_signalled(work: Awaitable[None]) -> None:
    """Await `work`; on SIGTERM/SIGINT cancel it (its `finally` blocks hand over and leave)."""
    main = asyncio.current_task()
    if main is None:
        raise RuntimeError("run_until_signalled must be awaited inside a task")
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, main.cancel)
    with contextlib.suppress(asyncio.CancelledError):
        await work


def mark_ready(detail: str = "ready") -> None:
    """Tell whoever started this process that it is serving (its consumer owns partitions).

    The launcher names the file in WEBGYM_READY_FILE; without it this does nothing.
    """
    path = os.environ.get(READY_FILE_ENV)
    if path:
        Path(path).write_text(detail + "\n")
