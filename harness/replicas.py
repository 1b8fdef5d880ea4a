"""More vLLM servers like the stack's, for tests and benches of several replicas.

A `Replica` is a real vLLM server (the stack's model and settings) on a port of its own,
started and stopped by its owner; `listed` reads what a replica serves from its /v1/models.
"""

from __future__ import annotations

import asyncio
import time

import httpx

from infra import vllm_server
from infra.procs import ManagedProcess, free_port
from webgym_common.config import Settings


class Replica:
    """A vLLM server like the stack's, on a port of its own, started and stopped here."""

    def __init__(self, base: Settings, name: str) -> None:
        port = free_port()
        self.settings = base.model_copy(update={
            "vllm": base.vllm.model_copy(update={"port": port})})
        self.url = f"http://{base.infra.host}:{port}/v1"
        self.proc = ManagedProcess(name, base.infra.data_dir)

    async def start(self) -> None:
        """Started and answering, or an AssertionError with its log's tail."""
        await asyncio.to_thread(vllm_server.start, self.settings, self.proc)
        deadline = time.monotonic() + self.settings.vllm.start_timeout_s
        while not await vllm_server.healthy(self.settings):
            if self.proc.pid() is None or time.monotonic() > deadline:
                raise AssertionError(f"{self.proc.name} did not start:\n"
                                     f"{self.proc.log_tail(40)}")
            await asyncio.sleep(1)

    def stop(self) -> None:
        self.proc.stop(30)


async def listed(url: str, key: str) -> dict[str, str]:
    """A replica's /v1/models: served name -> the directory it was loaded from ({}: down)."""
    try:
        async with httpx.AsyncClient(timeout=10) as http:
            resp = await http.get(f"{url}/models", headers={"Authorization": f"Bearer {key}"})
    except httpx.TransportError:
        return {}
    resp.raise_for_status()
    return {m["id"]: m["root"] for m in resp.json()["data"]}
