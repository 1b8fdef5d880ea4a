"""`webgym monitor` in real Chromium (Playwright) while a teacher-forced rollout runs on the
embedded stack (Kafka, MinIO, a browser worker, the evaluator, history, metrics).

Checks that the live grid shows episodes changing state without a reload, that an
episode's viewer loads its screenshots (decoded, non-zero size) and steps with the arrow
keys, that the metrics page draws its plots, and that hostile text (a task whose text holds
a script, a page title with markup, an answer with an onerror image) is shown as text and
never runs. With WEBGYM_MONITOR_SCREENSHOTS=<dir> it saves a screenshot of each page there
(docs/monitor/ in the README).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page
from playwright.async_api import TimeoutError as PlaywrightTimeoutError
from rich.console import Console

from harness.launch import PipelineProcess
from infra.procs import free_port
from producers.catalog import load_tasks
from producers.controller.run import rollout
from tests.support.chromium import chromium
from webgym_common.choices import SamplingStrategy
from webgym_common.config import Settings
from webgym_common.stream.bus import EventProducer

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

SHOTS = os.environ.get("WEBGYM_MONITOR_SCREENSHOTS")
SANDBOX = Path("environments/tasks/sandbox_tasks.jsonl")
LINES = {json.loads(x)["task_id"]: json.loads(x) for x in SANDBOX.read_text().splitlines()}
EVIL = "<script>window.__pwned=1</script>"
HOSTILE = {
    **LINES["shop-003"], "task_id": "evil-001",  # a train task, as its base is
    "task_name": f"Search the shop for {EVIL} and report what it says",
    "website": "{sandbox}/shop/search?q=" + EVIL,  # the page's title echoes the query
    "definite_answer": None,
    "reference_actions": [{"action": "Scroll", "direction": "down"},
                          {"action": "ANSWER", "text": '<img src=x onerror="window.__pwned=2">'}],
}
TASKS = ["shop-003", "wiki-003", "forum-003", "travel-001", "shop-004"]  # train tasks


def fast(settings: Settings, tmp_path: Path) -> Settings:
    rollout_cfg = settings.rollout.model_copy(update={
        "completion_threshold": 1.0, "grace_period_s": 3.0, "cancel_wait_s": 30.0,
        "score_wait_s": 90.0, "task_timeout_minutes": 5.0, "seed": 7,
        "strategy": SamplingStrategy.UNIFORM})
    monitor = settings.monitor.model_copy(update={
        "port": free_port(), "tensorboard_dir": tmp_path / "tb", "lag_interval_s": 1.0})
    return settings.model_copy(update={"rollout": rollout_cfg, "monitor": monitor})


@pytest_asyncio.fixture(loop_scope="session")
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as b:
        yield b


def shot_path(name: str) -> Path:
    Path(SHOTS or ".").mkdir(parents=True, exist_ok=True)
    return Path(SHOTS or ".") / f"{name}.png"


async def shoot(page: Page, name: str) -> None:
    if SHOTS:
        await page.screenshot(path=str(shot_path(name)), full_page=True)


async def grid_states(page: Page) -> dict[str, str]:
    return await page.evaluate(
        "() => Object.fromEntries(Array.from(document.querySelectorAll('#grid tbody tr'))"
        ".map(r => [r.dataset.id, r.querySelector('[data-col=state]').textContent]))")


async def test_the_monitor_follows_a_rollout_live_and_shows_its_episodes(
    settings: Settings, producer: EventProducer, start_worker, start_policy, browser: Browser,
    tmp_path: Path,
) -> None:
    started = time.monotonic()
    s = fast(settings, tmp_path)
    start_worker(4)
    # Half a second a decision, as a model takes: with an instant teacher and the
    # page-driven settle an episode can be over before the page has shown it running.
    start_policy("teacher", settings.model_copy(update={
        "policy": settings.policy.model_copy(update={"teacher_delay_s": 0.5})}))
    procs = [PipelineProcess(s, ["worker", name], tmp_path / f"{name}.log")
             for name in ("evaluator", "history", "metrics")]
    monitor = PipelineProcess(s, ["monitor"], tmp_path / "monitor.log")
    procs.append(monitor)
    try:
        lines = [LINES[t] for t in TASKS] + [HOSTILE]
        (tmp_path / "t.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
        assert not (await load_tasks(tmp_path / "t.jsonl", producer)).bad
        async with asyncio.timeout(60):
            while not monitor.is_ready():  # noqa: ASYNC110 (the process's ready file)
                assert monitor.proc.poll() is None, monitor.log_text()[-3000:]
                await asyncio.sleep(0.2)
        base = f"http://{s.monitor.host}:{s.monitor.port}"
        page = await browser.new_page(viewport={"width": 1400, "height": 900})
        await page.goto(base + "/")

        # Live: the iteration starts (the page follows it to the new iteration once), then
        # every state change arrives over server-sent events without a reload.
        run = asyncio.create_task(rollout(s, "train", len(lines), 1, Console(width=160)))
        try:
            await page.wait_for_function(
                "() => document.querySelectorAll('#grid tbody tr').length >= 6", timeout=60_000)
        except PlaywrightTimeoutError:
            pytest.fail(f"the grid shows {await grid_states(page)}; the monitor's log ends:\n"
                        + monitor.log_text()[-3000:])
        await page.evaluate("() => { window.__sameDocument = true; }")
        seen: dict[str, set[str]] = {}
        shot = False
        while not run.done():
            states = await grid_states(page)
            for eid, state in states.items():
                seen.setdefault(eid, set()).add(state)
            if not shot and "running" in states.values() and "done" in states.values():
                shot = True
                await shoot(page, "live")  # mid-iteration
            await asyncio.sleep(0.1)
        (metrics,) = await run
        assert metrics.episodes == len(lines)
        await page.wait_for_function(
            "() => Array.from(document.querySelectorAll('#grid [data-col=reward]'))"
            ".every(c => c.textContent !== '')", timeout=30_000)
        final = await grid_states(page)
        assert await page.evaluate("() => window.__sameDocument === true")  # no reload
        changed = [eid for eid, states in seen.items() if len(states | {final[eid]}) >= 2]
        assert len(changed) >= 3, seen
        assert set(final.values()) <= {"done", "blocked"}, final
        latencies = await page.evaluate("() => window.__monitorLatencies.map(l => l.ms)")
        assert latencies and sorted(latencies)[len(latencies) // 2] < 1000, latencies
        await page.wait_for_function(  # consumer lag per group, read with the admin client
            "() => document.querySelectorAll('#lag tr').length > 0", timeout=15_000)
        await shoot(page, "live-closed")

        # The viewer: screenshots decode, the arrow keys step, verdicts are shown.
        shop = next(eid for eid in final if "shop-003" in eid)
        await page.goto(f"{base}/episodes/{shop}")
        visible_image = ("() => { const i = document.querySelector('article.step:not([hidden]) "
                         "img'); return i !== null && i.complete && i.naturalWidth > 0; }")
        await page.wait_for_function(visible_image, timeout=15_000)
        assert await page.locator("article.step").count() >= 3
        assert await page.locator("#at").text_content() == "0"
        await page.keyboard.press("ArrowRight")
        assert await page.locator("#at").text_content() == "1"
        await page.wait_for_function(visible_image, timeout=15_000)
        assert await page.locator("article.step:not([hidden]) .mark").count() > 0
        await page.keyboard.press("ArrowRight")
        await page.keyboard.press("ArrowLeft")
        assert await page.locator("#at").text_content() == "1"
        assert await page.locator("#reward").text_content() == "1.0"
        assert await page.locator("table.verdicts tbody tr").count() >= 1
        await shoot(page, "episode")

        # Hostile text: shown as text, never run.
        evil = next(eid for eid in final if "evil-001" in eid)
        await page.goto(f"{base}/episodes/{evil}")
        await page.wait_for_function(visible_image, timeout=15_000)
        assert EVIL in (await page.locator("#task-text").text_content() or "")
        assert EVIL in (await page.locator("article.step .title").first.text_content() or "")
        assert "onerror" in (await page.locator("q.answer").text_content() or "")
        await shoot(page, "episode-hostile")
        for path in ("/", "/episodes?task=evil", f"/episodes/{evil}", "/tasks"):
            await page.goto(base + path)
            await page.wait_for_load_state("load")
            assert await page.evaluate("() => typeof window.__pwned") == "undefined", path

        # A second iteration, so the plots have a line; then the plots are drawn (decoded
        # PNGs of non-zero size).
        (metrics,) = await rollout(s, "train", len(lines), 1, Console(width=160))
        assert metrics.iteration == 1
        await page.goto(f"{base}/metrics")
        await page.wait_for_function(
            "() => Array.from(document.querySelectorAll('img.plot'))"
            ".every(i => i.complete && i.naturalWidth > 0)", timeout=30_000)
        assert await page.locator("img.plot").count() == 3
        await shoot(page, "metrics")
        await page.goto(f"{base}/episodes?iteration=0")
        await shoot(page, "episodes")
        await page.goto(f"{base}/tasks")
        await shoot(page, "tasks")
        # A phone: every page fits the width (a wide table scrolls inside its own box).
        phone = await browser.new_page(viewport={"width": 390, "height": 844})
        for path in ("/", "/metrics", "/episodes", f"/episodes/{shop}", "/models", "/tasks",
                     "/dlq"):
            await phone.goto(base + path)
            await phone.wait_for_load_state("load")
            width = await phone.evaluate("() => document.documentElement.scrollWidth")
            assert width <= 390, f"{path} is {width} px wide on a 390 px screen"
        await shoot(phone, "phone-episodes")
        await phone.close()
        # And TensorBoard event files of the metrics.
        async with asyncio.timeout(15):
            while not list((tmp_path / "tb").rglob("events.out.tfevents.*")):  # noqa: ASYNC110
                await asyncio.sleep(0.5)
        assert monitor.proc.poll() is None, monitor.log_text()[-3000:]
        # SIGTERM with a live page open (its event stream never ends by itself): out soon.
        await page.goto(base + "/")
        stopping = time.monotonic()
        await asyncio.to_thread(monitor.stop, 20)
        assert monitor.proc.returncode == 0 and time.monotonic() - stopping < 8, (
            monitor.proc.returncode, time.monotonic() - stopping)
        await page.close()
    finally:
        for p in procs:
            p.stop()
    print(f"monitor test: {time.monotonic() - started:.1f}s")


async def test_the_monitor_webgym_run_starts_answers_once_and_down_stops_it(
    settings: Settings, tmp_path: Path,
) -> None:
    """`webgym run`'s monitor (infra.pipeline.start_monitor): one process however often it
    is asked for, serving the live page; `pipeline down` stops it and frees its port."""
    import aiohttp

    from infra import pipeline

    s = fast(settings, tmp_path).model_copy(update={"infra": settings.infra.model_copy(
        update={"data_dir": tmp_path / "data"})})
    url = await pipeline.start_monitor(s)
    pid = pipeline.monitor_pid(s)
    try:
        assert url == f"http://127.0.0.1:{s.monitor.port}/" and pid is not None
        assert await pipeline.start_monitor(s) == url
        assert pipeline.monitor_pid(s) == pid  # not a second one
        async with aiohttp.ClientSession() as http, http.get(url) as resp:
            assert resp.status == 200 and "text/html" in resp.headers["Content-Type"]
    finally:
        assert pipeline.MONITOR in pipeline.down(s)
    assert pipeline.monitor_pid(s) is None
    with pytest.raises(aiohttp.ClientConnectionError):
        async with aiohttp.ClientSession() as http, http.get(url):
            pass
