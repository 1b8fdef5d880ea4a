"""Page-derived text is cut to one table of caps, visibly, and a full observation fits Kafka."""

from __future__ import annotations

import pytest

from webgym_common.codec import Codec
from webgym_common.config import BrowserSettings, KafkaSettings
from webgym_common.config.pipeline import MAX_MARKS
from webgym_common.events import Mark, StepObserved, Viewport
from webgym_common.pagetext import CAPS, ELLIPSIS, cut, cut_or_none, marker


def test_text_within_its_cap_is_kept_as_it_is() -> None:
    assert cut("Gadget Depot", 12) == "Gadget Depot"
    assert cut("", 0) == ""
    assert cut_or_none(None, 5) is None


@pytest.mark.parametrize("length", [2049, 10 * 1024 * 1024])
def test_a_cut_text_keeps_its_start_and_says_how_long_it_was(length: int) -> None:
    text = "T" * length
    kept = cut(text, CAPS.title)
    assert len(kept) == CAPS.title
    assert kept.endswith(f"{ELLIPSIS}[cut: {length} characters in all]")
    assert kept.startswith("T" * (CAPS.title - len(marker(length))))


def test_a_separator_puts_the_marker_on_a_line_of_its_own() -> None:
    kept = cut("- text: " + "word " * 1000, 100, sep="\n")
    assert len(kept) == 100 and kept.splitlines()[-1] == marker(5008)


def test_a_cap_smaller_than_the_marker_keeps_only_the_marker() -> None:
    assert cut("x" * 100, 3) == marker(100)


def test_the_caps_keep_the_largest_observation_under_the_producers_limit() -> None:
    """Every capped field full, in 4-byte characters (UTF-8's widest), as many marks as the
    settings allow: still under kafka.max_request_size, so an observation is never
    refused for its size."""
    wide = "\U0001F600"
    marks = [Mark(index=i, ref=f"e{i}", role="link", name=wide * CAPS.mark_name,
                  x=0, y=0, width=1, height=1) for i in range(MAX_MARKS)]
    event = StepObserved(
        episode_id="e" * 64, task_id="t" * 64, step=99, url=wide * CAPS.url,
        title=wide * CAPS.title, viewport=Viewport(width=1280, height=720),
        screenshot_uri="s3://b/" + "k" * 100, screenshot_sha256="0" * 64,
        screenshot_format="jpeg", accessibility_tree=wide * CAPS.tree, marks=marks,
        timings_ms={k: 1.0 for k in ("action_wait", "execute", "settle", "screenshot", "tree",
                                     "title", "upload", "publish", "total")},
        action_effect=wide * CAPS.effect, error=wide * CAPS.error,
        instruction=wide * CAPS.instruction, worker_id="w" * 64,
    )
    size = len(Codec().encode(event))
    assert size < KafkaSettings().max_request_size * 0.75, size


def test_marks_beyond_the_bound_are_refused_as_a_setting() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        BrowserSettings(max_marks=MAX_MARKS + 1)
