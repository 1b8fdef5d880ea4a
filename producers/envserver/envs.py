"""The env server's decisions, pure: the env table, reaping, idx -> task, WebArena's action
grammar mapped onto ours, and the observation text in AgentGym's (WebArena's) form.

Nothing here does I/O; app.py consumes, calls these, and publishes.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from webgym_common.agent.actions import ActionKind
from webgym_common.events import (
    EpisodeCompleted,
    EpisodeScored,
    Mark,
    ParsedAction,
    StepObserved,
    Task,
)

# -- the env table --------------------------------------------------------------------


@dataclass
class Episode:
    """What the pipeline said about one env's current episode, by step."""

    episode_id: str
    task: Task
    observations: dict[int, StepObserved] = field(default_factory=dict)
    completed: EpisodeCompleted | None = None
    scored: EpisodeScored | None = None
    step: int = 0  # the step whose action comes next
    acted: int = -1  # the last step an action was published for
    previous_action: str = "None"  # WebArena writes "None" before the first action

    @property
    def current(self) -> StepObserved | None:
        return self.observations.get(self.step)

    @property
    def intent(self) -> str:
        """The task as the client sees it: a page's own instruction (MiniWoB++), else the task."""
        first = self.observations.get(0)
        return (first.instruction if first is not None and first.instruction else None) \
            or self.task.task_name

    def take(self, event: StepObserved | EpisodeCompleted | EpisodeScored) -> bool:
        """Record a pipeline event of this episode; False if it says nothing new (a replayed
        step is re-published by a resuming worker: the first one is kept)."""
        if isinstance(event, StepObserved):
            if event.step in self.observations:
                return False
            self.observations[event.step] = event
        elif isinstance(event, EpisodeCompleted):
            if self.completed is not None:
                return False
            self.completed = event
        else:
            if self.scored is not None:
                return False
            self.scored = event
        return True


@dataclass
class Env:
    env_idx: int
    last_used: float
    episode: Episode | None = None
    busy: bool = False  # a request is being served: never reaped meanwhile


def next_env_idx(envs: Mapping[int, Env], last: int) -> int:
    """Ids are never reused while the server runs (a reaped id answers "unknown env")."""
    return max([last, *envs]) + 1


def idle_envs(envs: Iterable[Env], now: float, idle_timeout_s: float) -> list[int]:
    """The envs to reap: untouched for `idle_timeout_s` and not serving a request."""
    return [e.env_idx for e in envs if not e.busy and now - e.last_used >= idle_timeout_s]


def running(episode: Episode | None) -> bool:
    """The episode was requested and has not ended: closing the env must cancel it."""
    return episode is not None and episode.completed is None


# -- idx -> task ----------------------------------------------------------------------


def catalog_order(tasks: Iterable[Task]) -> list[Task]:
    """The catalog as `idx` numbers it: sorted by task_id (done once per read)."""
    return sorted(tasks, key=lambda t: t.task_id)


def task_for_idx(ordered: Sequence[Task], idx: int) -> Task:
    """AgentGym's `idx` picks `config_files/{idx}.json`; here it picks the catalog's tasks
    (webgym.tasks) in catalog_order, so idx 0 is the first task id in sort order. O(1): an
    idx out of range is refused by the catalog's size alone."""
    if not 0 <= idx < len(ordered):
        raise IndexError(f"idx {idx} is out of range: the catalog has {len(ordered)} tasks "
                         f"(idx 0..{len(ordered) - 1}, tasks sorted by task_id)")
    return ordered[idx]


# -- WebArena's actions ---------------------------------------------------------------


class WebArenaVerb(StrEnum):
    CLICK = "click"
    HOVER = "hover"
    TYPE = "type"
    PRESS = "press"
    SCROLL = "scroll"
    NEW_TAB = "new_tab"
    TAB_FOCUS = "tab_focus"
    CLOSE_TAB = "close_tab"
    GOTO = "goto"
    GO_BACK = "go_back"
    GO_FORWARD = "go_forward"
    STOP = "stop"


# What the pipeline's grammar cannot express, and why (the step answers with this error).
UNSUPPORTED: dict[WebArenaVerb, str] = {
    WebArenaVerb.PRESS: "key presses are not in the grammar (type [id] [text] presses Enter)",
    WebArenaVerb.NEW_TAB: "an episode has one tab (a page's own pop-up is followed)",
    WebArenaVerb.TAB_FOCUS: "an episode has one tab (a page's own pop-up is followed)",
    WebArenaVerb.CLOSE_TAB: "an episode has one tab (a page's own pop-up is followed)",
    WebArenaVerb.GO_FORWARD: "there is no forward navigation in the grammar",
}


