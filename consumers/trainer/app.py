"""The trainer: replay samples in, one LLaMA-Factory run per trigger, exactly one ModelVersion out.

Delivery: exactly one ModelVersion per version number, effectively once per run. No consumer
group and nothing committed: the trainer's state is the log. At start it reads webgym.models,
webgym.control and webgym.replay from their beginnings to their ends
(consumers.trainer.decisions.fold), marks itself ready, then follows them. When `next_run`
says so (sync: an iteration closed; async: enough new samples) it writes the run folder
<data_dir>/training/<run id>, trains in LLaMA-Factory's venv (consumers.trainer.run),
uploads the output's files under s3://<bucket>/models/<model>/v<N>/, reads webgym.models to
its end once more and, unless a ModelVersion of this run (or this number) is there already,
publishes it (key model name) with the sha256 of every file it uploaded (the model loader
loads nothing else; a run from a parent checks the parent's files the same way; a mismatch
ends the process, loudly). TrainingProgress started / running (at most every
PROGRESS_EVERY_S) / finished | failed goes to webgym.training (key run id) on the way.

A trainer killed after the ModelVersion was published finds it at restart and moves on to
the next version. Killed before: the same log gives the same plan (the draw is seeded by the
version number), hence the same run id and folder, and LLaMA-Factory resumes from the last
checkpoint there; the upload overwrites the same keys. A failed run publishes `failed` and
ends the process (the supervisor restarts it, which redoes the run), so a broken setup is
loud and never skips a version.

Sync trigger: before drawing, the trainer waits until the replay group has committed
webgym.episodes.scored up to the ends it had when the close was seen (at most
trainer.replay_wait_s; then it draws from what is there, with a warning), and reads
webgym.replay to its end. An empty run (nothing eligible) publishes its parent's weights
under the next number (see decisions), so the synchronous loop never waits for a version
that will not come.

A drawn sample by reference (ReplaySample.prompt_uri, as `webgym reprocess refilter` writes
them) has its prompt read before the run folder is written (webgym_common.replay_prompts:
each distinct prompt once, a few at a time, under the store's timeout, checked against its
key). One whose prompt is missing, altered or not chat messages is left out of the rows,
logged with the reason and counted in the version's metrics (`left_out`); the run id stays
the draw's, so a restart writes the same folder. A store that does not answer fails the run
like any other read of it.

LLaMA-Factory's venv and the base model are given by the CLI (`run_trainer(settings, venv,
base_model)`): consumers never import infra.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from aiokafka import TopicPartition
from aiokafka.errors import KafkaError

from consumers.checkpoints import check, file_digests
from consumers.trainer.decisions import (
    PlannedRun,
    TrainerState,
    already_published,
    caught_up,
    fold,
    next_run,
    passthrough,
    pending_iteration,
    trained_version,
)
from consumers.trainer.llamafactory import EmptyRunError, write_run
from consumers.trainer.run import Progress, TrainError, TrainResult, train
from webgym_common.choices import TrainTrigger
from webgym_common.config import Settings
from webgym_common.events import ModelVersion, ReplaySample, TrainingProgress, TrainingState
from webgym_common.lifecycle import mark_ready, run_until_signalled
from webgym_common.objectstore import ObjectStore, ObjectStoreError, parse_uri
from webgym_common.replay_prompts import by_reference, resolve
from webgym_common.stream.admin import admin_client
from webgym_common.stream.bus import EventConsumer, EventProducer
from webgym_common.stream.kafka_clients import make_consumer
from webgym_common.stream.readers import any_record, batches_to_end
from webgym_common.topics import Group, Topic, group_id

log = logging.getLogger(__name__)
T = TypeVar("T")

PROGRESS_EVERY_S = 2.0
LEFT_OUT = "left_out"  # ModelVersion.metrics: drawn samples whose prompt could not be used
WAIT_POLL_S = 1.0


class Trainer:
    def __init__(self, settings: Settings, producer: EventProducer, store: ObjectStore,
                 consumer: EventConsumer, venv: Path | None, base_model: str) -> None:
        self.settings, self.producer, self.store = settings, producer, store
        self.consumer, self.venv, self.base_model = consumer, venv, base_model
        self.state = TrainerState(settings.trainer.model_name)
        self.waited: set[int] = set()  # sync: iterations whose replay was waited for
        self.skipped: set[str] = set()  # async runs with nothing to train on (DPO, no pair)

    async def read_to_end(self) -> int:
        n = 0
        async for batch in batches_to_end(self.consumer):
            for received in batch:
                fold(self.state, received)
            n += len(batch)
        return n

    async def follow(self) -> None:
        dirty = True  # decide again only when the state moved
        while True:
            if dirty:
                dirty = False
                run = await self.decide()
                if run is not None and run.run_id not in self.skipped:
                    await self.carry_out(run)
                    dirty = True  # the next iteration may have closed meanwhile
            batch = await self.consumer.poll(timeout_ms=500)
            for received in batch:
                fold(self.state, received)
            dirty = dirty or bool(batch)

    async def decide(self) -> PlannedRun | None:
        pending = pending_iteration(self.state)
        if (self.settings.trainer.trigger is TrainTrigger.SYNC and pending is not None
                and pending not in self.waited):
            await wait_for_replay(self.settings, self.producer, pending)
            self.waited.add(pending)
            await self.read_to_end()  # every sample the replay published before its commit
        return next_run(self.state, self.settings)

    async def carry_out(self, run: PlannedRun) -> None:
        t = self.settings.trainer
        log.info("trainer: v%d from v%d (%s): %d samples, the policy's drawn of %d eligible; "
                 "run %s", run.version, run.parent_version, run.trigger, len(run.sample_ids),
                 run.pool, run.run_id)
        parent = self.state.versions.get(run.parent_version)
        version: ModelVersion | None = None
        if not run.empty:
            try:
                version = await self.train(run, parent)
            except EmptyRunError as err:
                log.warning("trainer: run %s has nothing to train on: %s", run.run_id, err)
                if t.trigger is TrainTrigger.ASYNC:
                    self.skipped.add(run.run_id)
                    return
        if version is None:
            version = passthrough(parent, run, t.model_name, self.base_model, run.mode.value,
                                  run.mode.finetuning_type)
            log.info("trainer: v%d is v%d's weights (nothing to train on)", run.version,
                     run.parent_version)
        await self.read_to_end()  # exactly once: what webgym.models has now
        if already_published(self.state, run.run_id) or run.version in self.state.versions:
            log.info("trainer: v%d (run %s) is on %s already", run.version, run.run_id,
                     self.producer.topic(Topic.MODELS))
            return
        await self.producer.publish(Topic.MODELS, t.model_name, version)
        self.state.versions[version.version] = version
        log.info("trainer: published %s v%d (%s, %d samples) from v%d", t.model_name,
                 version.version, version.checkpoint_uri or "base weights",
                 len(version.sample_ids), version.parent_version)

    async def train(self, run: PlannedRun, parent: ModelVersion | None) -> ModelVersion:
        # the run's objective: the configured mode, but a warm start is supervised (decisions)
        s, t = self.settings, self.settings.trainer.model_copy(update={"mode": run.mode})
        if self.venv is None or not self.base_model:
            raise RuntimeError("the trainer needs LLaMA-Factory's venv and a base model: run "
                               "it as `webgym worker trainer` (or pass venv= and base_model=)")
        run_dir = s.infra.data_dir / "training" / run.run_id
        drawn = [self.state.samples[i].sample for i in run.sample_ids]
        samples, left_out = await with_prompts(self.store, drawn)
        adapter = None
        if parent is not None and parent.checkpoint_uri:
            adapter = await blocking(self.store, download, self.store, parent.checkpoint_uri,
                                     run_dir / "parent", parent.file_sha256)
        images = await blocking(self.store, fetch_images, self.store, samples, run_dir / "images")
        files = write_run(run_dir, samples, t, self.base_model, adapter,
                          resolve_image=lambda ref: images.get(ref, ref))
        progress = Reporter(self, run, files.samples)
        missing = f"; {left_out} of {len(drawn)} samples left out (their prompts: see the " \
            "log)" if left_out else ""
        await progress.send("started", message=f"{run.trigger}; {files.run_dir}{missing}")
        try:
            result = await train(files, self.venv, t, on_progress=progress.on_progress)
        except (TrainError, OSError) as err:
            await progress.send("failed", message=str(err)[-2000:])
            raise
        uri, digests = await blocking(self.store, upload, self.store, result,
                                      checkpoint_prefix(t.model_name, run.version))
        await progress.send("finished", message=f"{len(result.adapter_files)} files to {uri}",
                            step=result.steps)
        metrics = {**result.metrics, "steps": float(result.steps), "wall_s": result.wall_s,
                   **({LEFT_OUT: float(left_out)} if left_out else {})}
        return trained_version(run, t, uri, self.base_model, files.samples, metrics, digests)


class Reporter:
    """TrainingProgress for one run; `running` at most every PROGRESS_EVERY_S, and the last."""

    def __init__(self, trainer: Trainer, run: PlannedRun, samples: int) -> None:
        self.trainer, self.run, self.samples = trainer, run, samples
        self.last_sent = 0.0

    async def send(self, state: TrainingState, p: Progress | None = None, message: str = "",
                   step: int = 0) -> None:
        event = TrainingProgress(
            run_id=self.run.run_id, state=state, version=self.run.version,
            step=p.step if p else step, total_steps=p.total_steps if p else step,
            loss=p.loss if p else None, elapsed_s=p.elapsed_s if p else 0.0,
            eta_s=p.eta_s if p else None, samples=self.samples, message=message)
        try:  # progress is for people: never fail a run over it
            await self.trainer.producer.publish(Topic.TRAINING, self.run.run_id, event)
        except (KafkaError, TimeoutError) as err:
            log.warning("trainer: progress of run %s not published: %r", self.run.run_id, err)
        self.last_sent = time.monotonic()

    async def on_progress(self, p: Progress) -> None:
        if p.step >= p.total_steps or time.monotonic() - self.last_sent >= PROGRESS_EVERY_S:
            await self.send("running", p)


async def wait_for_replay(settings: Settings, producer: EventProducer, iteration: int) -> bool:
    """Wait (at most trainer.replay_wait_s) until the replay group has committed
    webgym.episodes.scored up to its current ends (or only transaction markers lie between
    its commits and the ends); False if it had not by then."""
    timeout_s = settings.kafka.request_timeout_ms / 1000
    async with EventConsumer(settings, [Topic.EPISODES_SCORED], None, producer,
                             client_id="trainer-ends") as scored:
        parts = sorted(scored.consumer.assignment())
        ends: dict[TopicPartition, int] = await asyncio.wait_for(
            scored.consumer.end_offsets(parts), timeout_s)
    group = group_id(settings.kafka, Group.REPLAY)
    admin = admin_client(settings)
    probe = make_consumer(settings, [], None, client_id="trainer-probe")  # no group
    await admin.start()
    await asyncio.wait_for(probe.start(), timeout_s)
    try:
        async with asyncio.timeout(settings.trainer.replay_wait_s):
            while True:
                committed: dict[TopicPartition, int] = {}
                if not caught_up(committed, ends):  # nothing scored: no group to ask
                    try:
                        offsets = await admin.list_consumer_group_offsets(group)
                        committed = {tp: m.offset for tp, m in offsets.items()}
                    except KafkaError as err:  # no coordinator yet: the group never committed
                        log.debug("trainer: offsets of %s: %r", group, err)
                behind = [tp for tp, end in ends.items() if committed.get(tp, 0) < end]
                if not [tp for tp in behind if await any_record(
                        probe, tp, max(committed.get(tp, 0), 0), ends[tp])]:
                    log.info("trainer: iteration %d: replay has read every scored episode",
                             iteration)
                    return True
                await asyncio.sleep(WAIT_POLL_S)
    except TimeoutError:
        log.warning("trainer: iteration %d: the replay group %s had not read every scored "
                    "episode after %.0f s; drawing from what is there", iteration, group,
                    settings.trainer.replay_wait_s)
        return False
    finally:
        # Stopping a consumer that was assigned by hand can hang: bounded, like every call.
        with contextlib.suppress(Exception):
            await asyncio.wait_for(probe.stop(), timeout_s)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(admin.close(), timeout_s)


async def blocking(store: ObjectStore, fn: Callable[..., T], *args: Any) -> T:
    """Blocking object-store work (minio, files) in a thread, under a timeout."""
    try:
        return await asyncio.wait_for(asyncio.to_thread(fn, *args), store.settings.timeout_s * 10)
    except TimeoutError:
        raise ObjectStoreError(f"object store at {store.settings.endpoint} timed out") from None


async def with_prompts(store: ObjectStore, samples: list[ReplaySample]
                       ) -> tuple[list[ReplaySample], int]:
    """The drawn samples with their messages (a sample by reference has its prompt read:
    each distinct one once, a few at a time, each under the store's timeout and checked
    against its key), and how many were left out because their prompt is missing or is not
    chat messages (each logged with the reason: never trained on, never a crash)."""
    resolved = await resolve(store, samples, store.settings.timeout_s * 2)
    for sample_id, why in sorted(resolved.left_out.items()):
        log.warning("trainer: sample %s left out: %s", sample_id, why)
    if resolved.reads:
        log.info("trainer: read %d prompts for %d samples by reference", resolved.reads,
                 sum(1 for s in samples if by_reference(s)))
    return resolved.samples, len(resolved.left_out)


def checkpoint_prefix(model_name: str, version: int) -> str:
    """Where a version's files go in the bucket (a redo writes the same keys)."""
    return f"models/{model_name}/v{version}"


