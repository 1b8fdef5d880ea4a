"""A replay sample's prompt: the chat messages its step was given, inline or by reference.

The policy stores each step's prompt (OpenAI chat messages as JSON, `prompt_blob`) in the
object store under its content hash (put_blob: key sha256/...), and a scored trajectory
names it (TrajectoryStep.prompt_uri). A ReplaySample carries it one of two ways:
- inline: `messages`, the prompt as ChatMessages (`chat_messages`: text parts joined, each
  image a reference, never bytes): the replay processor's samples;
- by reference: `messages` empty, `prompt_uri` the content-addressed key and
  `screenshot_uri` the step's screenshot (what an inline image of the prompt becomes):
  `webgym reprocess refilter`'s samples. The bytes under such a key never change (get_blob
  checks them against it: BlobMismatch), so the reference names the same messages whenever
  it is read, and a refilter sends no GET for the samples it writes.

`resolve` gives a draw of samples their messages before they become training rows: each
distinct prompt read once, at most `concurrency` at a time, each read under a timeout and
checked against its key. A sample whose prompt is missing, altered or not chat messages is
left out with the reason (never trained on, never a crash); a store that does not answer
raises ObjectStoreError, as every other read of a training run does.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from minio.error import S3Error

from webgym_common.events import ChatMessage, ReplaySample
from webgym_common.objectstore import MISSING, BlobMismatch, ObjectStoreError, parse_uri

CONCURRENT_READS = 16  # the object store's connection pool (ObjectStore: maxsize=16)


class PromptError(ValueError):
    """A stored prompt that is not a list of OpenAI chat messages we can refer to."""


class BlobReader(Protocol):
    async def get_blob(self, uri: str) -> bytes:
        """The blob's bytes; BlobMismatch when a content-addressed blob's bytes do not match
        its key (ObjectStore.get_blob), S3Error when it is not there."""
        ...


def content_addressed(uri: str) -> bool:
    """A blob stored by put_blob (key sha256/...): its bytes are its name, they never change."""
    try:
        return parse_uri(uri)[1].startswith("sha256/")
    except ObjectStoreError:
        return False


def by_reference(sample: ReplaySample) -> bool:
    """The sample's prompt is to be read from `prompt_uri` (its `messages` are empty)."""
    return not sample.messages


def chat_messages(prompt: bytes, screenshot_uri: str | None) -> list[ChatMessage]:
    """The stored prompt (prompt_blob's JSON) as ChatMessages: text parts joined, images as
    references."""
    try:
        raw = json.loads(prompt)
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise PromptError(f"not JSON: {err}") from None
    if not isinstance(raw, list) or not raw:
        raise PromptError("not a list of chat messages")
    return [_message(m, screenshot_uri) for m in raw]


def _message(m: Any, screenshot_uri: str | None) -> ChatMessage:
    if not isinstance(m, dict) or not isinstance(m.get("role"), str):
        raise PromptError(f"not a chat message: {str(m)[:80]}")
    content = m.get("content")
    if isinstance(content, str):
        return ChatMessage(role=m["role"], content=content)
    if not isinstance(content, list):
        raise PromptError(f"a {m['role']} message without content")
    texts, images = [], []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind == "text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif kind == "image_url":
            images.append(_image_ref(part.get("image_url"), screenshot_uri))
        else:
            raise PromptError(f"a content part we cannot keep: {str(part)[:80]}")
    return ChatMessage(role=m["role"], content="\n".join(texts), images=images)


def _image_ref(image: Any, screenshot_uri: str | None) -> str:
    url = image.get("url") if isinstance(image, dict) else image
    if not isinstance(url, str):
        raise PromptError("an image part without a URL")
    if url.startswith("s3://"):
        return url
    # The policy attaches the observation's screenshot, inline or presigned: refer to it.
    if screenshot_uri is None:
        raise PromptError("an inline image and no screenshot reference for the step")
    return screenshot_uri


@dataclass
class Resolved:
    samples: list[ReplaySample]  # in the order given, each with its messages
    left_out: dict[str, str] = field(default_factory=dict)  # sample id -> why
    reads: int = 0  # GETs sent (one per distinct prompt)


async def resolve(store: BlobReader, samples: Sequence[ReplaySample], timeout_s: float,
                  concurrency: int = CONCURRENT_READS) -> Resolved:
    """The samples with their messages (see the module doc); inline ones as they are."""
    uris = sorted({s.prompt_uri for s in samples if by_reference(s) and s.prompt_uri})
    limit = asyncio.Semaphore(concurrency)
    gets = 0

    async def read(uri: str) -> bytes | str:
        nonlocal gets
        try:
            parse_uri(uri)
        except ObjectStoreError as err:
            return f"prompt {uri} is unusable: {err}"
        async with limit:
            gets += 1
            try:
                async with asyncio.timeout(timeout_s):
                    data = await store.get_blob(uri)
            except S3Error as err:
                if err.code in MISSING:
                    return f"prompt {uri} is missing ({err.code})"
                raise
            except BlobMismatch as err:
                return f"prompt {uri} is unusable: {err}"
            except TimeoutError:
                raise ObjectStoreError(f"reading {uri}: no answer in {timeout_s:.0f} s") from None
        return data

    blobs = dict(zip(uris, await asyncio.gather(*(read(u) for u in uris)), strict=True))
    out = Resolved([], reads=gets)
    for s in samples:
        if not by_reference(s):
            out.samples.append(s)
            continue
        blob = blobs.get(s.prompt_uri or "", "no messages and no prompt_uri")
        if isinstance(blob, str):
            out.left_out[s.sample_id] = blob
            continue
        try:
            messages = chat_messages(blob, s.screenshot_uri)
        except PromptError as err:
            out.left_out[s.sample_id] = f"prompt {s.prompt_uri} is unusable: {err}"
            continue
        out.samples.append(s.model_copy(update={"messages": messages}))
    return out
