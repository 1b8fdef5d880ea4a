"""Rule-based checks: answer normalization, crash detection, anti-bot walls.

These need no model: the default evaluator (`judge: rules`) is built from them,
and the LLM judge uses them too (a normalized match passes the definite-answer
check without a model call; crashed trajectories are not judged).
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import urlsplit

from processors.evaluator.trajectory import Episode

# WebGym's minimum: an episode shorter than this that neither answered nor was blocked crashed.
MIN_STEPS = 10
_CURRENCY = re.compile(r"[$€£¥₹₩]|\b(?:usd|eur|gbp)\b", re.I)
_THOUSANDS = re.compile(r"(?<=\d)[,'’ ](?=\d{3}(?!\d))")
_DECIMAL_POINT = re.compile(r"(?<=\d)\.(?=\d)")
_PUNCTUATION = re.compile(r"[^\w\s\x00]|_")
# The same wall phrases the browser workers look for (producers/browser/observe.py).
_WALL = re.compile(
    r"verify you are (a )?human|are you a robot|captcha|unusual traffic|access denied"
    r"|403 forbidden|checking your browser",
    re.I,
)


def normalize_answer(text: str) -> str:
    """Lower case, no currency signs, thousand separators or punctuation, single spaces.

    A decimal point between digits survives, so "3.5" never equals "35".
    """
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _CURRENCY.sub(" ", text)
    text = _THOUSANDS.sub("", text)
    text = _DECIMAL_POINT.sub("\0", text)  # shield decimal points from the punctuation pass
    text = _PUNCTUATION.sub(" ", text).replace("\0", ".")
    return " ".join(text.split())


def answers_match(answer: str | None, expected: str) -> bool:
    """Whether an ANSWER states the definite answer, up to formatting."""
    if answer is None:
        return False
    got, want = normalize_answer(answer), normalize_answer(expected)
    if not want:
        return False
    # "32GB" and "32 GB", "APS-C" and "APSC": spacing is formatting too.
    return got == want or got.replace(" ", "") == want.replace(" ", "")


def looks_like_wall(page_text: str) -> bool:
    return bool(_WALL.search(page_text))


def ends_on_wall(episode: Episode) -> bool:
    """Blocking by the rules: the last page the agent saw is an anti-bot or 403 wall."""
    observed = [s for s in episode.trajectory if s.observed]
    return bool(observed) and looks_like_wall(f"{observed[-1].title}\n{observed[-1].page_text}")


def is_valid_url(url: str | None) -> bool:
    if not url:
        return False
    parts = urlsplit(url)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


def crash_reason(episode: Episode, blocked: bool) -> str | None:
    """Why the trajectory counts as crashed (WebGym's rules), or None.

    Crashed: the browser said so; the trajectory is empty; its first action is an
    invalid URL; it has dummy (null) actions; or it has fewer than 10 steps, does
    not end with an answer and is not blocked.
    """
    if episode.termination == "crashed":
        return f"the browser crashed: {episode.reason or 'no reason given'}"
    steps = episode.trajectory
    if not steps or not any(s.observed for s in steps):
        return "the trajectory is empty"
    first = steps[0]
    if first.action_kind == "Visit" and not is_valid_url(first.action_url):
        return f"the first action visits an invalid URL: {first.action_url!r}"
    if first.observed and not is_valid_url(first.url):
        return f"the start page is not a web page: {first.url!r}"
    # Every step but the last observed one must have an action (the last may be terminal).
    last_observed = max(s.step for s in steps if s.observed)
    for s in steps:
        if s.step < last_observed and (s.action_string is None or not s.action_string.strip()):
            return f"step {s.step} has a dummy (null) action"
    # An episode that used its whole step budget did not stop early, whatever the budget.
    minimum = min(MIN_STEPS, episode.max_steps) if episode.max_steps > 0 else MIN_STEPS
    if episode.steps_taken < minimum and not episode.submitted and not blocked:
        return (f"{episode.steps_taken} steps (fewer than {minimum}), no answer and not "
                f"blocked ({episode.termination})")
    return None
