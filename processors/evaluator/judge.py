"""The LLM judge: any OpenAI-compatible endpoint, asked one reward question at a time.

Each question becomes a chat prompt with the task, the agent's answer and the
evidence: every selected step's URL, title and an excerpt of its page text
(the local judge model reads text only), plus the screenshots as image parts
when `vision` is on. The reply is an analysis ending in a `Verdict: SUCCESS` /
`Verdict: NOT SUCCESS` line (`BLOCKED` / `NOT BLOCKED` for the blocking check).
A reply without a verdict, or a judge that cannot be reached after its retries,
is asked again (`verdict_attempts`, with a growing pause: an outage or a bad
sample may pass); if it still fails, the verdict is a failure (`failed`, with
the reason), never an exception, and reward.py makes it a judge failure, not a 0.

The judge asks `evaluator.base_url`, or else every model server the policy uses
(`policy.replicas`, or its base_url alone): each request goes to the next server in turn,
so questions spread over the replicas and a request tried again after a failure goes to
another one (a replica that is down costs one failed try, not the question).
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import logging
import re
from typing import Any, cast

from openai import (
    APIConnectionError,
    APITimeoutError,
    AsyncOpenAI,
    DefaultAsyncHttpxClient,
    InternalServerError,
    OpenAIError,
    RateLimitError,
)
from openai.types.chat import ChatCompletionMessageParam
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from processors.evaluator.reward import Question, Verdict
from processors.evaluator.trajectory import StepEvidence
from webgym_common.choices import ScreenshotFormat
from webgym_common.config import Settings
from webgym_common.objectstore import ObjectStore, ObjectStoreError

log = logging.getLogger(__name__)
JUDGE_VERSION = "llm-judge-v1"
_RETRIED = (APIConnectionError, APITimeoutError, InternalServerError, RateLimitError)

SYSTEM = """You evaluate a web agent. You get its task, its final answer and evidence \
from the pages it visited (for each step: URL, title and the page's text). Judge only \
from the evidence. Write a short analysis, then end with exactly one line:
Verdict: {yes}
or
Verdict: {no}"""

QUESTIONS = {
    "blocking": "Was the agent stopped by a persistent CAPTCHA, anti-bot check or an access "
                "denied / HTTP 403 page, so that it could not use the site? Answer BLOCKED "
                "only if such a wall kept it from the content.",
    "criterion_b": "Criterion B (no hallucination): is every claim in the agent's answer "
                   "visible in the evidence? SUCCESS only if nothing in the answer is "
                   "missing from, or contradicted by, the pages.",
    "criterion_a": "Criterion A, fact group {id} ({description}): does the evidence show "
                   "the following? Any one of the alternatives suffices.\n{facts}",
    "definite_answer": "The task has a definite answer: {definite}\nDoes the agent's answer "
                       "state the same thing (formatting, units and wording aside)?",
}


def labels(question: Question) -> tuple[str, str]:
    return ("BLOCKED", "NOT BLOCKED") if question.kind == "blocking" else (
        "SUCCESS", "NOT SUCCESS")


def parse_verdict(text: str | None, yes: str = "SUCCESS", no: str = "NOT SUCCESS") -> Verdict:
    """The judge's last `Verdict:` line; anything else is NOT SUCCESS, with the reason."""
    text = (text or "").strip()
    if not text:
        return Verdict(False, reason="the judge's reply was empty", failed=True)

    def words(label: str) -> str:
        return r"[\s_-]+".join(map(re.escape, label.split()))

    # The negative label first: "NOT SUCCESS" must not read as "SUCCESS".
    pattern = re.compile(rf"verdict\W*({words(no)}|{words(yes)})(?![\w-])", re.I)
    matches = list(pattern.finditer(text))
    if not matches:
        return Verdict(False, analysis=text, failed=True,
                       reason=f"no `Verdict: {yes}` or `Verdict: {no}` line in the reply")
    last = matches[-1]
    success = " ".join(last.group(1).upper().replace("_", " ").replace("-", " ").split()) == yes
    analysis = text[: last.start()].strip(" \n*#:-_`") or text
    analysis = re.sub(r"^analysis\s*:\s*", "", analysis, flags=re.I)  # the structured-output label
    return Verdict(success, analysis=analysis)


def verdict_regex(yes: str, no: str) -> str:
    """The reply's shape for structured output: one analysis line, then the verdict."""
    # Short enough that the verdict always fits in max_tokens, even for a rambling model.
    return rf"Analysis: [^\n]{{1,240}}\nVerdict: ({no}|{yes})"


def render_evidence(steps: tuple[StepEvidence, ...], page_chars: int, budget: int) -> str:
    """Each step's URL, title, action and page text; the last pages get the text budget first."""
    blocks: list[str] = []
    remaining = budget
    for s in reversed(steps):
        head = f"Step {s.step}: {s.url}\nTitle: {s.title or '-'}\n"
        if s.action_string:
            head += f"Action taken: {s.action_string}\n"
        room = max(0, min(page_chars, remaining - len(head)))
        text = s.page_text[:room]
        block = head + (f"Page text:\n{text}\n" if text else "")
        if remaining - len(block) < 0 and blocks:
            blocks.append(f"({len(steps) - len(blocks)} earlier steps left out)\n")
            break
        remaining -= len(block)
        blocks.append(block)
    return "\n".join(reversed(blocks))


def render_question(q: Question, page_chars: int, budget: int) -> str:
    t = q.task
    asked = QUESTIONS[q.kind]
    if q.fact_group is not None:
        facts = " OR\n".join(f"- {f}" for f in q.fact_group.facts)
        asked = asked.format(id=q.fact_group.id, description=q.fact_group.description,
                             facts=facts)
    elif q.kind == "definite_answer":
        asked = asked.format(definite=t.definite_answer)
    parts = [f"Task: {t.task_name}", f"Agent's answer: {q.answer if q.answer else '(none)'}",
             f"Question: {asked}"]
    if q.evidence:
        parts.append("Evidence:\n" + render_evidence(q.evidence, page_chars, budget))
    return "\n\n".join(parts)


def verdict_backoff(base_s: float, attempt: int, cap_s: float = 120.0) -> float:
    """The pause before asking a failed question again: doubling from `base_s`, capped."""
    return min(cap_s, base_s * 2 ** (attempt - 1))


def judge_urls(settings: Settings) -> tuple[str, ...]:
    """The servers the judge asks: its own, else every model server of the policy."""
    base = settings.evaluator.base_url
    return (base,) if base else settings.policy.replica_urls


class LlmJudge:
    def __init__(self, settings: Settings, store: ObjectStore | None = None) -> None:
        self.cfg = cfg = settings.evaluator
        self.model = cfg.model or settings.policy.model
        self.version = f"{JUDGE_VERSION}:{self.model}"
        self.store = store
        self.clients = [
            AsyncOpenAI(base_url=url, api_key=cfg.api_key, timeout=cfg.timeout_s, max_retries=0,
                        http_client=DefaultAsyncHttpxClient(verify=cfg.tls_verify))
            for url in judge_urls(settings)]
        self.turns = itertools.cycle(self.clients)  # each request to the next server
        self.slots = asyncio.Semaphore(cfg.max_concurrency)

    async def ask(self, question: Question) -> Verdict:
        """The verdict, asked again after a pause while the judge fails (see the module doc)."""
        verdict = await self.ask_once(question)
        for attempt in range(1, self.cfg.verdict_attempts):
            if not verdict.failed:
                break
            pause = verdict_backoff(self.cfg.verdict_backoff_s, attempt)
            log.warning("judge failed on %s (%s); asking again in %.0fs", question.label,
                        verdict.reason, pause)
            await asyncio.sleep(pause)
            verdict = await self.ask_once(question)
        return verdict

    async def ask_once(self, question: Question) -> Verdict:
        yes, no = labels(question)
        try:
            messages = await self.messages(question, yes, no)
            async with self.slots:
                reply = await self._complete(messages, yes, no)
        except (OpenAIError, ObjectStoreError, TimeoutError, OSError) as err:
            log.warning("judge failed on %s: %s", question.label, err)
            return Verdict(False, reason=f"judge failed: {type(err).__name__}: {err}",
                           failed=True)
        return parse_verdict(reply, yes, no)

    async def messages(self, q: Question, yes: str, no: str) -> list[dict[str, Any]]:
        text = render_question(q, self.cfg.page_text_chars, self.cfg.evidence_chars)
        content: str | list[dict[str, Any]] = text
        if self.cfg.vision and self.store is not None and q.evidence:
            content = [{"type": "text", "text": text}]
            for step in q.evidence:
                if step.screenshot_uri:
                    content.append({"type": "text", "text": f"Screenshot of step {step.step}:"})
                    content.append({"type": "image_url",
                                    "image_url": {"url": await self._data_url(step)}})
        return [{"role": "system", "content": SYSTEM.format(yes=yes, no=no)},
                {"role": "user", "content": content}]

    async def _complete(self, messages: list[dict[str, Any]], yes: str, no: str) -> str:
        extra = {"structured_outputs": {"regex": verdict_regex(yes, no)}} if (
            self.cfg.structured_output) else None
        # The whole exchange, retries included, is bounded too.
        budget = self.cfg.timeout_s * (self.cfg.retries + 1) + 10 * self.cfg.retries
        async with asyncio.timeout(budget):
            async for attempt in AsyncRetrying(
                stop=stop_after_attempt(self.cfg.retries + 1),
                wait=wait_exponential(multiplier=0.5, max=10),
                retry=retry_if_exception_type(_RETRIED), reraise=True,
            ):
                with attempt:
                    resp = await next(self.turns).chat.completions.create(
                        model=self.model, messages=cast(list[ChatCompletionMessageParam], messages),
                        max_tokens=self.cfg.max_tokens,
                        temperature=self.cfg.temperature, extra_body=extra,
                    )
        return resp.choices[0].message.content or ""

    async def _data_url(self, step: StepEvidence) -> str:
        assert self.store is not None and step.screenshot_uri
        data = await self.store.get_blob(step.screenshot_uri)
        mime = ScreenshotFormat.mime_of(step.screenshot_format)
        return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def make_judge(settings: Settings) -> LlmJudge | None:
    """The configured judge; None means the rule-based evaluator."""
    if settings.evaluator.judge != "llm":
        return None
    store = ObjectStore(settings.s3) if settings.evaluator.vision else None
    return LlmJudge(settings, store)
