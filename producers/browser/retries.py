"""An episode's calls to its dependencies (Kafka, MinIO), retried with backoff until a time.

Delivery: `deliver` publishes an event at least once and, as far as this process can tell,
exactly once: a send whose acknowledgement is late is waited on again, never sent again;
only a send the producer reports as failed is sent anew. What cannot be done by the time
given raises PublishFailed or UploadFailed, so the episode ends as `crashed` with a reason
that names the dependency (never "the page did not answer"). An event Kafka refuses for its
size is not retried: EventTooLarge at once, and the episode's reason says so (not an outage).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from webgym_common.events import Event
from webgym_common.stream.bus import EventProducer, too_large
from webgym_common.topics import Topic

log = logging.getLogger(__name__)
T = TypeVar("T")

FIRST_DELAY_S = 0.5
MAX_DELAY_S = 10.0


class PublishFailed(Exception):
    """Kafka did not take an event in time."""


class UploadFailed(Exception):
    """The object store did not take a blob in time."""


class EventTooLarge(Exception):
    """Kafka refused an event for its size: sending it again cannot help."""


def backoff_delay(attempt: int, first_s: float = FIRST_DELAY_S,
                  max_s: float = MAX_DELAY_S) -> float:
    """Seconds to wait after the `attempt`-th failure (0-based): doubling, capped."""
    return min(max_s, first_s * 2 ** min(attempt, 30))


def gives_up(now: float, delay_s: float, until: float | None) -> bool:
    """Whether waiting `delay_s` more would pass `until` (None: never give up)."""
    return until is not None and now + delay_s > until


def describe(err: BaseException) -> str:
    text = str(err).strip().splitlines()[0] if str(err).strip() else ""
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


async def retry_until(call: Callable[[], Awaitable[T]], until: float | None, what: str,
                      failed: type[Exception]) -> T:
    """`await call()` until it succeeds; raise `failed` once `until` (epoch s) is reached.

    At least one attempt is made, however late it already is.
    """
    attempt = 0
    while True:
        try:
            return await call()
        except Exception as err:  # any failure of the dependency: wait and try again
            delay = backoff_delay(attempt)
            if gives_up(time.time(), delay, until):
                raise failed(f"{what}: {describe(err)}") from err
            log.warning("%s failed (%s); retrying in %.1f s", what, describe(err), delay)
        attempt += 1
        await asyncio.sleep(delay)


async def deliver(producer: EventProducer, topic: Topic, key: str, event: Event,
                  until: float | None) -> None:
    """Publish `event` and wait for the broker to have it (acks=all), retrying until `until`.

    Raises PublishFailed when `until` (epoch s) passes first; with `until=None` it keeps
    trying until it succeeds or is cancelled (for events whose loss would lose an episode).
    Raises EventTooLarge at once when Kafka refuses the event for its size.
    """
    name = producer.topic(topic)
    value = producer.codec.encode(event)
    what = f"publishing {type(event).__name__} of {key} to {name}"
    step_s = producer.settings.kafka.request_timeout_ms / 1000
    pending: asyncio.Future | None = None
    attempt = 0
    while True:
        left = step_s if until is None else max(0.5, min(step_s, until - time.time()))
        try:
            if pending is None:  # not in the producer yet: hand it over
                pending = await asyncio.wait_for(
                    producer.producer.send(name, value, key=key.encode()), left)
            assert pending is not None
            # shield: a late ack is waited on again; cancelling would not unsend it anyway.
            await asyncio.wait_for(asyncio.shield(pending), left)
            return
        except TimeoutError as err:
            failure: BaseException = err  # the send may still land: keep waiting on it
            if pending is not None and pending.done():
                pending = None  # it failed with a timeout of its own: send it again
        except Exception as err:
            if too_large(err):
                raise EventTooLarge(f"{what}: {describe(err)}") from err
            failure, pending = err, None  # the producer gave up on it: send it again
        delay = backoff_delay(attempt)
        if gives_up(time.time(), delay, until):
            raise PublishFailed(f"{what}: {describe(failure)}") from failure
        log.warning("%s failed (%s); retrying in %.1f s", what, describe(failure), delay)
        attempt += 1
        await asyncio.sleep(delay)


async def best_effort(work: Awaitable[object], timeout_s: float, what: str) -> bool:
    """Await `work` for at most `timeout_s`; a failure is logged, not raised."""
    try:
        await asyncio.wait_for(work, timeout_s)
        return True
    except Exception as err:  # best effort: the caller goes on either way
        log.warning("%s failed: %r", what, err)
        return False