class ActionError(ValueError):
    """The step cannot be taken; the message is the step's observation (reward 0)."""


_BLOCK = re.compile(r"```(.*?)```", re.S)
_ARGS = re.compile(r"\[(.*?)\]", re.S)
_VERB = re.compile(r"^\s*([A-Za-z_]+)\s*(.*?)\s*$", re.S)


def extract_action(raw: str) -> str:
    """The action inside the first ``` block of the model's reply (WebArena's splitter)."""
    found = _BLOCK.search(raw)
    if found is None:
        raise ActionError(f"Cannot parse action: no ```action``` block in {raw[:200]!r}")
    action = found.group(1).strip()
    if not action:
        raise ActionError("Cannot parse action: the ``` block is empty")
    return action


def _element(arg: str, marks: Mapping[int, Mark]) -> int:
    if not arg.strip().isdigit():
        raise ActionError(f"Invalid element id [{arg}]: expected a number from the observation")
    element = int(arg)
    if element not in marks:
        raise ActionError(f"No element [{element}] on the current page")
    return element


def to_action(text: str, marks: Mapping[int, Mark]) -> ParsedAction:
    """WebArena's action (`click [12]`) as ours (`Click [12]`), checked against the marks of
    the page the client saw; raises ActionError with what is wrong."""
    head = _VERB.match(text)
    if head is None:
        raise ActionError(f"Invalid action {text!r}: no action name")
    name, rest = head.group(1).lower(), head.group(2)
    try:
        verb = WebArenaVerb(name)
    except ValueError:
        raise ActionError(f"Invalid action {text!r}: unknown verb {name!r}") from None
    if verb in UNSUPPORTED:
        raise ActionError(f"Unsupported action {text!r}: {UNSUPPORTED[verb]}")
    if verb is WebArenaVerb.TYPE:
        found = re.fullmatch(r"\s*\[(.*?)\]\s*\[(.*?)\](?:\s*\[([01])\])?\s*", rest, re.S)
        if found is None:
            raise ActionError(f"Invalid action {text!r}: type [id] [text] [press_enter]")
        if found.group(3) == "0":
            raise ActionError(f"Unsupported action {text!r}: typing always presses Enter here "
                              "(press_enter_after 0 cannot be expressed)")
        return ParsedAction(kind=ActionKind.TYPE.value,
                            element=_element(found.group(1), marks), text=found.group(2))
    args = _ARGS.findall(rest)
    if verb is WebArenaVerb.STOP:  # everything inside the outer brackets; none: no answer
        inner = rest.strip()
        answer = inner[1:-1] if inner.startswith("[") and inner.endswith("]") else inner
        return ParsedAction(kind=ActionKind.ANSWER.value, text=answer.strip())
    if verb is WebArenaVerb.GO_BACK:
        return ParsedAction(kind=ActionKind.GO_BACK.value)
    if len(args) != 1:
        raise ActionError(f"Invalid action {text!r}: {verb} takes one [argument]")
    (arg,) = args
    if verb is WebArenaVerb.CLICK:
        return ParsedAction(kind=ActionKind.CLICK.value, element=_element(arg, marks))
    if verb is WebArenaVerb.HOVER:
        return ParsedAction(kind=ActionKind.HOVER.value, element=_element(arg, marks))
    if verb is WebArenaVerb.SCROLL:
        direction = arg.strip().lower().removeprefix("direction=")
        if direction not in ("up", "down"):
            raise ActionError(f"Invalid action {text!r}: scroll [up] or scroll [down]")
        return ParsedAction(kind=ActionKind.SCROLL.value, direction=direction)
    if not arg.strip():  # goto
        raise ActionError(f"Invalid action {text!r}: goto [url]")
    return ParsedAction(kind=ActionKind.VISIT.value, url=arg.strip())


def describe(text: str, action: ParsedAction, marks: Mapping[int, Mark]) -> str:
    """PREVIOUS ACTION as WebArena writes it: the action, and what its id named."""
    mark = marks.get(action.element) if action.element is not None else None
    if mark is None:
        return text
    return f"{text} where [{mark.index}] is {mark.role} '{mark.name}'"




# -- the observation text -------------------------------------------------------------

