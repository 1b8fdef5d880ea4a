"""Refilter's samples (processors.reprocess.prompts): a content-addressed prompt that steps
share is read once and given to each; the others are read as before; reads in flight are
bounded; a passing failure is retried, a missing blob is not; each sample, or the reason
for none, is the replay processor's."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest
from minio.error import S3Error

from processors.replay_buffer import app
from processors.replay_buffer.app import Replayer
from processors.replay_buffer.decisions import KeptStep
from processors.reprocess.prompts import SharedPrompts, content_addressed, sample
from tests.unit.scored import scored
from webgym_common.config import load_settings
from webgym_common.objectstore import ObjectStoreError

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
                return f"prompt of {uri}".encode()
            if uri not in self.blobs:
                raise S3Error(None, "NoSuchKey", "no such key", uri, "r", "h")  # type: ignore[arg-type]
            return self.blobs[uri]
        finally:
            self.in_flight -= 1


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(app, "RETRY_MAX_S", 0.0)


def test_only_blobs_stored_by_their_hash_are_shared() -> None:
    assert content_addressed(A)
    assert not content_addressed(NAMED) and not content_addressed("not a uri")


async def test_a_shared_prompt_is_read_once_and_each_step_gets_its_bytes() -> None:
    asked = [A, A, B, A, NAMED, NAMED]
    store = FakeStore()
    prompts = SharedPrompts(store, asked)
    got = await asyncio.gather(*(prompts.get(u) for u in asked))
    assert got == [f"prompt of {u}".encode() for u in asked]
    assert store.gets == Counter({A: 1, B: 1, NAMED: 2}) and prompts.gets == 4
    assert prompts.reads == {}  # nothing kept once its last step has it


async def test_a_prompt_asked_for_after_its_last_step_is_read_again() -> None:
    store = FakeStore()
    prompts = SharedPrompts(store, [A, A])
    for _ in range(3):
        assert await prompts.get(A) == f"prompt of {A}".encode()
    assert store.gets[A] == 2


async def test_reads_in_flight_are_bounded() -> None:
    asked = [f"s3://webgym/sha256/{n:02d}/{n}.json" for n in range(20)]
    store = FakeStore()
    prompts = SharedPrompts(store, asked, concurrency=3)
    await asyncio.gather(*(prompts.get(u) for u in asked))
    assert store.most_in_flight == 3


async def test_a_passing_failure_is_retried_once_for_every_step_waiting() -> None:
    store = FakeStore(fail_first=2)
    prompts = SharedPrompts(store, [A, A, A])
    got = await asyncio.gather(*(prompts.get(A) for _ in range(3)))
    assert got == [f"prompt of {A}".encode()] * 3
    assert store.gets[A] == 3 and prompts.gets == 1  # two failures, one read


async def test_a_missing_prompt_fails_its_askers_and_is_asked_for_again_later() -> None:
    store = FakeStore(blobs={})
    prompts = SharedPrompts(store, [A, A, A])
    first = await asyncio.gather(prompts.get(A), prompts.get(A), return_exceptions=True)
    assert all(isinstance(r, S3Error) for r in first) and store.gets[A] == 1
    with pytest.raises(S3Error):
        await prompts.get(A)
    assert store.gets[A] == 2


async def test_an_asker_cancelled_does_not_fail_the_others() -> None:
    store = FakeStore()
    prompts = SharedPrompts(store, [A, A])
    cancelled = asyncio.ensure_future(prompts.get(A))
    other = asyncio.ensure_future(prompts.get(A))
    await asyncio.sleep(0)
    cancelled.cancel()
    assert await other == f"prompt of {A}".encode()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    prompts.close()


def kept(step: int, uri: str) -> KeptStep:
    return KeptStep(step, uri, f"Action: Click [{step}]", f"s3://webgym/shot{step}.png", "v1",
                    True)


async def test_each_sample_or_reason_is_the_replay_processors() -> None:
    good = json.dumps([{"role": "user", "content": [
        {"type": "text", "text": "go"}, {"type": "image_url", "image_url": {"url": "data:x"}}]}])
    blobs = {A: good.encode(), B: b"not json"}
    missing = "s3://webgym/sha256/cc/cccc.json"
    steps = [kept(0, A), kept(1, A), kept(2, B), kept(3, missing), kept(4, "http://x/y")]
    episode = scored("e1", reward=1.0)
    replayer = Replayer(load_settings().replay, FakeStore(blobs=blobs), None, "g",  # type: ignore[arg-type]
                        None)  # type: ignore[arg-type]
    want = [await replayer.sample(episode, k) for k in steps]
    prompts = SharedPrompts(FakeStore(blobs=blobs), [k.prompt_uri for k in steps])
    got = await asyncio.gather(*(sample(prompts, episode, k) for k in steps))
    strip = {"event_id", "produced_at"}
    assert [g if isinstance(g, str) else g.model_dump(exclude=strip) for g in got] == [
        w if isinstance(w, str) else w.model_dump(exclude=strip) for w in want]
    assert [type(g).__name__ for g in got] == ["ReplaySample", "ReplaySample", "str", "str",
                                               "str"]
