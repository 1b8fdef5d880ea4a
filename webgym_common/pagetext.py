"""How much text a page may put into an event: the one table of caps, and the cut.

Delivery: nothing here sends; the browser worker cuts what it observes before it
publishes (producers/browser/observe.py, episode.py, endings.py, session.py) and the
policy cuts again what it keeps of a step in the prompt's history (an older event in the
log was published uncut).

A page chooses its title, its URL (Chromium takes up to 2 MB), its accessibility tree, its
elements' names, its dialogs' text and its downloads' names. Uncut, one hostile page makes a
StepObserved bigger than Kafka takes, or fills the prompt's history with its dialog text. Each
cap is in characters; a cut text ends with a visible marker saying how long it was, so
neither the model nor a reader takes it for the whole. Together the caps keep an observation
well under KafkaSettings.max_request_size even with every field full of 4-byte characters (a
unit test adds up the worst case).
"""

from __future__ import annotations

from dataclasses import dataclass

ELLIPSIS = "…"
# What comes before the marker of a cut accessibility tree: a paragraph of its own in the
# snapshot's syntax, so the page view (webgym_common.agent.pageview) tells the model too.
TREE_SEP = "\n- paragraph: "


@dataclass(frozen=True)
class PageTextCaps:
    """The most characters of page-derived text each place of an event carries."""

    title: int = 2048
    url: int = 2048  # StepObserved.url, EpisodeCompleted.final_url
    effect: int = 2048  # StepObserved.action_effect, and a step's effect in the prompt history
    error: int = 2048  # StepObserved.error (an action's failure quotes the page or the action)
    instruction: int = 2048  # the task as a self-scoring page wrote it
    reason: int = 2048  # EpisodeCompleted.reason (a page's own done reason, a crash message)
    answer: int = 2048  # EpisodeCompleted.answer (an external driver's answer has no bound)
    tree: int = 256 * 1024  # the aria snapshot; the marks are read from what is kept
    mark_name: int = 500  # one element's name (the prompt shows 80 of it)
    note: int = 500  # a dialog's message or a download's file name, inside the effect


CAPS = PageTextCaps()


def marker(length: int) -> str:
    return f"{ELLIPSIS}[cut: {length} characters in all]"


def cut(text: str, limit: int, sep: str = "") -> str:
    """`text` if it has at most `limit` characters; else its start, then `sep` and the
    marker, `limit` characters in all (the marker alone if `limit` leaves no room)."""
    if len(text) <= limit:
        return text
    tail = sep + marker(len(text))
    return text[: max(0, limit - len(tail))] + tail


def cut_or_none(text: str | None, limit: int) -> str | None:
    return None if text is None else cut(text, limit)
