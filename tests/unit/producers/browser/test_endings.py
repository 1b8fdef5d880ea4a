"""How an episode ends: the reason names what failed (Kafka, MinIO, the page, the worker)."""

from __future__ import annotations

from types import SimpleNamespace

from playwright.async_api import Error as PlaywrightError

from producers.browser.endings import Ending, completion_event, ending_for
from producers.browser.retries import EventTooLarge, PublishFailed, UploadFailed
from producers.browser.session import EpisodeAborted, EpisodeSession
from producers.browser.urlpolicy import UrlRefused
from tests.unit.producers.browser.fakes import request
from webgym_common.pagetext import CAPS, marker


def test_a_stop_keeps_its_termination_and_reason() -> None:
    assert ending_for(EpisodeAborted("cancelled", "straggler")) == Ending("cancelled", "straggler")
    assert ending_for(EpisodeAborted("timeout", "late")).termination == "timeout"


def test_a_kafka_failure_is_not_a_crashed_page() -> None:
    ending = ending_for(PublishFailed("publishing StepObserved of e: KafkaTimeoutError"))
    assert ending.termination == "crashed"
    assert ending.reason is not None and ending.reason.startswith("Kafka publish failed: ")
    assert not ending.page_suspect


def test_an_event_too_large_for_kafka_is_named_as_such() -> None:
    ending = ending_for(EventTooLarge(
        "publishing StepObserved of e to t.webgym.observations: MessageSizeTooLargeError: "
        "The message is 9000000 bytes when serialized"))
    assert ending.termination == "crashed" and not ending.page_suspect
    assert ending.reason is not None
    assert ending.reason.startswith("event too large for Kafka: publishing StepObserved")
    assert "Kafka publish failed" not in ending.reason


def test_an_object_store_failure_says_so() -> None:
    ending = ending_for(UploadFailed("uploading the screenshot of step 2: MaxRetryError"))
    assert ending.reason is not None and ending.reason.startswith("screenshot upload failed: ")
    assert not ending.page_suspect


def test_a_page_that_does_not_answer_is_closed_first() -> None:
    ending = ending_for(TimeoutError())
    assert ending == Ending("crashed", "page did not answer: TimeoutError", page_suspect=True)
    crashed = ending_for(PlaywrightError("Target crashed\nmore"), page_crash="renderer crashed")
    assert crashed.reason == "renderer crashed" and crashed.page_suspect


def test_a_refused_start_url_and_a_bug_are_told_apart() -> None:
    assert ending_for(UrlRefused("scheme 'file' is not allowed")).reason == (
        "start URL refused: scheme 'file' is not allowed")
    bug = ending_for(KeyError("marks"))
    assert bug.termination == "crashed" and bug.reason == "worker error: KeyError: 'marks'"


def test_the_completion_carries_the_final_url_and_reason_cut_to_their_caps() -> None:
    session = EpisodeSession(request(), partition=0)
    session.page = SimpleNamespace(url="http://127.0.0.1/" + "a" * 2_000_000)  # type: ignore[assignment]
    event = completion_event(session, Ending("max_steps", "the page said " + "x" * 100_000), "w")
    assert event.final_url is not None and len(event.final_url) == CAPS.url
    assert event.final_url.startswith("http://127.0.0.1/aaa")
    assert event.final_url.endswith(marker(2_000_017))
    assert event.reason is not None and len(event.reason) == CAPS.reason
    assert event.reason.startswith("the page said xxx")
    assert event.reason.endswith(marker(100_014))


def test_an_answer_is_cut_to_its_cap_and_a_short_one_kept_whole() -> None:
    session = EpisodeSession(request(), partition=0)
    long = completion_event(session, Ending("answer", answer="y" * 50_000), "w")
    assert long.answer is not None and len(long.answer) == CAPS.answer
    assert long.answer.endswith(marker(50_000))
    assert completion_event(session, Ending("answer", answer="Paris"), "w").answer == "Paris"
