"""Derived topics: `webgym reprocess` never writes one of the pipeline's own topics."""

from __future__ import annotations

from processors.reprocess.derived import refusal, transactional_id
from webgym_common.config import load_settings


def test_the_pipelines_topics_and_illegal_names_are_refused() -> None:
    s = load_settings(kafka={"topic_prefix": "webgym"})
    assert refusal(s, "webgym.episodes.scored") is not None
    assert refusal(s, "webgym.replay") is not None
    assert refusal(s, "webgym-evaluator-scored-changelog") is not None  # faust's own
    assert refusal(s, "bad name!") is not None and refusal(s, "..") is not None
    assert refusal(s, "webgym.rescored.llm-v2") is None
    assert transactional_id("x.y") == "webgym-replay-x.y"
