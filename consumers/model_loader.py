"""The model loader: each trained LoRA adapter hot-loaded into vLLM under a name of its own.

Delivery: each version served at least once, in order, never announced before vLLM lists
it; no consumer group, nothing committed. The loader's state is its own compacted output:
at start it reads webgym.models.served to its end (the version served per model), then
webgym.models (compacted, one partition) from the beginning, and marks itself ready. It
loads the newest version of each model newer than the one served (an older one would be
superseded at once), then every newer ModelVersion that comes. Loading is idempotent
because a name is never reused: version N of a model is served as `<model>-v<N>` (vLLM
has served stale weights under a reused name). A loader killed after vLLM took an
adapter, before ModelServed was published, loads it again when restarted; vLLM answers
"already loaded", /v1/models is checked, and ModelServed is published. So a version may
be announced twice, never one older than a version already announced.

A version: adapter_config.json and adapter_model.safetensors from the checkpoint prefix
in the object store, each checked against the sha256 the trainer published in the
ModelVersion (consumers.checkpoints), into <data_dir>/adapters/<served name>/<content
digest>/ (renamed into place whole; vLLM must see the same path: in compose a shared
volume), POST
/v1/load_lora_adapter, GET /v1/models until it lists the name from that path
(model_loader.load_timeout_s), and only then ModelServed (key model name) on
webgym.models.served: the policy switches on that, never on the ModelVersion. A name vLLM
already serves from another path holds other weights (a server that outlived a reset of
the topics): that version is refused, loudly. Versions older than the previous two are
unloaded after a new one is served, to bound the server's memory.

Failures: vLLM or MinIO down or slow (connection errors, timeouts, 408/429/502/503/504,
a name not listed in time) are tried again with backoff for as long as it takes: a
version is never skipped because the server was away. vLLM rejecting the adapter (any
other 4xx, or 500: its engine could not load it) or a checkpoint missing its files: an
error is logged, nothing is published, the loader goes on (a restarted loader tries that
version again). A file that differs from its published digest, a version published
without digests (unless model_loader.require_digests is off) or a model name that is not
one (webgym_common.versions.MODEL_NAME; nothing is built from it) is refused the same way,
before anything is written or vLLM is asked. Kafka failing the publish ends the process;
restarted, it loads again
("already loaded") and publishes. Every 30 s the served names are checked, and loaded
again if vLLM lost them (a restarted server forgets its runtime adapters).

Full checkpoints (finetuning_type "full") cannot be hot-loaded into the CPU server: the
loader logs an error and publishes nothing. On the GPU path a full checkpoint is served
by restarting vLLM on it (`--model <checkpoint> --served-model-name <model>-v<N>`,
compose's gpu profile), and whoever restarts it announces the ModelServed.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import logging
import os
import shutil
import time
from collections.abc import Awaitable, Iterable, Mapping
from enum import StrEnum
from pathlib import Path

import httpx
import urllib3
from minio.error import S3Error

from consumers.checkpoints import DigestMismatch, check, sha256_hex
from webgym_common.config import Settings
from webgym_common.events import Event, ModelServed, ModelVersion
from webgym_common.lifecycle import mark_ready, run_until_signalled
from webgym_common.objectstore import ObjectStore, ObjectStoreError
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.stream.readers import read_compacted, read_to_end
from webgym_common.topics import Topic
from webgym_common.versions import BadModelName, served_name

log = logging.getLogger(__name__)

ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
KEEP_LOADED = 3  # the served version and the two before it (decisions in flight use them)
CHECK_EVERY_S = 30.0
MAX_BACKOFF_S = 30.0
TRANSIENT = (httpx.TransportError, ObjectStoreError, urllib3.exceptions.HTTPError, OSError)


class Plan(StrEnum):
    LOAD = "load"
    BASE = "the base model's weights (a run with nothing to train on)"
    OLD = "not newer than the version served"
    FULL = "a full checkpoint"


class Outcome(StrEnum):
    LOADED = "loaded"
    ALREADY = "already loaded"
    TRANSIENT = "transient"
    REJECTED = "rejected"


def plan(mv: ModelVersion, served: Mapping[str, int]) -> Plan:
    if mv.version <= served.get(mv.model_name, 0):
        return Plan.OLD
    if not mv.checkpoint_uri:
        return Plan.BASE
    return Plan.LOAD if mv.finetuning_type == "lora" else Plan.FULL


def newest(events: Iterable[Event]) -> list[ModelVersion]:
    """The newest ModelVersion of each model, in the order the models first appear."""
    out: dict[str, ModelVersion] = {}
    for e in events:
        if isinstance(e, ModelVersion):
            known = out.get(e.model_name)
            if known is None or e.version > known.version:
                out[e.model_name] = e
    return list(out.values())


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


def to_unload(listed: Iterable[str], model_name: str, current: int,
              keep: int = KEEP_LOADED) -> list[str]:
    """The model's served names older than the `keep` newest up to `current`, oldest first."""
    prefix = f"{model_name}-v"
    versions = sorted(int(n[len(prefix):]) for n in listed
                      if n.startswith(prefix) and n[len(prefix):].isdigit())
    return [served_name(model_name, v) for v in versions if v <= current - keep]


