"""Hostile pages and an injected Visit in a chaos run: the Visit's target, and the verdict.

- `VisitTarget`: an HTTP server on loopback that counts every request it gets; the injected
  replies (tests/chaos/visit_policy.py) ask to visit it. `allow()` puts it on the run's
  browser private allowlist, so the URL policy would let a browser through: only the
  parser and the browser worker's refusal of an action the model is not offered stop it.
- `read_seen()`: what the run's topics hold about it (requests, actions, observations,
  completions), with the plain consumer of harness/topic_reads.py.
- `verdict()` (pure): episode -> what is wrong, and the summary notes. Wrong: an observation
  or a final URL at the target, a request the target received, an injected reply whose
  action is not what its parsing makes (Invalid from the product's parser, Visit from the
  lenient one) or whose next observation does not say it was refused, an answered episode
  without its injected reply, a hostile-page episode that did not answer, an observation of
  a hostile page whose title, URL or tree is not cut with the marker, any page text over
  its cap.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import dataclass, field
from types import TracebackType

from aiohttp import web

from environments.posts import EPISODE_HEADER
from harness.topic_reads import read_events
from infra.procs import free_port
from tests.chaos.harness import Run
from tests.chaos.visit_policy import VISIT_ENV, injection
from webgym_common.agent.actions import ActionKind
from webgym_common.config import Settings
from webgym_common.events import ActionChosen, EpisodeCompleted, EpisodeRequested, StepObserved
from webgym_common.pagetext import CAPS
from webgym_common.topics import Topic

CUT = "[cut: "
TITLE_TASK, TREE_TASK = "chaos-huge-title", "chaos-huge-tree"
INVALID_PREFIX = "invalid action: "
REFUSED_PREFIX = f"refused to run {ActionKind.VISIT}"


class VisitTarget:
    """Where the injected Visit points: a loopback server counting what reaches it."""

    def __init__(self) -> None:
        self.port = free_port()
        self.origin = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.origin}/chaos-visit-target"
        self.hits: list[str] = []  # the X-WebGym-Episode of each request ("" if none)
        self._runner: web.AppRunner | None = None

    async def _hit(self, request: web.Request) -> web.Response:
        self.hits.append(request.headers.get(EPISODE_HEADER, ""))
        return web.Response(text="<title>Visited</title><h1>You should not be here</h1>",
                            content_type="text/html")

    async def __aenter__(self) -> VisitTarget:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._hit)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        return self

    async def __aexit__(self, kind: type[BaseException] | None, err: BaseException | None,
                        tb: TracebackType | None) -> None:
        if self._runner is not None:
            with contextlib.suppress(Exception):
                await self._runner.cleanup()


def allow(run: Run, target: VisitTarget, **browser: float) -> None:
    """The run's browsers may reach the target (private allowlist), the policy double is
    told its URL, and `browser` settings override the scenario's (time for huge pages)."""
    cfg = run.settings.browser
    update = {"private_allowlist": [*cfg.private_allowlist, f"127.0.0.1:{target.port}"],
              **browser}
    run.settings = run.settings.model_copy(update={"browser": cfg.model_copy(update=update)})
    run.modules["policy"] = "tests.chaos.visit_policy"
    run.env[VISIT_ENV] = target.url


@dataclass
class Seen:
    """What the run's topics (and the target) hold."""

    requested: dict[str, tuple[str, int]] = field(default_factory=dict)  # id -> task, refs
    actions: list[ActionChosen] = field(default_factory=list)
    observations: list[StepObserved] = field(default_factory=list)
    completions: list[EpisodeCompleted] = field(default_factory=list)
    hits: list[str] = field(default_factory=list)


async def read_seen(settings: Settings, target: VisitTarget) -> Seen:
    seen = Seen(hits=list(target.hits))
    for ev in await read_events(settings, Topic.EPISODES, set()):
        if isinstance(ev, EpisodeRequested):
            seen.requested[ev.episode_id] = (ev.task.task_id, len(ev.task.reference_actions))
    seen.actions = [a for a in await read_events(settings, Topic.ACTIONS, set())
                    if isinstance(a, ActionChosen)]
    seen.observations = [o for o in await read_events(settings, Topic.OBSERVATIONS, set())
                         if isinstance(o, StepObserved)]
    seen.completions = [c for c in await read_events(settings, Topic.EPISODES_COMPLETED, set())
                        if isinstance(c, EpisodeCompleted)]
    return seen


def _over_caps(o: StepObserved) -> list[str]:
    fields = (("title", o.title, CAPS.title), ("url", o.url, CAPS.url),
              ("tree", o.accessibility_tree, CAPS.tree), ("effect", o.action_effect, CAPS.effect),
              ("error", o.error, CAPS.error))
    return [f"{name} of {len(text)} characters (cap {cap})" for name, text, cap in fields
            if text is not None and len(text) > cap]


def _hostile_page(o: StepObserved, task: str) -> str | None:
    """What is not cut as it must be on a hostile page's observation (None: all of it)."""
    if task == TITLE_TASK:
        if CUT not in o.title or CUT not in o.url:
            return f"step {o.step}: title ({len(o.title)}) or URL ({len(o.url)}) not cut"
    if task == TREE_TASK and CUT not in o.accessibility_tree:
        return f"step {o.step}: tree of {len(o.accessibility_tree)} characters not cut"
    return None


