"""The trainer's draw gets its prompts (consumers.trainer.app.with_prompts): samples by
reference are resolved, one whose prompt is missing or not chat messages is left out, logged
with the reason and counted; inline samples are used as they are."""

from __future__ import annotations

import json
import logging
from types import SimpleNamespace
from typing import Any

import pytest
from minio.error import S3Error

from consumers.trainer.app import with_prompts
from tests.factories import sample_event
from webgym_common.events import ChatMessage, ReplaySample

A = "s3://webgym/sha256/aa/aaaa.json"
GONE = "s3://webgym/sha256/cc/cccc.json"
BAD = "s3://webgym/sha256/bb/bbbb.json"


class Store:
    settings = SimpleNamespace(timeout_s=5.0)

    def __init__(self) -> None:
        self.asked: list[str] = []

    async def get_blob(self, uri: str) -> bytes:
        self.asked.append(uri)
        blobs = {A: json.dumps([{"role": "user", "content": "buy milk"}]).encode(),
                 BAD: b'{"not": "a list"}'}
        if uri not in blobs:
            raise S3Error(None, "NoSuchKey", "no such key", uri, "r", "h")  # type: ignore[arg-type]
        return blobs[uri]


def sample(sid: str, uri: str | None) -> ReplaySample:
    base = sample_event("ReplaySample")
    assert isinstance(base, ReplaySample)
    inline = [ChatMessage(role="user", content="inline")]
    return base.model_copy(update={"sample_id": sid, "messages": [] if uri else inline,
                                   "prompt_uri": uri, "screenshot_uri": None})


async def test_a_draw_by_reference_is_resolved_and_unusable_prompts_left_out(
        caplog: pytest.LogCaptureFixture) -> None:
    store: Any = Store()
    drawn = [sample("a:0", A), sample("a:1", A), sample("b:0", GONE), sample("c:0", BAD),
             sample("d:0", None)]
    with caplog.at_level(logging.WARNING, logger="consumers.trainer.app"):
        samples, left_out = await with_prompts(store, drawn)
    assert [(s.sample_id, [m.content for m in s.messages]) for s in samples] == [
        ("a:0", ["buy milk"]), ("a:1", ["buy milk"]), ("d:0", ["inline"])]
    assert left_out == 2 and sorted(store.asked) == [A, BAD, GONE]
    warned = [r.getMessage() for r in caplog.records]
    assert any("b:0 left out" in w and "missing (NoSuchKey)" in w for w in warned)
    assert any("c:0 left out" in w and "not a list of chat messages" in w for w in warned)
