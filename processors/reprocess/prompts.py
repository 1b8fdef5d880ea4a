"""The samples a refilter run builds, each prompt read once and a few at a time.

A prompt is stored under its content hash (webgym_common.objectstore.put_blob): the bytes under
a URI never change, so a step that refers to a prompt another step already read is given
those bytes, never a second GET. A blob is kept only while steps still to be built refer to
it (the run knows them all before it builds any), so memory holds the prompts shared
between steps, not the history. Reads in flight are bounded (MinIO and the client's
connection pool are shared with the rest of the run); each read keeps the object store's own
timeout and is retried as the replay processor retries it (processors.replay_buffer.app:
a dependency down is waited for, a missing blob is not), once per read rather than once per
step: the retrying machinery cost more CPU than the rest of a sample.

`sample` is the replay processor's Replayer.sample with the prompt read through
SharedPrompts: the same sample, or the same reason for none.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable

from minio.error import S3Error

from processors.replay_buffer.app import BlobStore, persistently
from processors.replay_buffer.decisions import (
    KeptStep,
    PromptError,
    chat_messages,
    replay_sample,
)
from webgym_common.events import EpisodeScored, ReplaySample
from webgym_common.objectstore import ObjectStoreError, parse_uri

CONCURRENT_READS = 16  # the object store's connection pool (ObjectStore: maxsize=16)


def content_addressed(uri: str) -> bool:
    """A blob stored by put_blob (key sha256/...): its bytes are its name."""
    try:
        return parse_uri(uri)[1].startswith("sha256/")
    except ObjectStoreError:
        return False


class SharedPrompts:
    """Prompt blobs for one run: one read per content-addressed URI, `uses` naming the URI of
    every step to be built (a URI asked for more often than that is read again: never
    wrong, only slower)."""

    def __init__(self, store: BlobStore, uses: Iterable[str],
                 concurrency: int = CONCURRENT_READS) -> None:
        self.store = store
        self.uses = Counter(u for u in uses if content_addressed(u))
        self.reads: dict[str, asyncio.Future[bytes]] = {}
        self.limit = asyncio.Semaphore(concurrency)
        self.gets = 0  # reads sent to the store (for the report and the bench)

    async def get(self, uri: str) -> bytes:
        """The blob (unverified, as the replay processor reads prompts: decoding the JSON is
        the check); a failure is raised to every step waiting for it."""
        read = self.reads.get(uri)
        if read is None:
            if self.uses[uri] <= 1:  # no other step wants it: nothing to keep
                self.uses[uri] -= 1
                return await self._read(uri)
            read = self.reads[uri] = asyncio.ensure_future(self._read(uri))
        try:
            # shield: one asker cancelled (its batch failed) does not cancel the others'
            data = await asyncio.shield(read)
        except BaseException:
            if self.reads.get(uri) is read and read.done():
                del self.reads[uri]  # failed: a later asker reads again
            raise
        self.uses[uri] -= 1
        if self.uses[uri] <= 0 and self.reads.get(uri) is read:
            del self.reads[uri]  # its last step has it
        return data

    def close(self) -> None:
        """Cancel the reads nobody waits for any more (a run that failed mid-batch)."""
        for read in self.reads.values():
            read.cancel()
        self.reads.clear()

    async def _read(self, uri: str) -> bytes:
        async with self.limit:
            self.gets += 1
            return await persistently(f"fetching {uri}", lambda: self.store.get_blob(uri))


async def sample(prompts: SharedPrompts, scored: EpisodeScored, kept: KeptStep
                 ) -> ReplaySample | str:
    """The step's sample, or why it cannot be made (Replayer.sample's words)."""
    uri = kept.prompt_uri
    try:
        parse_uri(uri)
        blob = await prompts.get(uri)
        return replay_sample(scored, kept, chat_messages(blob, kept.screenshot_uri))
    except S3Error as err:
        return f"step {kept.step}: prompt {uri} is missing ({err.code})"
    except (PromptError, ObjectStoreError) as err:
        return f"step {kept.step}: prompt {uri} is unusable: {err}"