def upload(store: ObjectStore, result: TrainResult, prefix: str) -> tuple[str, dict[str, str]]:
    """The run's output files under `prefix` (the same keys on a redo); their s3:// prefix
    and the sha256 of each file, taken from the bytes uploaded."""
    if not result.adapter_files:
        raise TrainError(f"no model files in {result.output_dir}")
    digests = file_digests(result.adapter_files)
    for path in result.adapter_files:
        store.client.fput_object(store.bucket, f"{prefix}/{path.name}", str(path))
    return f"s3://{store.bucket}/{prefix}", digests


def download(store: ObjectStore, uri: str, into: Path, digests: Mapping[str, str]) -> Path:
    """A checkpoint's files into a folder (the parent's adapter): the files its ModelVersion
    has digests of, each checked (DigestMismatch), or, for a version published without
    digests (before they were), every object under the prefix, unchecked."""
    bucket, key = parse_uri(uri)
    into.mkdir(parents=True, exist_ok=True)
    names = [str(o.object_name) for o in store.client.list_objects(
        bucket, prefix=key.rstrip("/") + "/", recursive=True)]
    if not names:
        raise ObjectStoreError(f"no files under {uri}")
    if digests:
        names = [n for n in names if n.rsplit("/", 1)[-1] in digests]
    for name in names:
        store.client.fget_object(bucket, name, str(into / name.rsplit("/")[-1]))
    if digests:
        check(file_digests(into / n for n in digests), digests, uri)
    else:
        log.warning("trainer: the parent %s has no file digests: its files are unchecked", uri)
    return into