def adapter_uris(checkpoint_uri: str) -> dict[str, str]:
    """File name -> its s3:// URI under the checkpoint prefix."""
    return {f: f"{checkpoint_uri.rstrip('/')}/{f}" for f in ADAPTER_FILES}


def content_digest(files: Mapping[str, bytes]) -> str:
    digest = hashlib.sha256()
    for name in sorted(files):
        digest.update(f"{name}\0{len(files[name])}\0".encode())
        digest.update(files[name])
    return digest.hexdigest()[:16]


def backoff_s(attempt: int) -> float:
    return float(min(MAX_BACKOFF_S, 0.5 * 2 ** min(attempt, 16)))


class ModelServer:
    """vLLM's model routes; `base_url` is the OpenAI /v1 root."""

    def __init__(self, base_url: str, api_key: str, timeout_s: float,
                 tls_verify: bool = True) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.AsyncClient(base_url=base_url.rstrip("/") + "/", headers=headers,
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
            log.warning("unloading %s: HTTP %d %s", name, resp.status_code, resp.text)


async def fetch_adapter(store: ObjectStore, checkpoint_uri: str, under: Path,
                        digests: Mapping[str, str] | None) -> Path:
    """The adapter's files in `under`/<their digest>/, a directory renamed into place whole,
    once each file matched its published digest (DigestMismatch before anything is written;
    None: not checked)."""
    files = {name: await store.get_blob(uri) for name, uri in adapter_uris(checkpoint_uri).items()}
    if digests is not None:
        check({name: sha256_hex(data) for name, data in files.items()}, digests, checkpoint_uri)
    into = under / content_digest(files)
    if into.is_dir():
        return into
    part = under / f".part-{os.getpid()}"
    shutil.rmtree(part, ignore_errors=True)
    part.mkdir(parents=True)
    for name, data in files.items():
        await asyncio.to_thread((part / name).write_bytes, data)
    os.replace(part, into)
    return into


class Loader:
    """Gets versions served by vLLM, trying again while it or the object store is away."""

    def __init__(self, settings: Settings, store: ObjectStore, server: ModelServer) -> None:
        self.store, self.server = store, server
        self.adapters = Path(settings.infra.data_dir) / "adapters"
        self.timeout_s = settings.model_loader.load_timeout_s
        self.require_digests = settings.model_loader.require_digests

    async def load(self, model_name: str, version: int, checkpoint_uri: str,
                   digests: Mapping[str, str]) -> float | None:
        """Milliseconds until vLLM listed the version, or None if it was refused."""
        try:
            name, started = served_name(model_name, version), time.perf_counter()
        except BadModelName as err:
            log.error("%s v%d NOT served: %s", model_name[:120], version, err)
            return None
        checked: Mapping[str, str] | None = digests
        if not digests and not self.require_digests:
            log.warning("%s: published without file digests; loaded UNCHECKED "
                        "(model_loader.require_digests is off)", name)
            checked = None
        for attempt in itertools.count():
            try:
                outcome, why = await self._try(name, checkpoint_uri, checked)
            except DigestMismatch as err:  # never loaded: the files are not the trainer's
                outcome, why = Outcome.REJECTED, str(err)
            except S3Error as err:  # a missing file is not coming; MinIO failing may pass
                missing = err.code in ("NoSuchKey", "NoSuchBucket", "NoSuchObject")
                outcome = Outcome.REJECTED if missing else Outcome.TRANSIENT
                why = f"the checkpoint {checkpoint_uri}: {err}"
            except (*TRANSIENT, httpx.HTTPStatusError) as err:
                outcome, why = Outcome.TRANSIENT, f"{type(err).__name__}: {err}"
            if outcome is Outcome.REJECTED:
                log.error("%s NOT served: %s", name, why)
                return None
            if outcome is not Outcome.TRANSIENT:
                return (time.perf_counter() - started) * 1000
            log.warning("loading %s: %s; again in %.1fs", name, why, backoff_s(attempt))
            await asyncio.sleep(backoff_s(attempt))
        raise AssertionError("unreachable")

    async def _try(self, name: str, checkpoint_uri: str, digests: Mapping[str, str] | None
                   ) -> tuple[Outcome, str]:
        path = await fetch_adapter(self.store, checkpoint_uri, self.adapters / name, digests)
        outcome, why = await self.server.load(name, path)
        if outcome not in (Outcome.LOADED, Outcome.ALREADY):
            return outcome, why
        return listed_outcome(outcome, await self.server.root_of(name, self.timeout_s), path)

    async def unload_old(self, model_name: str, current: int) -> None:
        for name in to_unload(await self.server.listed(), model_name, current):
            await self.server.unload(name)
            shutil.rmtree(self.adapters / name, ignore_errors=True)
            log.info("unloaded %s", name)

    async def reload_lost(self, served: Iterable[ModelServed]) -> None:
        listed = await self.server.listed()
        for s in served:
            if s.checkpoint_uri and s.served_name not in listed:  # the base is always there
                log.warning("%s is not served any more (vLLM restarted?): loading it again",
                            s.served_name)
                await self.load(s.model_name, s.version, s.checkpoint_uri, s.file_sha256)


class Serving:
    """What is served per model, and the step from a ModelVersion to its ModelServed."""

    def __init__(self, loader: Loader, producer: EventProducer,
                 served: dict[str, ModelServed], base_name: str) -> None:
        self.loader, self.producer, self.served = loader, producer, served
        self.base_name = base_name  # what vLLM serves the base model as

    async def handle(self, mv: ModelVersion) -> None:
        # decide
        try:
            name = served_name(mv.model_name, mv.version)
        except BadModelName as err:  # a poison event: refused, never a path
            log.error("a ModelVersion NOT served: %s", err)
            return
        what = plan(mv, {k: s.version for k, s in self.served.items()})
        if what is Plan.FULL:
            log.error("%s is a full checkpoint: vLLM on the CPU cannot hot-load it (the GPU "
                      "path restarts vLLM on the new checkpoint); nothing served", name)
            return
        if what is Plan.OLD:
            log.info("%s: %s, not loaded", name, what)
            return
        if what is Plan.BASE:  # nothing to load: the version is served as the base model
            name, load_ms = self.base_name, 0.0
        else:
            loaded = await self.loader.load(mv.model_name, mv.version, mv.checkpoint_uri,
                                            mv.file_sha256)
            if loaded is None:
                return
            load_ms = loaded
        # publish, only now that vLLM lists the name
        event = ModelServed(model_name=mv.model_name, version=mv.version, served_name=name,
                            checkpoint_uri=mv.checkpoint_uri, load_ms=load_ms,
                            file_sha256=mv.file_sha256)
        await self.producer.publish(Topic.MODELS_SERVED, mv.model_name, event)
        self.served[mv.model_name] = event
        log.info("serving %s (%s), loaded in %.0f ms", name, mv.checkpoint_uri, load_ms)
        await guarded(self.loader.unload_old(mv.model_name, mv.version), "unloading old")


async def serve_models(settings: Settings) -> None:
    server = ModelServer(settings.policy.base_url, settings.policy.api_key,
                         settings.model_loader.load_timeout_s, settings.policy.tls_verify)
    loader = Loader(settings, ObjectStore(settings.s3), server)
    async with EventProducer(settings, client_id="model-loader") as producer, server.http:
        table = await read_compacted(settings, Topic.MODELS_SERVED, producer)
        serving = Serving(loader, producer,
                          {k: e for k, e in table.items() if isinstance(e, ModelServed)},
                          settings.policy.model)
        async with EventConsumer(settings, [Topic.MODELS], None, producer,
                                 client_id="model-loader") as models:
            backlog = newest(r.event for r in await read_to_end(models))
            mark_ready(f"model loader: {len(serving.served)} served, {len(backlog)} published")
            for mv in backlog:
                await serving.handle(mv)
            checked = 0.0
            while True:
                for received in await models.poll(timeout_ms=1000):
                    if isinstance(received.event, ModelVersion):
                        await serving.handle(received.event)
                if time.monotonic() - checked > CHECK_EVERY_S:
                    checked = time.monotonic()
                    await guarded(loader.reload_lost(list(serving.served.values())),
                                  "checking")


async def guarded(work: Awaitable[None], what: str) -> None:
    """Housekeeping that may fail while vLLM is away: logged, done again later."""
    try:
        await work
    except (*TRANSIENT, httpx.HTTPStatusError) as err:
        log.warning("%s the served models: %s: %s", what, type(err).__name__, err)


async def run_model_loader(settings: Settings) -> None:
    """Run until SIGTERM/SIGINT."""
    await run_until_signalled(serve_models(settings))
