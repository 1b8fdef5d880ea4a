"""How an episode ends: the reason names what failed (Kafka, MinIO, the page, the worker)."""

from __future__ import annotations

from playwright.async_api import Error as PlaywrightError

from producers.browser.endings import Ending, ending_for
from producers.browser.retries import PublishFailed, UploadFailed
from producers.browser.session import EpisodeAborted
from producers.browser.urlpolicy import UrlRefused


def test_a_stop_keeps_its_termination_and_reason() -> None:
    assert ending_for(EpisodeAborted("cancelled", "straggler")) == Ending("cancelled", "straggler")
    assert ending_for(EpisodeAborted("timeout", "late")).termination == "timeout"


def test_a_kafka_failure_is_not_a_crashed_page() -> None:
    ending = ending_for(PublishFailed("publishing StepObserved of e: KafkaTimeoutError"))
    assert ending.termination == "crashed"
    assert ending.reason is not None and ending.reason.startswith("Kafka publish failed: ")
    assert not ending.page_suspect


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
