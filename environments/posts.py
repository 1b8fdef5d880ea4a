"""Form posts per episode: the sandbox's record of side effects, for the chaos suite.

Delivery: this is an observer, not a participant. Every POST a sandbox site handles (cart
add/remove, checkout, login, reply, upvote, booking) is counted under the episode named by
the request's `X-WebGym-Episode` header (the browser worker sets it on every context), so an
action executed twice on a site (an episode re-run after a kill) is visible as one post too
many. Counts live in the server's memory and are lost with it, like the sites' own sessions.

A post that also carries `X-WebGym-Rerun: 1` is a step the browser re-executes to rebuild a
resumed episode's page after its previous owner was lost; it is counted apart, as a rerun,
so a report can say both "each form was posted once" and "N posts were re-sent on resume".
So is a post whose idempotency key (`X-WebGym-Step` + form, per episode) came before: the
action a killed owner executed without publishing its result, executed again by the next
owner (the site sees the same key twice and, honouring it, applies the effect once).

`GET /__webgym/posts` returns `{"posts": {episode: n}, "reruns": {episode: n}}`;
`GET /__webgym/posts?episode=ID` one episode's counts and the forms it posted, in order
(a re-run one prefixed "rerun "). Posts without the header are counted under "" (so a
worker that forgot the header shows up as such).

`reference_posts()` says how many posts a task's reference actions make when executed once
(what a clean teacher-forced episode must leave behind), from the sandbox's forms below.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from aiohttp import web

EPISODE_HEADER = "X-WebGym-Episode"
RERUN_HEADER = "X-WebGym-Rerun"
STEP_HEADER = "X-WebGym-Step"
RERUN = "rerun "
POSTS_PATH = "/__webgym/posts"
# Plenty for any test run; the oldest episode is forgotten first beyond this.
MAX_EPISODES = 100_000

# The controls of the sandbox's POST forms (shop.py, forum.py, travel.py): a Type into one of
# these fields ends with Enter, which submits its form; a Click on one of these buttons submits.
POST_FIELDS = frozenset({
    "Quantity",  # shop: add to cart
    "Full name", "Shipping address",  # shop: checkout
    "Username", "Password",  # forum: log in
    "Your reply",  # forum: reply
    "Lead passenger name", "Email",  # travel: booking
})
POST_BUTTONS = frozenset({"Add to cart", "Place order", "Sign in", "Log out", "Post reply",
                          "Confirm booking"})
POST_BUTTON_PREFIXES = ("Remove ", "Upvote post ")  # one per cart line / forum post


class PostCounter:
    """Posts per episode id, in arrival order; bounded (oldest episode forgotten first)."""

    def __init__(self, max_episodes: int = MAX_EPISODES) -> None:
        self.max_episodes = max_episodes
        self.forms: OrderedDict[str, list[str]] = OrderedDict()
        self.keys: dict[str, set[tuple[str, str]]] = {}  # episode -> (step, form) seen

    def record(self, episode: str, form: str, rerun: bool = False, step: str | None = None
               ) -> None:
        """One post; a rerun, or a repeat of an idempotency key (step + form), counts apart."""
        if episode not in self.forms and len(self.forms) >= self.max_episodes:
            gone, _ = self.forms.popitem(last=False)
            self.keys.pop(gone, None)
        if step is not None and not rerun:
            seen = self.keys.setdefault(episode, set())
            rerun = (step, form) in seen
            seen.add((step, form))
        self.forms.setdefault(episode, []).append((RERUN if rerun else "") + form)

    def counts(self, reruns: bool = False) -> dict[str, int]:
        """Posts per episode: first executions, or (`reruns`) re-sent reruns."""
        out = {}
        for episode, forms in self.forms.items():
            n = sum(f.startswith(RERUN) == reruns for f in forms)
            if n or not reruns:
                out[episode] = n
        return out

    def of(self, episode: str) -> list[str]:
        return list(self.forms.get(episode, []))


def posts_step(action: Mapping[str, Any]) -> bool:
    """Whether one reference step (`{action, role, name, ...}`) submits a POST form."""
    kind, name = action.get("action"), str(action.get("name") or "")
    if kind == "Type":
        return name in POST_FIELDS
    if kind == "Click":
        return name in POST_BUTTONS or name.startswith(POST_BUTTON_PREFIXES)
    return False


def reference_posts(actions: Iterable[Mapping[str, Any]]) -> int:
    """How many form posts a task's reference actions make when each is executed once."""
    return sum(posts_step(a) for a in actions)


def setup(app: web.Application) -> PostCounter:
    """Count every POST the app handles and serve the counts; returns the counter."""
    counter = PostCounter()

    @web.middleware
    async def count_posts(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        if request.method == "POST":
            # Counted on arrival, before the handler: a post the site refuses is still a post.
            counter.record(request.headers.get(EPISODE_HEADER, ""), request.path,
                           rerun=request.headers.get(RERUN_HEADER) == "1",
                           step=request.headers.get(STEP_HEADER))
        return await handler(request)

    async def posts(request: web.Request) -> web.Response:
        episode = request.query.get("episode")
        if episode is None:
            return web.json_response({"posts": counter.counts(),
                                      "reruns": counter.counts(reruns=True)})
        forms = counter.of(episode)
        reruns = sum(f.startswith(RERUN) for f in forms)
        return web.json_response({"episode": episode, "posts": len(forms) - reruns,
                                  "reruns": reruns, "forms": forms})

    app.middlewares.append(count_posts)
    app.router.add_get(POSTS_PATH, posts)
    return counter