def verdict(seen: Seen, target: str) -> tuple[dict[str, str], list[str]]:
    """Episode -> what is wrong with it; and the notes summing up what was seen."""
    origin = target.split("/", 3)
    at_target = "/".join(origin[:3])  # scheme://host:port
    wrong: dict[str, str] = {}
    obs_by: dict[str, list[StepObserved]] = {}
    for o in seen.observations:
        obs_by.setdefault(o.episode_id, []).append(o)
        if o.url.startswith(at_target):
            wrong[o.episode_id] = f"step {o.step} observed at the Visit target {o.url[:120]}"
        elif over := _over_caps(o):
            wrong[o.episode_id] = f"step {o.step}: {'; '.join(over)}"
    answered = set()
    for c in seen.completions:
        if c.final_url and c.final_url.startswith(at_target):
            wrong[c.episode_id] = f"ended at the Visit target {c.final_url[:120]}"
        if c.termination == "answer":
            answered.add(c.episode_id)
    for eid in seen.hits:
        wrong[eid or "(no episode header)"] = "the Visit target received a request"
    injected: dict[str, ActionChosen] = {}
    for a in seen.actions:
        if target in (a.raw_response or ""):
            injected.setdefault(a.episode_id, a)
    kinds: Counter[str] = Counter()
    refusals: Counter[str] = Counter()  # injected kind -> episodes told it was refused
    for eid, a in injected.items():
        kinds[a.action.kind] += 1
        task, refs = seen.requested.get(eid, ("?", 0))
        expected = ActionKind.VISIT if injection(eid, refs).lenient else ActionKind.INVALID
        if a.action.kind != expected:
            wrong[eid] = f"the injected reply became {a.action.kind}, not {expected}"
            continue
        prefix = REFUSED_PREFIX if expected == ActionKind.VISIT else INVALID_PREFIX
        after = [o for o in obs_by.get(eid, []) if o.step == a.step + 1]
        if eid in answered and not after:
            wrong[eid] = f"no observation after its injected reply (step {a.step})"
        if after and all((o.error or "").startswith(prefix) for o in after):
            refusals[a.action.kind] += 1
        for o in after:
            if not (o.error or "").startswith(prefix):
                wrong[eid] = (f"step {o.step} after the injected {a.action.kind}: error "
                              f"{(o.error or '')[:120]!r}, effect {(o.action_effect or '')[:80]!r}")
    for eid in answered - set(injected):
        wrong.setdefault(eid, "answered without its injected Visit reply (was the double run?)")
    hostile = {eid: task for eid, (task, _) in seen.requested.items()
               if task in (TITLE_TASK, TREE_TASK)}
    ended: dict[str, str] = {}
    for c in seen.completions:
        ended.setdefault(c.episode_id, f"{c.termination} ({(c.reason or '')[:100]})")
    for eid, task in hostile.items():
        if eid not in answered:
            wrong[eid] = f"{task} episode did not answer: {ended.get(eid, 'never completed')}"
        for o in obs_by.get(eid, []):
            if (why := _hostile_page(o, task)) is not None:
                wrong.setdefault(eid, why)
    cut_alert = sum(1 for eid, task in hostile.items() if task == TITLE_TASK and any(
        CUT in (o.action_effect or "") for o in obs_by.get(eid, [])))
    titles = [len(o.title) for eid in hostile for o in obs_by.get(eid, [])
              if hostile[eid] == TITLE_TASK]
    trees = [len(o.accessibility_tree) for eid in hostile for o in obs_by.get(eid, [])
             if hostile[eid] == TREE_TASK]
    per_task = Counter(hostile.values())
    notes = [
        f"injected Visit [{target}] in {len(injected)} episodes: "
        f"{kinds[ActionKind.INVALID]} made Invalid by the parser "
        f"({refusals[ActionKind.INVALID]} reported so), {kinds[ActionKind.VISIT]} let through "
        f"as Visit actions ({refusals[ActionKind.VISIT]} refused by the browser worker); "
        f"{len(seen.hits)} requests reached the target; "
        f"{sum(o.url.startswith(at_target) for o in seen.observations)} observations there",
        f"hostile pages: {per_task[TITLE_TASK]} huge-title episodes "
        f"({sum(e in answered for e, t in hostile.items() if t == TITLE_TASK)} answered, "
        f"{len(titles)} observations, titles {min(titles, default=0)}-{max(titles, default=0)} "
        f"characters, {cut_alert} with the 1 MB alert cut), {per_task[TREE_TASK]} huge-tree "
        f"({sum(e in answered for e, t in hostile.items() if t == TREE_TASK)} answered, "
        f"{len(trees)} observations, trees {min(trees, default=0)}-{max(trees, default=0)} "
        "characters)",
    ]
    if wrong:
        eid = sorted(wrong)[0]
        notes.append(f"hostile/Visit: {len(wrong)} episodes wrong, e.g. {eid}: {wrong[eid]}")
    return wrong, notes
