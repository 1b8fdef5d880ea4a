"""The samples a refilter run builds: by reference when the prompt is content-addressed.

A prompt the policy stored under its content hash (put_blob: key sha256/...) never changes,
so the sample refers to it (ReplaySample.prompt_uri and screenshot_uri, empty messages:
webgym_common.replay_prompts) and the run sends no GET for it: the trainer reads the prompts
of the samples it draws, each distinct one once. The URI is checked here (it must parse),
the blob is not: a prompt that is missing, altered or not chat messages is reported and left
out by the trainer (webgym_common.replay_prompts.resolve), never trained on.

A prompt under any other key could change after the run: it is read now and carried inline,
as the replay processor carries it (Replayer.sample: the same sample, or the same reason
for none). Those reads are bounded (MinIO and the client's connection pool are shared with
the rest of the run), each keeps the object store's own timeout and is retried as the
replay processor retries it (processors.replay_buffer.app: a dependency down is waited for,
a missing blob is not).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from minio.error import S3Error

from processors.replay_buffer.app import persistently
from processors.replay_buffer.decisions import KeptStep, replay_sample
from webgym_common.events import EpisodeScored, ReplaySample
from webgym_common.objectstore import ObjectStoreError, parse_uri
from webgym_common.replay_prompts import (
    CONCURRENT_READS,
    BlobReader,
    PromptError,
    chat_messages,
    content_addressed,
)


class PromptReads:
    """The run's reads of prompts it must carry inline: at most `concurrency` at a time."""

    def __init__(self, store: BlobReader, concurrency: int = CONCURRENT_READS) -> None:
        self.store = store
        self.limit = asyncio.Semaphore(concurrency)
        self.gets = 0  # reads sent to the store (for the report and the bench)

    async def get(self, uri: str) -> bytes:
        async with self.limit:
            self.gets += 1
            return await persistently(f"fetching {uri}", lambda: self.store.get_blob(uri))


def by_reference(scored: EpisodeScored, kept: KeptStep) -> ReplaySample | str | None:
    """The step's sample by reference, or why it cannot be made, or None: its prompt is to be
    read and carried inline (`inline`)."""
    uri = kept.prompt_uri
    try:
        parse_uri(uri)
    except ObjectStoreError as err:
        return f"step {kept.step}: prompt {uri} is unusable: {err}"
    return replay_sample(scored, kept, [], by_reference=True) if content_addressed(uri) else None


async def inline(prompts: PromptReads, scored: EpisodeScored, kept: KeptStep
                 ) -> ReplaySample | str:
    """The step's sample with its prompt read now, or why it cannot be made
    (Replayer.sample's words)."""
    uri = kept.prompt_uri
    try:
        blob = await prompts.get(uri)
        return replay_sample(scored, kept, chat_messages(blob, kept.screenshot_uri))
    except S3Error as err:
        return f"step {kept.step}: prompt {uri} is missing ({err.code})"
    except (PromptError, ObjectStoreError) as err:
        return f"step {kept.step}: prompt {uri} is unusable: {err}"


async def samples(prompts: PromptReads, steps: Sequence[tuple[EpisodeScored, KeptStep]]
                  ) -> list[ReplaySample | str]:
    """Each step's sample (by reference when it can be), or why it cannot be made, in order.
    Only the steps to carry inline become tasks: a batch of thousands by reference builds
    without scheduling one coroutine each."""
    made = [by_reference(scored, kept) for scored, kept in steps]
    if reads := [i for i, m in enumerate(made) if m is None]:
        read = await asyncio.gather(*(inline(prompts, *steps[i]) for i in reads))
        for i, m in zip(reads, read, strict=True):
            made[i] = m
    return [m for m in made if m is not None]  # none is left: every None was read
