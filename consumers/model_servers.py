"""The model servers the model loader keeps in step: each vLLM replica's model routes
(policy.replicas; one server unless set), what each of them lacks, and what their answers mean.

vLLM's production stack reconciles LoRA adapters the same way: list each replica's
/v1/models, load what is missing, take "already loaded" as done.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Collection, Iterable, Mapping
from enum import StrEnum
from pathlib import Path

import httpx

log = logging.getLogger("consumers.model_loader")


class Outcome(StrEnum):
    LOADED = "loaded"
    ALREADY = "already loaded"
    TRANSIENT = "transient"
    REJECTED = "rejected"


def load_outcome(status: int, body: str) -> Outcome:
    """What vLLM's answer to POST /v1/load_lora_adapter means."""
    if status == 200:
        return Outcome.LOADED
    if status == 400 and "already been loaded" in body:
        return Outcome.ALREADY
    if status in (408, 429) or status > 500:
        return Outcome.TRANSIENT
    return Outcome.REJECTED  # 500 here is the engine failing to load the adapter


def listed_outcome(outcome: Outcome, root: str | None, path: Path) -> tuple[Outcome, str]:
    """A load's outcome once /v1/models says where the name is served from (None: not yet)."""
    if root is None:
        return Outcome.TRANSIENT, "not listed by /v1/models in time"
    if root != str(path):
        return Outcome.REJECTED, (f"vLLM serves other weights under this name (from {root}); "
                                  "names are never reused: restart vLLM or rename the model")
    return outcome, "listed"


def missing_loads(wanted: Collection[str],
                  listed: Mapping[str, Collection[str]]) -> dict[str, set[str]]:
    """Replica -> the wanted names it does not list, for each replica that lacks any.

    `listed` holds the replicas that answered /v1/models (one that did not is not in it:
    nothing can be loaded into it now)."""
    lacking = {replica: set(wanted) - set(names) for replica, names in listed.items()}
    return {replica: names for replica, names in lacking.items() if names}


class ModelServer:
    """One replica's model routes; `url` is its OpenAI /v1 root."""

    def __init__(self, base_url: str, api_key: str, timeout_s: float,
                 tls_verify: bool = True) -> None:
        self.url = base_url.rstrip("/")
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.AsyncClient(base_url=self.url + "/", headers=headers,
                                      timeout=timeout_s, verify=tls_verify)

    async def listed(self) -> dict[str, str]:
        """Served name -> where it was loaded from (the base model's own directory for it)."""
        resp = await self.http.get("models", timeout=10)
        resp.raise_for_status()
        return {m["id"]: m.get("root") or "" for m in resp.json()["data"]}

    async def load(self, name: str, path: Path) -> tuple[Outcome, str]:
        resp = await self.http.post("load_lora_adapter",
                                    json={"lora_name": name, "lora_path": str(path)})
        return load_outcome(resp.status_code, resp.text), f"HTTP {resp.status_code} {resp.text}"

    async def root_of(self, name: str, timeout_s: float) -> str | None:
        """Where `name` is served from, once /v1/models lists it (None: not in time)."""
        deadline = time.monotonic() + timeout_s
        while (root := (await self.listed()).get(name)) is None:
            if time.monotonic() > deadline:
                return None
            await asyncio.sleep(0.2)
        return root

    async def unload(self, name: str) -> None:
        resp = await self.http.post("unload_lora_adapter", json={"lora_name": name})
        if resp.status_code not in (200, 404):
            log.warning("unloading %s from %s: HTTP %d %s", name, self.url, resp.status_code,
                        resp.text)


async def listings(servers: Iterable[ModelServer],
                   failing: tuple[type[BaseException], ...]) -> dict[str, dict[str, str]]:
    """Each replica's /v1/models (url -> served name -> root), asked at once; a replica that
    fails with one of `failing` is left out, with a warning."""
    async def one(server: ModelServer) -> dict[str, str] | None:
        try:
            return await server.listed()
        except failing as err:
            log.warning("replica %s does not answer /v1/models: %s: %s", server.url,
                        type(err).__name__, err)
            return None

    servers = list(servers)
    answers = await asyncio.gather(*(one(s) for s in servers))
    return {s.url: listed for s, listed in zip(servers, answers, strict=True)
            if listed is not None}