def fetch_images(store: ObjectStore, samples: list[ReplaySample], into: Path) -> dict[str, str]:
    """A vision model's screenshots into the run folder: reference -> path in the folder."""
    out: dict[str, str] = {}
    for ref in sorted({r for s in samples for m in s.messages for r in m.images}):
        bucket, key = parse_uri(ref)
        name = key.rsplit("/", 1)[-1]
        if not (into / name).exists():
            into.mkdir(parents=True, exist_ok=True)
            store.client.fget_object(bucket, key, str(into / name))
        out[ref] = f"images/{name}"
    return out


async def train_forever(settings: Settings, venv: Path | None, base_model: str) -> None:
    async with EventProducer(settings, client_id="trainer") as producer:
        store = ObjectStore(settings.s3)
        await store.ensure_bucket()
        topics: list[Topic | str] = [Topic.MODELS, Topic.CONTROL, Topic.TASKS,
                                     settings.trainer.replay_topic or Topic.REPLAY]
        async with EventConsumer(settings, topics, None, producer, client_id="trainer") as c:
            trainer = Trainer(settings, producer, store, c, venv, base_model)
            n = await trainer.read_to_end()
            st = trainer.state
            log.info("trainer: read %d events: %d samples, %d closed iterations, versions up to "
                     "v%d", n, len(st.samples), len(st.closed), max(st.versions, default=0))
            mark_ready(f"trainer read {n} events")
            await trainer.follow()


async def run_trainer(settings: Settings, venv: Path | None = None,
                      base_model: str | None = None) -> None:
    """Run until SIGTERM/SIGINT (a run in progress is killed; the next start resumes it)."""
    await run_until_signalled(
        train_forever(settings, venv, base_model or settings.trainer.base_model))
