"""Refilter's samples (processors.reprocess.prompts): a content-addressed prompt goes by
reference without a read, and resolves to the replay processor's own messages (a prompt
the replay processor would dead-letter is left out by the reader instead); a prompt under
any other key is read and carried inline as before, reads bounded, a passing failure
retried, a missing blob not."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest
from minio.error import S3Error

from processors.replay_buffer.app import Replayer
from processors.replay_buffer.decisions import KeptStep
from processors.reprocess.prompts import PromptReads, by_reference, inline, samples
from tests.unit.scored import scored
from webgym_common.config import load_settings
from webgym_common.events import ReplaySample
from webgym_common.objectstore import ObjectStoreError
from webgym_common.replay_prompts import resolve
from webgym_common.stream import handlers

A = "s3://webgym/sha256/aa/aaaa.json"
B = "s3://webgym/sha256/bb/bbbb.json"
NAMED = "s3://webgym/prompts/latest.json"  # not content-addressed: may change


class FakeStore:
    def __init__(self, fail_first: int = 0, blobs: dict[str, bytes] | None = None) -> None:
        self.gets: Counter[str] = Counter()
        self.in_flight = self.most_in_flight = 0
        self.fail_first = fail_first
        self.blobs = blobs

    async def get_blob(self, uri: str) -> bytes:
        self.gets[uri] += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.001)
            if self.fail_first > 0:
                self.fail_first -= 1
                raise ObjectStoreError("slow")
            if self.blobs is None:
                return json.dumps([{"role": "user", "content": uri}]).encode()
            if uri not in self.blobs:
                raise S3Error(None, "NoSuchKey", "no such key", uri, "r", "h")  # type: ignore[arg-type]
            return self.blobs[uri]
        finally:
            self.in_flight -= 1


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(handlers, "RETRY_MAX_S", 0.0)


def kept(step: int, uri: str) -> KeptStep:
    return KeptStep(step, uri, f"Action: Click [{step}]", f"s3://webgym/shot{step}.png", "v1",
                    True)


async def test_a_content_addressed_prompt_goes_by_reference_without_a_read() -> None:
    store = FakeStore()
    made = (await samples(PromptReads(store), [(scored("e1", reward=1.0), kept(2, A))]))[0]
    assert isinstance(made, ReplaySample)
    assert (made.messages, made.prompt_uri, made.screenshot_uri) == (
        [], A, "s3://webgym/shot2.png")
    assert store.gets == Counter()


async def test_a_prompt_under_another_key_is_read_and_carried_inline() -> None:
    store = FakeStore()
    assert by_reference(scored("e1", reward=1.0), kept(0, NAMED)) is None  # to be read
    made = (await samples(PromptReads(store), [(scored("e1", reward=1.0), kept(0, NAMED))]))[0]
    assert isinstance(made, ReplaySample) and made.prompt_uri is None
    assert [m.content for m in made.messages] == [NAMED]
    assert store.gets == Counter({NAMED: 1})


async def test_a_uri_that_is_no_s3_reference_is_refused_at_once() -> None:
    store = FakeStore()
    steps = [(scored("e1", reward=1.0), kept(4, "http://x/y"))]
    made = (await samples(PromptReads(store), steps))[0]
    assert isinstance(made, str) and "step 4: prompt http://x/y is unusable" in made
    assert store.gets == Counter()


async def test_inline_reads_in_flight_are_bounded() -> None:
    store = FakeStore()
    prompts = PromptReads(store, concurrency=3)
    uris = [f"s3://webgym/prompts/{i}.json" for i in range(12)]
    await asyncio.gather(*(inline(prompts, scored("e", reward=1.0), kept(i, u))
                           for i, u in enumerate(uris)))
    assert store.most_in_flight == 3 and prompts.gets == 12


async def test_a_passing_failure_is_retried_a_missing_blob_is_not() -> None:
    store = FakeStore(fail_first=2)
    made = await inline(PromptReads(store), scored("e", reward=1.0), kept(0, NAMED))
    assert isinstance(made, ReplaySample) and store.gets[NAMED] == 3
    gone = FakeStore(blobs={})
    made = await inline(PromptReads(gone), scored("e", reward=1.0), kept(0, NAMED))
    assert made == f"step 0: prompt {NAMED} is missing (NoSuchKey)" and gone.gets[NAMED] == 1


async def test_by_reference_resolves_to_the_replay_processors_messages_or_is_left_out() -> None:
    """What the replay processor publishes inline (or dead-letters), a refilter's sample by
    reference gives its reader (or is left out by it, with the reason)."""
    good = json.dumps([{"role": "user", "content": [
        {"type": "text", "text": "go"}, {"type": "image_url", "image_url": {"url": "data:x"}}]}])
    missing = "s3://webgym/sha256/cc/cccc.json"
    blobs = {A: good.encode(), B: b"not json", NAMED: good.encode()}
    steps = [kept(0, A), kept(1, A), kept(2, B), kept(3, missing), kept(5, NAMED)]
    episode = scored("e1", reward=1.0)
    replayer = Replayer(load_settings().replay, FakeStore(blobs=blobs), None)  # type: ignore[arg-type]
    inline_made = [await replayer.sample(episode, k) for k in steps]
    store = FakeStore(blobs=blobs)
    made = await samples(PromptReads(store), [(episode, k) for k in steps])
    assert [m.prompt_uri for m in made if isinstance(m, ReplaySample)] == [
        A, A, B, missing, None]  # only the named prompt was read (and carried inline)
    assert store.gets == Counter({NAMED: 1})
    reader = FakeStore(blobs=blobs)
    resolved = await resolve(reader, [m for m in made if isinstance(m, ReplaySample)], 5.0)
    assert reader.gets == Counter({A: 1, B: 1, missing: 1})  # each distinct prompt once
    strip = {"event_id", "produced_at", "prompt_uri", "screenshot_uri"}
    assert [s.model_dump(exclude=strip) for s in resolved.samples] == [
        w.model_dump(exclude=strip) for w in inline_made if isinstance(w, ReplaySample)]
    dead = [w for w in inline_made if isinstance(w, str)]
    assert len(dead) == 2 and sorted(resolved.left_out) == ["e1:2", "e1:3"]
    assert "not JSON" in resolved.left_out["e1:2"] and "not JSON" in dead[0]
    assert "missing (NoSuchKey)" in resolved.left_out["e1:3"] and "NoSuchKey" in dead[1]
