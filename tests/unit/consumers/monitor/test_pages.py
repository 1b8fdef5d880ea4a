"""The monitor's pages escape hostile text (task text, page titles, model output) and serve
nothing but screenshots from the object store; every route is read-only."""

from __future__ import annotations

import pytest
from aiohttp.test_utils import TestClient, TestServer

from consumers.monitor.hub import Monitor
from consumers.monitor.pages import make_app
from consumers.monitor.state import View
from tests.factories import sample_event
from tests.unit.consumers.monitor.test_state import acted, completed, observed, requested
from tests.unit.scored import scored
from webgym_common.config import load_settings
from webgym_common.events import DeadLetter, Mark

EVIL = "<script>window.__pwned=1</script>"
EVIL_IMG = '"><img src=x onerror="window.__pwned=2">'


def hostile_view() -> View:
    v = View()
    r = requested("e1")
    v.apply(r.model_copy(update={"task": r.task.model_copy(update={
        "task_name": f"Find {EVIL} the price", "task_id": f"t{EVIL_IMG}"})}), 1)
    mark = Mark(index=1, ref="e1", role="link", name=EVIL, x=1, y=1, width=10, height=10)
    v.apply(observed("e1", 0, title=f"Search: {EVIL}", url=f"http://s/?q={EVIL_IMG}",
                     marks=[mark]), 2)
    v.apply(acted("e1", 0, action=f"Type [1] [{EVIL}]").model_copy(
        update={"thought": EVIL, "memory_json": EVIL_IMG}), 3)
    v.apply(completed("e1"), 4)
    v.apply(scored("e1", reward=1.0).model_copy(update={
        "evaluation": f"[criterion B] SUCCESS — {EVIL}", "answer": EVIL_IMG}), 5)
    letter = sample_event("DeadLetter")
    assert isinstance(letter, DeadLetter)
    v.apply(letter.model_copy(update={"error": EVIL}), 6)
    return v


@pytest.fixture
async def client() -> TestClient:
    monitor = Monitor(load_settings(), hostile_view())
    async with TestClient(TestServer(make_app(monitor))) as c:
        yield c


@pytest.mark.parametrize("path", ["/", "/episodes", "/episodes/e1", "/dlq", "/models", "/tasks",
                                  "/metrics", "/episodes?task=price"])
async def test_hostile_text_is_escaped_on_every_page(client: TestClient, path: str) -> None:
    response = await client.get(path)
    assert response.status == 200
    html = await response.text()
    assert "<script>window" not in html and "<img src=x" not in html
    assert "script-src 'self'" in response.headers["Content-Security-Policy"]


async def test_the_viewer_shows_every_field_escaped(client: TestClient) -> None:
    html = await (await client.get("/episodes/e1")).text()
    assert html.count("&lt;script&gt;window.__pwned=1&lt;/script&gt;") >= 5  # task, title, ...
    assert "&#34;&gt;&lt;img src=x onerror=&#34;window.__pwned=2&#34;&gt;" in html
    assert 'class="mark"' in html and "/screenshot?uri=s3%3A//webgym/sha256/0.jpg" in html


async def test_live_stats_and_plots(client: TestClient) -> None:
    stats = await (await client.get("/stats")).json()
    assert stats["iteration"] == 3 and stats["progress"]["done"] == 1
    for name in ("metrics", "learning-curve", "losses"):
        response = await client.get(f"/plots/{name}.png")
        assert response.status == 200
        assert (await response.read())[:8] == b"\x89PNG\r\n\x1a\n"
    assert (await client.get("/plots/other.png")).status == 404


@pytest.mark.parametrize(("uri", "status"), [
    ("s3://other/sha256/ab/abc.jpg", 403), ("s3://webgym/models/v1/adapter.bin", 403),
    ("s3://webgym/sha256/ab/abc.json", 403), ("http://example.com/x.jpg", 400)])
async def test_only_screenshots_are_served(client: TestClient, uri: str, status: int) -> None:
    assert (await client.get("/screenshot", params={"uri": uri})).status == status


async def test_nothing_but_get(client: TestClient) -> None:
    for path in ("/", "/episodes/e1", "/screenshot"):
        assert (await client.post(path)).status == 405


async def test_live_updates_arrive_as_server_sent_events() -> None:
    monitor = Monitor(load_settings(), View())
    async with TestClient(TestServer(make_app(monitor))) as c:
        response = await c.get("/live/events")
        assert response.headers["Content-Type"] == "text/event-stream"
        assert await response.content.readline() == b"retry: 1000\n"
        change = monitor.view.apply(requested("e7"), 1234)
        assert change is not None
        monitor.announce(change, 1234)
        lines = [await response.content.readline() for _ in range(6)]
        events = [x for x in lines if x.startswith(b"event:")]
        assert events == [b"event: iteration\n", b"event: episode\n"]
        data = next(x for x in lines if b'"e7"' in x)
        assert b'"ts": 1234' in data and b'"state": "waiting"' in data
        response.close()


async def test_a_page_connecting_mid_iteration_first_gets_its_rows_as_they_are() -> None:
    monitor = Monitor(load_settings(), View())
    for eid in ("e1", "e2"):
        assert monitor.view.apply(requested(eid), 1000) is not None
    async with TestClient(TestServer(make_app(monitor))) as c:
        response = await c.get("/live/events")
        assert await response.content.readline() == b"retry: 1000\n"
        lines = [await response.content.readline() for _ in range(10)]
        events = [x for x in lines if x.startswith(b"event:")]
        assert events == [b"event: iteration\n", b"event: row\n", b"event: row\n"]
        rows = [x for x in lines if x.startswith(b"data:") and b'"id"' in x]
        assert [b'"e1"' in rows[0], b'"e2"' in rows[1]] == [True, True]
        assert all(b'"ts"' not in x for x in rows)  # not a live change: no latency
        response.close()
