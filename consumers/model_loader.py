"""The model loader: each trained LoRA adapter hot-loaded into every vLLM replica under a
name of its own.

Delivery: each version served at least once, in order, never announced before every
replica lists it; no consumer group, nothing committed. The replicas are policy.replicas
(unset: policy.base_url alone, one server), and ModelServed waits for every one of them,
one that is down included: while it is away the others load the version at once and the
policy stays on the version before, which all of them serve; a replica taken out of the
setting (a loader restarted without it) is not waited for. The loader's state is its own
compacted output: at start it reads webgym.models.served to its end (the version served
per model), then webgym.models (compacted, one partition) from the beginning, and marks
itself ready. It loads the newest version of each model newer than the one served (an
older one would be superseded at once), then every newer ModelVersion that comes. Loading
is idempotent because a name is never reused: version N of a model is served as
`<model>-v<N>` (vLLM has served stale weights under a reused name). A loader killed after
a replica took an adapter, before ModelServed was published, loads it again when
restarted; that replica lists it already (or answers "already loaded"), and ModelServed is
published. So a version may be announced twice, never one older than a version already
announced.

A version: adapter_config.json and adapter_model.safetensors from the checkpoint prefix
in the object store, each checked against the sha256 the trainer published in the
ModelVersion (consumers.checkpoints), into <data_dir>/adapters/<served name>/<content
digest>/ (renamed into place whole; every replica must see the same path: in compose a
shared volume). Then rounds over the replicas (consumers.model_servers): each round lists
every replica's /v1/models and, on each replica that does not list the name
(`missing_loads`), POSTs /v1/load_lora_adapter and waits until /v1/models lists the name
from that path (model_loader.load_timeout_s). Only when every replica lists it, in the
same round, is ModelServed (key model name) published on webgym.models.served: the policy
switches on that, never on the ModelVersion, and may then ask any replica for the name. A
name a replica already serves from another path holds other weights (a server that
outlived a reset of the topics): that version is refused, loudly. Versions older than the
previous two are unloaded from every replica after a new one is served, to bound their
memory.

Failures: a replica or MinIO down or slow (connection errors, timeouts,
408/429/502/503/504, a name not listed in time) is tried again with backoff for as long as
it takes: a version is never skipped because a server was away; the replicas are tried
side by side. A replica rejecting the adapter (any other 4xx, or 500: its engine could not
load it) or a checkpoint missing its files: an error is logged, nothing is published, the
loader goes on (a restarted loader tries that version again). A file that differs from its
published digest, a version published without digests (unless model_loader.require_digests
is off) or a model name that is not one (webgym_common.versions.MODEL_NAME; nothing is
built from it) is refused the same way, before anything is written or a replica is asked.
Kafka failing the publish ends the process; restarted, it loads again ("already loaded")
and publishes. Every model_loader.check_every_s (30 s) each replica's /v1/models is
checked and the served version of each model is loaded into it if it lacks it
(`Loader.reconcile`; also while a version waits for a replica that is down): a replica
that starts or restarts later (vLLM forgets runtime adapters) gets it without a new
version.

Full checkpoints (finetuning_type "full") cannot be hot-loaded into the CPU server: the
loader logs an error and publishes nothing. On the GPU path a full checkpoint is served
by restarting vLLM on it (`--model <checkpoint> --served-model-name <model>-v<N>`,
compose's gpu profile), and whoever restarts it announces the ModelServed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import logging
import os
import shutil
import time
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from enum import StrEnum
from pathlib import Path

import httpx
import urllib3
from minio.error import S3Error

from consumers.checkpoints import DigestMismatch, check, sha256_hex
from consumers.model_servers import (
    ModelServer,
    Outcome,
    listed_outcome,
    listings,
    missing_loads,
)
from webgym_common.config import Settings
from webgym_common.events import Event, ModelServed, ModelVersion
from webgym_common.lifecycle import mark_ready, run_until_signalled
from webgym_common.objectstore import MISSING, ObjectStore, ObjectStoreError
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.stream.readers import read_compacted, read_to_end
from webgym_common.topics import Topic
from webgym_common.versions import BadModelName, served_name

log = logging.getLogger(__name__)

ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
KEEP_LOADED = 3  # the served version and the two before it (decisions in flight use them)
MAX_BACKOFF_S = 30.0
TRANSIENT = (httpx.TransportError, ObjectStoreError, urllib3.exceptions.HTTPError, OSError)
AWAY = (*TRANSIENT, httpx.HTTPStatusError)  # a replica away, starting or overloaded


class Plan(StrEnum):
    LOAD = "load"
    BASE = "the base model's weights (a run with nothing to train on)"
    OLD = "not newer than the version served"
    FULL = "a full checkpoint"


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
    """Gets versions served by every replica, trying again while one of them or the object
    store is away."""

    def __init__(self, settings: Settings, store: ObjectStore,
                 servers: Sequence[ModelServer]) -> None:
        self.store = store
        self.servers = {s.url: s for s in servers}
        self.adapters = Path(settings.infra.data_dir) / "adapters"
        self.timeout_s = settings.model_loader.load_timeout_s
        self.require_digests = settings.model_loader.require_digests
        self.check_every_s, self.checked = settings.model_loader.check_every_s, 0.0

    async def load(self, model_name: str, version: int, checkpoint_uri: str,
                   digests: Mapping[str, str], served: Iterable[ModelServed] = ()
                   ) -> float | None:
        """Milliseconds until every replica listed the version, or None if it was refused.
        While it waits for a replica, the periodic check of the `served` versions goes on."""
        try:
            name, started = served_name(model_name, version), time.perf_counter()
        except BadModelName as err:
            log.error("%s v%d NOT served: %s", model_name[:120], version, err)
            return None
        path = await self._fetch(name, checkpoint_uri, digests)
        if path is None:
            return None
        for attempt in itertools.count():
            # Every replica listed again each round: one that restarted since lost it.
            listed = await listings(self.servers.values(), AWAY)
            urls = list(listed)
            tries = await asyncio.gather(*(self._onto(u, name, path, listed[u].get(name))
                                           for u in urls))
            outcomes = dict(zip(urls, tries, strict=True))
            if refused := {u: why for u, (o, why) in outcomes.items() if o is Outcome.REJECTED}:
                log.error("%s NOT served: %s", name, "; ".join(f"{u}: {why}"
                                                                for u, why in refused.items()))
                return None
            waiting = {u: why for u, (o, why) in outcomes.items() if o is Outcome.TRANSIENT}
            waiting |= {u: "not answering" for u in self.servers if u not in listed}
            if not waiting:
                return (time.perf_counter() - started) * 1000
            log.warning("loading %s: waiting for %s; again in %.1fs (announced once every "
                        "replica lists it)", name,
                        "; ".join(f"{u}: {why}" for u, why in waiting.items()),
                        backoff_s(attempt))
            await asyncio.sleep(backoff_s(attempt))
            await guarded(self.check_due(served), "checking")
        raise AssertionError("unreachable")

    async def _fetch(self, name: str, checkpoint_uri: str,
                     digests: Mapping[str, str]) -> Path | None:
        """The adapter's checked files on disk, tried again while the object store is away
        (None: refused, logged)."""
        checked: Mapping[str, str] | None = digests
        if not digests and not self.require_digests:
            log.warning("%s: published without file digests; loaded UNCHECKED "
                        "(model_loader.require_digests is off)", name)
            checked = None
        for attempt in itertools.count():
            try:
                return await fetch_adapter(self.store, checkpoint_uri, self.adapters / name,
                                           checked)
            except DigestMismatch as err:  # never loaded: the files are not the trainer's
                log.error("%s NOT served: %s", name, err)
                return None
            except S3Error as err:  # a missing file is not coming; MinIO failing may pass
                why = f"the checkpoint {checkpoint_uri}: {err}"
                if err.code in MISSING:
                    log.error("%s NOT served: %s", name, why)
                    return None
            except TRANSIENT as err:
                why = f"{type(err).__name__}: {err}"
            log.warning("fetching %s: %s; again in %.1fs", name, why, backoff_s(attempt))
            await asyncio.sleep(backoff_s(attempt))
        raise AssertionError("unreachable")

    async def _onto(self, url: str, name: str, path: Path,
                    root: str | None) -> tuple[Outcome, str]:
        """One try at one replica serving `name` from `path` (`root`: where it lists the name
        from; None: not listed, so it is loaded)."""
        if root is not None:
            return listed_outcome(Outcome.ALREADY, root, path)
        server = self.servers[url]
        try:
            outcome, why = await server.load(name, path)
            if outcome not in (Outcome.LOADED, Outcome.ALREADY):
                return outcome, why
            outcome, why = listed_outcome(outcome, await server.root_of(name, self.timeout_s),
                                          path)
        except AWAY as err:
            return Outcome.TRANSIENT, f"{type(err).__name__}: {err}"
        if outcome is not Outcome.TRANSIENT and outcome is not Outcome.REJECTED:
            log.info("%s %s by %s", name, outcome, url)
        return outcome, why

    async def unload_old(self, model_name: str, current: int) -> None:
        """The model's versions older than the newest KEEP_LOADED, off every replica."""
        gone: set[str] = set()
        for url, listed in (await listings(self.servers.values(), AWAY)).items():
            for name in to_unload(listed, model_name, current):
                await self.servers[url].unload(name)
                gone.add(name)
        for name in sorted(gone):
            shutil.rmtree(self.adapters / name, ignore_errors=True)
            log.info("unloaded %s", name)

    async def check_due(self, served: Iterable[ModelServed]) -> None:
        if time.monotonic() - self.checked > self.check_every_s:
            self.checked = time.monotonic()
            await self.reconcile(served)

    async def reconcile(self, served: Iterable[ModelServed]) -> None:
        """The periodic check: every served version loaded into each replica that does not
        list it (started or restarted since); what fails is tried again at the next check."""
        wanted: dict[str, ModelServed] = {}
        for s in served:
            if not s.checkpoint_uri:  # the base model: every replica serves it
                continue
            try:
                wanted[served_name(s.model_name, s.version)] = s
            except BadModelName as err:
                log.error("%s v%d NOT served: %s", s.model_name[:120], s.version, err)
        lacking = missing_loads(wanted, await listings(self.servers.values(), AWAY))
        for name in sorted(set[str]().union(*lacking.values())):
            urls = [u for u, names in lacking.items() if name in names]
            log.warning("%s is not served by %s (started or restarted since?): loading it",
                        name, ", ".join(urls))
            s = wanted[name]
            path = await self._fetch(name, s.checkpoint_uri, s.file_sha256)
            if path is None:
                continue
            tries = await asyncio.gather(*(self._onto(u, name, path, None) for u in urls))
            for url, (outcome, why) in zip(urls, tries, strict=True):
                if outcome in (Outcome.TRANSIENT, Outcome.REJECTED):
                    log.warning("%s into %s: %s (tried again at the next check)", name, url,
                                why)


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
                                            mv.file_sha256, self.served.values())
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
    cfg = settings.policy
    servers = [ModelServer(url, cfg.api_key, settings.model_loader.load_timeout_s,
                           cfg.tls_verify) for url in cfg.replica_urls]
    loader = Loader(settings, ObjectStore(settings.s3), servers)
    async with contextlib.AsyncExitStack() as stack:
        for server in servers:
            await stack.enter_async_context(server.http)
        producer = await stack.enter_async_context(
            EventProducer(settings, client_id="model-loader"))
        table = await read_compacted(settings, Topic.MODELS_SERVED, producer)
        serving = Serving(loader, producer,
                          {k: e for k, e in table.items() if isinstance(e, ModelServed)},
                          settings.policy.model)
        async with EventConsumer(settings, [Topic.MODELS], None, producer,
                                 client_id="model-loader") as models:
            backlog = newest(r.event for r in await read_to_end(models))
            mark_ready(f"model loader: {len(serving.served)} served, {len(backlog)} published, "
                       f"{len(servers)} replica(s)")
            for mv in backlog:
                await serving.handle(mv)
            while True:
                for received in await models.poll(timeout_ms=1000):
                    if isinstance(received.event, ModelVersion):
                        await serving.handle(received.event)
                await guarded(loader.check_due(serving.served.values()), "checking")


async def guarded(work: Awaitable[None], what: str) -> None:
    """Housekeeping that may fail while vLLM is away: logged, done again later."""
    try:
        await work
    except AWAY as err:
        log.warning("%s the served models: %s: %s", what, type(err).__name__, err)


async def run_model_loader(settings: Settings) -> None:
    """Run until SIGTERM/SIGINT."""
    await run_until_signalled(serve_models(settings))
