"""An episode's calls to Kafka and MinIO are retried until a time, then fail with a named reason."""

from __future__ import annotations

import time

import pytest
from aiokafka.errors import (
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    NotLeaderForPartitionError,
    RecordListTooLargeError,
)

from producers.browser import retries
from producers.browser.retries import (
    EventTooLarge,
    PublishFailed,
    UploadFailed,
    backoff_delay,
    deliver,
    gives_up,
    retry_until,
)
from tests.factories import sample_event
from tests.unit.producers.browser.fakes import FakeKafka, FakeProducer
from webgym_common.topics import Topic


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(retries, "FIRST_DELAY_S", 0.01)
    monkeypatch.setattr(retries, "backoff_delay", lambda attempt: 0.01)


def test_backoff_doubles_up_to_a_cap() -> None:
    assert [backoff_delay(a, 0.5, 4.0) for a in range(5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert backoff_delay(10_000, 0.5, 4.0) == 4.0


def test_giving_up_only_when_the_wait_would_pass_the_time() -> None:
    assert not gives_up(now=10.0, delay_s=1.0, until=None)
    assert not gives_up(now=10.0, delay_s=1.0, until=11.0)
    assert gives_up(now=10.0, delay_s=1.5, until=11.0)


async def test_a_failed_send_is_sent_again_until_kafka_has_it() -> None:
    kafka = FakeKafka([NotLeaderForPartitionError(), KafkaTimeoutError()])
    producer = FakeProducer(kafka=kafka)
    event = sample_event("EpisodeCompleted")
    await deliver(producer, Topic.EPISODES_COMPLETED, "ep", event, until=None)  # type: ignore[arg-type]
    assert len(kafka.sent) == 3
    assert producer.published(Topic.EPISODES_COMPLETED) == [event]


async def test_a_late_ack_is_waited_on_not_sent_again() -> None:
    kafka = FakeKafka(["hang"])
    producer = FakeProducer(kafka=kafka, timeout_ms=1000)
    event = sample_event("StepObserved")
    with pytest.raises(PublishFailed) as failed:
        await deliver(producer, Topic.OBSERVATIONS, "ep", event,  # type: ignore[arg-type]
                      until=time.time() + 0.2)
    assert len(kafka.sent) == 1  # one send: its ack may still come, so no second copy
    assert "StepObserved" in str(failed.value) and "TimeoutError" in str(failed.value)


@pytest.mark.parametrize("refusal", [
    ("raise", MessageSizeTooLargeError("The message is 9000000 bytes when serialized")),
    MessageSizeTooLargeError(),  # the broker's MESSAGE_TOO_LARGE, on the ack
    RecordListTooLargeError(),
])
async def test_an_event_too_large_for_kafka_is_not_retried_as_an_outage(refusal: object) -> None:
    kafka = FakeKafka([refusal])
    producer = FakeProducer(kafka=kafka)
    event = sample_event("StepObserved")
    # No deadline: an outage would be retried for ever; a size refusal ends it at once.
    with pytest.raises(EventTooLarge) as failed:
        await deliver(producer, Topic.OBSERVATIONS, "ep", event, until=None)  # type: ignore[arg-type]
    assert len(kafka.sent) == 1 and not kafka.acked
    assert "StepObserved" in str(failed.value) and "TooLarge" in str(failed.value)


async def test_at_least_one_attempt_is_made_however_late() -> None:
    producer = FakeProducer()
    event = sample_event("StepObserved")
    await deliver(producer, Topic.OBSERVATIONS, "ep", event,  # type: ignore[arg-type]
                  until=time.time() - 100)
    assert producer.published(Topic.OBSERVATIONS) == [event]


async def test_an_upload_that_keeps_failing_raises_the_named_failure() -> None:
    calls = 0

    async def put() -> str:
        nonlocal calls
        calls += 1
        raise ConnectionRefusedError("connection refused")

    with pytest.raises(UploadFailed) as failed:
        await retry_until(put, time.time() + 0.1, "uploading step 3", UploadFailed)
    assert calls > 1
    assert str(failed.value) == "uploading step 3: ConnectionRefusedError: connection refused"


async def test_an_upload_that_recovers_returns_its_result() -> None:
    results = [OSError("down"), "s3://b/k"]

    async def put() -> str:
        r = results.pop(0)
        if isinstance(r, Exception):
            raise r
        return r

    assert await retry_until(put, time.time() + 5, "uploading", UploadFailed) == "s3://b/k"
