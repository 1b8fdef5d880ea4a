"""The LLM judge (judge.py): verdict parsing, the evidence it is shown, its failures and
how a failed question is asked again."""

from __future__ import annotations

import itertools
from dataclasses import replace

import httpx
import pytest
from openai import AsyncOpenAI

from processors.evaluator.judge import LlmJudge, parse_verdict, render_evidence, verdict_backoff
from processors.evaluator.reward import Question, Verdict
from tests.unit.processors.evaluator.builders import TASK, step
from webgym_common.config import load_settings


@pytest.mark.parametrize(("reply", "success"), [
    ("The page shows the price.\nVerdict: SUCCESS", True),
    ("The answer is not on any page.\nVerdict: NOT SUCCESS", False),
    ("analysis...\n**Verdict:** not success", False),
    ("Verdict - success.", True),
    ("first Verdict: SUCCESS, on reflection\nVerdict: NOT_SUCCESS", False),
])
def test_verdict_parsing(reply: str, success: bool) -> None:
    v = parse_verdict(reply)
    assert v.success is success and not v.reason and not v.failed


@pytest.mark.parametrize(
    "reply", ["SUCCESS!!! it works", "Verdict: UNSUCCESSFUL", "garbage \x00 ###", "", None])
def test_an_unparseable_or_missing_verdict_is_not_success_with_the_reason(reply) -> None:
    v = parse_verdict(reply)
    assert v.success is False and v.reason and v.failed  # no verdict: not the agent's 0


def test_the_structured_output_label_is_not_part_of_the_analysis() -> None:
    v = parse_verdict("Analysis: the price is on the page\nVerdict: SUCCESS")
    assert v.success and v.analysis == "the price is on the page"


def test_blocking_verdicts_use_their_own_labels() -> None:
    assert parse_verdict("CAPTCHA wall.\nVerdict: BLOCKED", "BLOCKED", "NOT BLOCKED").success
    assert not parse_verdict("Verdict: NOT BLOCKED", "BLOCKED", "NOT BLOCKED").success


def test_evidence_carries_url_title_and_page_text_within_budget() -> None:
    steps = tuple(replace(step(i), page_text="x" * 900) for i in range(30))
    text = render_evidence(steps, page_chars=500, budget=3000)
    assert "Step 29: http://shop.test/29\nTitle: page 29" in text and "Page text:" in text
    assert "earlier steps left out" in text and len(text) < 3000 + 200


async def test_an_unreachable_judge_is_a_recorded_failure() -> None:
    settings = load_settings(evaluator={"judge": "llm", "base_url": "http://127.0.0.1:9/v1",
                                        "model": "m", "timeout_s": 2, "retries": 0,
                                        "verdict_attempts": 2, "verdict_backoff_s": 0})
    verdict = await LlmJudge(settings).ask(Question("criterion_b", "criterion B", TASK, "x"))
    assert not verdict.success and verdict.failed and "judge failed" in verdict.reason


class Flaky(LlmJudge):
    """Fails (as an unreachable judge or a reply without a verdict does) `failures` times."""

    def __init__(self, failures: int, **evaluator: object) -> None:
        super().__init__(load_settings(evaluator={"judge": "llm", "base_url": "http://x/v1",
                                                  "model": "m", **evaluator}))
        self.failures, self.asked = failures, 0

    async def ask_once(self, question: Question) -> Verdict:
        self.asked += 1
        if self.asked <= self.failures:
            return parse_verdict("I cannot decide.")
        return parse_verdict("Verdict: SUCCESS")


async def test_a_failed_question_is_asked_again_until_the_attempts_run_out() -> None:
    q = Question("criterion_b", "criterion B", TASK, "x")
    judge = Flaky(2, verdict_attempts=3, verdict_backoff_s=0)
    assert (await judge.ask(q)).success and judge.asked == 3
    judge = Flaky(5, verdict_attempts=3, verdict_backoff_s=0)
    verdict = await judge.ask(q)
    assert verdict.failed and "no `Verdict: SUCCESS`" in verdict.reason and judge.asked == 3


def test_the_pause_between_attempts_doubles_up_to_a_cap() -> None:
    assert [verdict_backoff(5, a) for a in (1, 2, 3, 4)] == [5, 10, 20, 40]
    assert verdict_backoff(5, 10) == 120


def replicas_judge(hits: dict[str, int], down: set[str]) -> LlmJudge:
    """A judge over two replicas (policy.replicas, no judge URL of its own), served by a
    transport that answers SUCCESS from a replica that is up and refuses from one that is
    down; `hits` counts the requests each got."""

    def serve(request: httpx.Request) -> httpx.Response:
        host = request.url.host
        hits[host] = hits.get(host, 0) + 1
        if host in down:
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(200, json={
            "id": "c", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": "Verdict: SUCCESS"}}]})

    settings = load_settings(
        policy={"replicas": ["http://a/v1", "http://b/v1"]},
        evaluator={"judge": "llm", "model": "m", "timeout_s": 2, "retries": 1,
                   "verdict_attempts": 1})
    judge = LlmJudge(settings)
    assert [str(c.base_url) for c in judge.clients] == ["http://a/v1/", "http://b/v1/"]
    judge.clients = [AsyncOpenAI(base_url=str(c.base_url), api_key="k", max_retries=0,
                                 http_client=httpx.AsyncClient(
                                     transport=httpx.MockTransport(serve)))
                     for c in judge.clients]
    judge.turns = itertools.cycle(judge.clients)
    return judge


async def test_the_judge_spreads_its_questions_over_the_policys_replicas() -> None:
    hits: dict[str, int] = {}
    judge = replicas_judge(hits, down=set())
    for _ in range(4):
        verdict = await judge.ask(Question("criterion_b", "criterion B", TASK, "x"))
        assert verdict.success and not verdict.failed
    assert hits == {"a": 2, "b": 2}


async def test_a_replica_that_is_down_costs_one_try_not_the_question() -> None:
    hits: dict[str, int] = {}
    judge = replicas_judge(hits, down={"a"})
    verdicts = [await judge.ask(Question("criterion_b", "criterion B", TASK, "x"))
                for _ in range(3)]
    assert all(v.success and not v.failed for v in verdicts)
    assert hits["b"] == 3 and hits["a"] >= 1  # each failed try at a was tried again at b
