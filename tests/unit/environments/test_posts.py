"""The sandbox's form-post counter, over plain HTTP against the real aiohttp app."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from html.parser import HTMLParser

import httpx
import pytest
import pytest_asyncio

from environments.app import TASKS_FILE, start_sandbox
from environments.posts import (
    EPISODE_HEADER,
    POST_BUTTON_PREFIXES,
    POST_BUTTONS,
    POST_FIELDS,
    POSTS_PATH,
    RERUN_HEADER,
    STEP_HEADER,
    PostCounter,
    reference_posts,
)
from environments.tasks.build_tasks import written
from infra.procs import free_port

TASKS = {t["task_id"]: t for t in map(json.loads, TASKS_FILE.read_text().splitlines())}
# every hand-written task, those the split rule leaves out of the file too (build_tasks.MIXED)
WRITTEN = {t["task_id"]: t for t in written()}


@pytest_asyncio.fixture(loop_scope="session")
async def client() -> AsyncIterator[httpx.AsyncClient]:
    port = free_port()
    runner = await start_sandbox("127.0.0.1", port)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:
            yield c
    finally:
        await runner.cleanup()


def episode(name: str) -> dict[str, str]:
    return {EPISODE_HEADER: name}


async def test_every_post_is_counted_under_its_episode(client: httpx.AsyncClient) -> None:
    product = {"product": "acme-volt-500", "quantity": "1"}
    await client.post("/shop/cart/add", data=product, headers=episode("e1"))
    await client.post("/shop/cart/add", data=product, headers=episode("e1"))
    await client.post("/forum/login", data={"username": "alice"}, headers=episode("e2"))
    # Refused posts count too (an empty cart add is a 400): the request reached the site.
    await client.post("/shop/cart/add", data={}, headers=episode("e2"))
    await client.post("/forum/login", data={"username": "bob"})  # no header
    await client.get("/shop/", headers=episode("e3"))  # GETs are not side effects
    # A step re-executed to rebuild a resumed episode is counted apart, as a rerun.
    await client.post("/forum/login", data={"username": "alice"},
                      headers={**episode("e2"), RERUN_HEADER: "1"})

    counts = (await client.get(POSTS_PATH)).json()
    assert counts == {"posts": {"e1": 2, "e2": 2, "": 1}, "reruns": {"e2": 1}}
    one = (await client.get(POSTS_PATH, params={"episode": "e1"})).json()
    assert one == {"episode": "e1", "posts": 2, "reruns": 0, "forms": ["/shop/cart/add"] * 2}
    two = (await client.get(POSTS_PATH, params={"episode": "e2"})).json()
    assert two["posts"] == 2 and two["reruns"] == 1
    assert two["forms"][-1] == "rerun /forum/login"
    none = (await client.get(POSTS_PATH, params={"episode": "unknown"})).json()
    assert none == {"episode": "unknown", "posts": 0, "reruns": 0, "forms": []}


async def test_a_repeated_idempotency_key_is_a_re_send(client: httpx.AsyncClient) -> None:
    """The action a killed owner ran, run again by the next owner under the same step."""
    form = {"username": "carol"}
    for step in ("3", "3", "4"):
        await client.post("/forum/login", data=form,
                          headers={**episode("e7"), STEP_HEADER: step})
    one = (await client.get(POSTS_PATH, params={"episode": "e7"})).json()
    assert (one["posts"], one["reruns"]) == (2, 1)
    assert one["forms"] == ["/forum/login", "rerun /forum/login", "/forum/login"]


def test_the_counter_forgets_the_oldest_episode_beyond_its_bound() -> None:
    counter = PostCounter(max_episodes=2)
    for eid in ("a", "b", "a", "c"):
        counter.record(eid, "/x")
    assert counter.counts() == {"b": 1, "c": 1}


@pytest.mark.parametrize(("task_id", "posts"), [
    ("wiki-001", 0), ("shop-001", 0),  # searches are GET forms
    ("shop-011", 1),  # Type Quantity + Enter submits the cart form
    ("shop-012", 1), ("shop-018", 3),  # two adds and a remove
    ("shop-016", 3),  # add, then checkout in two submissions (name, then address)
    ("forum-007", 2), ("forum-011", 3), ("forum-014", 4),
    ("travel-001", 0), ("travel-008", 2), ("travel-010", 2),  # the fare radio does not post
])
def test_reference_posts_counts_the_steps_that_submit_a_post_form(task_id: str,
                                                                   posts: int) -> None:
    assert reference_posts(WRITTEN[task_id]["reference_actions"]) == posts


class _PostForms(HTMLParser):
    """The text fields' labels and the buttons of every method=post form on a page."""

    def __init__(self) -> None:
        super().__init__()
        self.in_post = self.in_button = False
        self.labels: dict[str, str] = {}  # for-id -> label text (any form)
        self.label_for: str | None = None
        self.text_ids: set[str] = set()  # text-like inputs inside POST forms
        self.buttons: list[str] = []
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "form":
            self.in_post = (a.get("method") or "").lower() == "post"
        elif tag == "label":
            self.label_for, self._text = a.get("for"), ""
        elif tag == "button" and self.in_post:
            self.in_button, self._text = True, ""
        elif self.in_post and tag == "textarea" or (
                tag == "input" and self.in_post and a.get("type") not in ("hidden", "radio")):
            self.text_ids.add(a.get("id") or "")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.in_post = False
        elif tag == "label" and self.label_for:
            self.labels[self.label_for] = self._text.strip()
            self.label_for = None
        elif tag == "button" and self.in_button:
            self.buttons.append(self._text.strip())
            self.in_button = False

    def handle_data(self, data: str) -> None:
        self._text += data

    def fields(self) -> set[str]:
        return {self.labels[i] for i in self.text_ids if i in self.labels}


def post_controls(html: str) -> tuple[set[str], list[str]]:
    parser = _PostForms()
    parser.feed(html)
    return parser.fields(), parser.buttons


async def test_the_post_tables_cover_every_post_form_of_the_sites(
        client: httpx.AsyncClient) -> None:
    """reference_posts() is only right while the sites' POST forms are the ones it lists."""
    pages = ["/shop/product/acme-volt-500", "/forum/login",
             "/travel/book?flight=KJ+131&date=2026-06-16&passengers=1"]
    await client.post("/shop/cart/add", data={"product": "acme-volt-500", "quantity": "1"})
    pages += ["/shop/cart", "/shop/checkout"]
    await client.post("/forum/login", data={"username": "alice", "password": "wonderland"})
    pages += ["/forum/thread/101"]
    fields: set[str] = set()
    buttons: list[str] = []
    for path in pages:
        resp = await client.get(path)
        assert resp.status_code == 200, path
        f, b = post_controls(resp.text)
        fields |= f
        buttons += b
    assert fields == POST_FIELDS
    assert {b for b in buttons if not b.startswith(POST_BUTTON_PREFIXES)} == POST_BUTTONS
    assert any(b.startswith("Remove ") for b in buttons)
    assert any(b.startswith("Upvote post ") for b in buttons)
