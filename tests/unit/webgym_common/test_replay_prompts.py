"""A replay sample's prompt (webgym_common.replay_prompts): stored chat messages become
ChatMessages with images as references; samples by reference get their messages, each
distinct prompt read once and a few at a time, each read under a timeout; a prompt that is
missing, altered or not chat messages leaves its sample out with the reason; a store that
does not answer raises."""

from __future__ import annotations

import asyncio
import json
from collections import Counter

import pytest
from minio.error import S3Error

from tests.factories import sample_event
from webgym_common.events import ChatMessage, ReplaySample
from webgym_common.objectstore import BlobMismatch, ObjectStoreError
from webgym_common.replay_prompts import (
    PromptError,
    by_reference,
    chat_messages,
    content_addressed,
    resolve,
)

SHOT = "s3://webgym/sha256/aa/shot.jpg"
A = "s3://webgym/sha256/aa/aaaa.json"
B = "s3://webgym/sha256/bb/bbbb.json"


def prompt(*messages: dict[str, object]) -> bytes:
    return json.dumps(list(messages)).encode()


def test_a_text_prompt_becomes_chat_messages_as_it_was() -> None:
    blob = prompt({"role": "system", "content": "You are an agent."},
                  {"role": "user", "content": "Task: buy milk"})
    assert chat_messages(blob, SHOT) == [ChatMessage(role="system", content="You are an agent."),
                                         ChatMessage(role="user", content="Task: buy milk")]


def test_images_become_references_never_bytes() -> None:
    blob = prompt({"role": "system", "content": "sys"}, {"role": "user", "content": [
        {"type": "text", "text": "Task: x"},
        {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,/9j/AAAA"}},
        {"type": "text", "text": "What next?"},
        {"type": "image_url", "image_url": {"url": "s3://webgym/sha256/bb/other.png"}},
        {"type": "image_url", "image_url": {"url": "http://minio:9000/webgym/k?X-Amz-Sig=1"}}]})
    user = chat_messages(blob, SHOT)[1]
    assert user == ChatMessage(role="user", content="Task: x\nWhat next?",
                               images=[SHOT, "s3://webgym/sha256/bb/other.png", SHOT])


@pytest.mark.parametrize("blob", [
    b"\xff\xfe", b"{oops", b"{}", b"[]", prompt({"content": "no role"}),
    prompt({"role": "user"}), prompt({"role": "user", "content": [{"type": "input_audio"}]}),
    prompt({"role": "user", "content": [{"type": "image_url", "image_url": {}}]}),
])
def test_a_prompt_that_is_not_chat_messages_is_refused(blob: bytes) -> None:
    with pytest.raises(PromptError):
        chat_messages(blob, SHOT)


def test_an_inline_image_without_a_screenshot_to_refer_to_is_refused() -> None:
    blob = prompt({"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]})
    with pytest.raises(PromptError, match="no screenshot"):
        chat_messages(blob, None)


def test_only_blobs_stored_by_their_hash_are_content_addressed() -> None:
    assert content_addressed(A)
    assert not content_addressed("s3://webgym/prompts/latest.json")
    assert not content_addressed("not a uri")


def sample(n: int, uri: str | None, messages: list[ChatMessage] | None = None,
           shot: str | None = SHOT) -> ReplaySample:
    base = sample_event("ReplaySample")
    assert isinstance(base, ReplaySample)
    return base.model_copy(update={
        "sample_id": f"e{n}:0", "episode_id": f"e{n}", "messages": messages or [],
        "prompt_uri": None if messages else uri, "screenshot_uri": None if messages else shot})


class Store:
    def __init__(self, blobs: dict[str, bytes | BaseException], delay_s: float = 0.001) -> None:
        self.blobs, self.delay_s = blobs, delay_s
        self.gets: Counter[str] = Counter()
        self.in_flight = self.most_in_flight = 0

    async def get_blob(self, uri: str) -> bytes:
        self.gets[uri] += 1
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(self.delay_s)
            got = self.blobs.get(uri)
            if got is None:
                raise S3Error(None, "NoSuchKey", "no such key", uri, "r", "h")  # type: ignore[arg-type]
            if isinstance(got, BaseException):
                raise got
            return got
        finally:
            self.in_flight -= 1


async def test_samples_by_reference_get_their_messages_each_prompt_read_once() -> None:
    image = prompt({"role": "user", "content": [
        {"type": "text", "text": "go"}, {"type": "image_url", "image_url": {"url": "data:x"}}]})
    store = Store({A: image, B: prompt({"role": "user", "content": "b"})})
    inline = sample(9, None, [ChatMessage(role="user", content="kept as it is")])
    given = [sample(0, A), sample(1, B), inline, sample(2, A, shot="s3://webgym/other.jpg")]
    assert [by_reference(s) for s in given] == [True, True, False, True]
    got = await resolve(store, given, timeout_s=5.0)
    assert store.gets == Counter({A: 1, B: 1}) and got.reads == 2 and got.left_out == {}
    assert [s.sample_id for s in got.samples] == ["e0:0", "e1:0", "e9:0", "e2:0"]
    assert got.samples[0].messages == [ChatMessage(role="user", content="go", images=[SHOT])]
    assert got.samples[1].messages == [ChatMessage(role="user", content="b")]
    assert got.samples[2] is inline
    # the same prompt, another step: its inline image is that step's screenshot
    assert got.samples[3].messages[0].images == ["s3://webgym/other.jpg"]


async def test_a_missing_altered_or_unusable_prompt_leaves_its_sample_out_with_the_reason(
        ) -> None:
    store = Store({A: BlobMismatch(f"{A}: content hash 00 does not match its key"),
                   B: b'{"role": "user"}'})
    missing = "s3://webgym/sha256/cc/cccc.json"
    fine = "s3://webgym/sha256/dd/dddd.json"
    store.blobs[fine] = prompt({"role": "user", "content": "ok"})
    got = await resolve(store, [sample(0, A), sample(1, B), sample(2, missing),
                                sample(3, "http://not/s3"), sample(4, None), sample(5, fine)],
                        timeout_s=5.0)
    assert [s.sample_id for s in got.samples] == ["e5:0"]
    why = got.left_out
    assert sorted(why) == ["e0:0", "e1:0", "e2:0", "e3:0", "e4:0"]
    assert "does not match its key" in why["e0:0"]
    assert "not a list of chat messages" in why["e1:0"]
    assert why["e2:0"] == f"prompt {missing} is missing (NoSuchKey)"
    assert "unusable" in why["e3:0"] and store.gets["http://not/s3"] == 0
    assert "no prompt_uri" in why["e4:0"]


async def test_reads_in_flight_are_bounded() -> None:
    uris = [f"s3://webgym/sha256/{i:02d}/{i:064d}.json" for i in range(20)]
    store = Store({u: prompt({"role": "user", "content": u}) for u in uris})
    got = await resolve(store, [sample(i, u) for i, u in enumerate(uris)], 5.0, concurrency=4)
    assert store.most_in_flight == 4 and len(got.samples) == 20


async def test_a_store_that_does_not_answer_raises_rather_than_leaving_samples_out() -> None:
    with pytest.raises(ObjectStoreError, match="no answer"):
        await resolve(Store({A: b"[]"}, delay_s=5.0), [sample(0, A)], timeout_s=0.05)
    down = S3Error(None, "SlowDown", "later", A, "r", "h")  # type: ignore[arg-type]
    with pytest.raises(S3Error):
        await resolve(Store({A: down}), [sample(0, A)], timeout_s=5.0)