_NODE = re.compile(
    r"""^(?P<role>[\w-]+)(?: "(?P<name>(?:[^"\\]|\\.)*)")?(?P<attrs>(?:\s*\[[^\]]*\])*)"""
    r"""(?::\s*(?P<text>.*))?$"""
)
_ATTR = re.compile(r"\[([^\]=]+)(?:=([^\]]*))?\]")
_HIDDEN_ATTRS = {"ref", "box", "cursor"}
_ATTR_NAMES = {"active": "focused"}  # WebArena's word for it


def _unquote(item: str) -> str:
    """A YAML-quoted snapshot line (`'link "Price: low" [ref=e5]'`) as it reads unquoted."""
    if len(item) >= 2 and item[0] == "'" and item.rstrip(":").endswith("'"):
        tail = ":" if item.endswith(":") else ""
        return item.rstrip(":")[1:-1].replace("''", "'") + tail
    if len(item) >= 2 and item[0] == '"' and item[-1] == '"':
        return item[1:-1].replace('\\"', '"')
    return item


def render_tree(tree: str, marks: Sequence[Mark]) -> str:
    """The aria snapshot as WebArena's accessibility tree: one node a line, tab-indented;
    `[N] role 'name'` for the numbered elements (N is what the actions name), `role 'name'`
    for other named nodes, `StaticText 'text'` for text; unnamed structure is left out (its
    children stay), as WebArena prunes it."""
    ids = {m.ref: m for m in marks}
    out: list[str] = []
    kept: list[int] = []  # the snapshot indents of the shown ancestors of this line
    for line in tree.splitlines():
        stripped = line.lstrip()
        if not stripped.startswith("- "):
            continue
        indent = len(line) - len(stripped)
        while kept and kept[-1] >= indent:
            kept.pop()
        tabs = "\t" * (len(kept) + 1)
        item = _unquote(stripped[2:].strip())
        if item.startswith("/"):  # /url:, /placeholder: properties
            continue
        if item.startswith("text:"):
            out.append(f"{tabs}StaticText '{_unquote(item[5:].strip())}'")
            continue
        node = _NODE.match(item)
        if node is None:
            out.append(f"{tabs}StaticText '{item}'")
            continue
        attrs = dict(_ATTR.findall(node["attrs"] or ""))
        name = (node["name"] or "").replace('\\"', '"')
        mark = ids.get(attrs.get("ref", ""))
        if mark is not None and not name:
            name = mark.name
        shown = [f"{_ATTR_NAMES.get(k.strip(), k.strip())}: {v or 'True'}"
                 for k, v in attrs.items() if k.strip() not in _HIDDEN_ATTRS]
        text = (node["text"] or "").strip()
        if mark is None and not name and not shown:
            if text:
                out.append(f"{tabs}StaticText '{_unquote(text)}'")
            continue
        kept.append(indent)
        head = f"[{mark.index}] " if mark is not None else ""
        out.append(" ".join([f"{tabs}{head}{node['role']} '{name}'", *shown]))
        if text and text != name:
            out.append(f"{tabs}\tStaticText '{_unquote(text)}'")
    return "\n".join(out)


def observation_text(obs: StepObserved, intent: str, previous_action: str,
                     max_chars: int) -> str:
    """WebArena's prompt observation: OBSERVATION (the tree), URL, OBJECTIVE, PREVIOUS ACTION."""
    tree = f"RootWebArea '{obs.title}' focused: True\n" + render_tree(
        obs.accessibility_tree, obs.marks)
    if len(tree) > max_chars:
        tree = tree[:max_chars] + "\n... (cut)"
    if obs.error:
        previous_action = f"{previous_action} (failed: {obs.error})"
    return (f"OBSERVATION:\n{tree}\nURL: {obs.url}\nOBJECTIVE: {intent}\n"
            f"PREVIOUS ACTION: {previous_action}")


# -- endings --------------------------------------------------------------------------

TRUNCATIONS = frozenset({"max_steps", "timeout"})


def ending(completed: EpisodeCompleted, scored: EpisodeScored | None) -> tuple[float, bool, dict]:
    """(reward, truncated, info) of an ended episode. Every ending terminates (AgentGym's
    client stops on `terminated`); the step or time limit also sets `truncated`."""
    info: dict = {"termination": completed.termination, "steps": completed.steps}
    if completed.reason:
        info["reason"] = completed.reason
    if scored is None:
        info["reward_error"] = "the evaluator's score did not come in time: reward 0"
        return 0.0, completed.termination in TRUNCATIONS, info
    info["evaluation"] = scored.evaluation
    return float(scored.reward), completed.termination in TRUNCATIONS, info
