"""Build the MiniWoB++ tasks' reference actions: solve each (environment, seed), verify, save.

    python -m environments.tasks.miniwob_references [--env ENV ...] [--concurrency N]

Starts the sandbox and Chromium; for every MiniWoB task (miniwob_tasks.all_tasks) whose
environment has a solver (miniwob_solvers.SOLVERS) it starts the page's episode with the
task's seed, lets the solver act step by step and records each step in role/name form:
the element is looked up among the set-of-marks elements the browser worker would number
(webgym_common.agent.marks on the page's aria snapshot), and the step is carried out the way the
worker does it (webgym_common.agent.teacher resolves it; a click or fill on that mark's
`aria-ref`). Then it VERIFIES the sequence on a fresh page with the same seed, resolving
each step against that page's marks; only a sequence after whose last step (and not before)
the page says done with raw reward > 0 is kept. The kept ones go to
`miniwob_references.json` ({task_id: [ReferenceAction, ...]}), which miniwob_tasks.py merges
into the task lines (regenerate them afterwards: `python -m environments.tasks.miniwob_tasks`).
`--env` rebuilds some environments and keeps the others' entries; `--missing` builds only the
tasks the file has no reference for yet (new seeds). ~15 min for all on 2 cores.

Coverage (verified seeds / tasks; 1,379 of 1,470 tasks, 30 of 32 environments): every seed of
click-button, click-dialog, click-dialog-2, focus-text, focus-text-2, click-tab, enter-text,
enter-text-2, click-option, click-checkboxes, click-collapsible, click-widget,
enter-password, login-user, read-table, find-word, simple-arithmetic, copy-paste,
search-engine, odd-or-even, use-spinner and click-test; 19/20 click-test-2 and
click-button-sequence (one button covers the other); 52/60 navigate-tree (a target inside a
folder: nested list items get no mark of their own, so the click lands on the folder's
centre); 49/60 multi-layouts (the layout whose "Search" is a plain <div>: no mark); ood
10/10 enter-text-dynamic, click-checkboxes-large, login-user-popup, multi-orderings. None:
click-tab-2 0/60 and click-collapsible-2 0/10 (their links are <span>s in running text,
unmarked, like click-link's).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from playwright.async_api import Browser, BrowserContext, Page, async_playwright
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from environments.app import start_sandbox
from environments.tasks.miniwob_parse import Unsolvable
from environments.tasks.miniwob_solvers import SOLVERS, Step
from environments.tasks.miniwob_tasks import REFERENCES, all_tasks
from infra.procs import free_port
from webgym_common.agent.actions import ActionKind
from webgym_common.agent.marks import parse_marks
from webgym_common.agent.teacher import resolve_reference_action
from webgym_common.chromium import launch_options
from webgym_common.config import get_settings
from webgym_common.events import Mark, ReferenceAction
from webgym_common.miniwob import (
    DATA_MODE,
    READY_JS,
    START_JS,
    STATE_JS,
    TASK_READY_JS,
    UTTERANCE_JS,
)

# The worker's browser settings (executable, viewport, settle time, mark limit), read from
# the same settings object and environment variables as the worker's.
BROWSER = get_settings().browser
LAUNCH_ARGS = ["--disable-gpu", "--no-first-run"]
ACTION_MS = 5_000
PAGE_MS = 120_000  # the page's own episode timer: no timeout while we act
_TAG = "data-wg-target"


class Failed(Exception):
    """This (environment, seed) gets no reference: why, in one line."""


async def start(context: BrowserContext, url: str, seed: int) -> tuple[Page, str]:
    """A fresh page with the environment's episode started with `seed`; its utterance."""
    page = await context.new_page()
    await page.goto(url, wait_until="load", timeout=30_000)
    await page.wait_for_function(READY_JS, timeout=10_000)
    await page.evaluate(START_JS, [seed, DATA_MODE, PAGE_MS])
    await page.wait_for_function(TASK_READY_JS, timeout=10_000)
    return page, str(await page.evaluate(UTTERANCE_JS)).strip()


async def marks_of(page: Page) -> list[Mark]:
    return parse_marks(await page.aria_snapshot(mode="ai", boxes=True), BROWSER.max_marks)


def reference(step: Step, marks: Sequence[Mark], i: int) -> ReferenceAction:
    """The role/name/nth form of the step acting on marks[i]."""
    mark = marks[i]
    nth = sum(1 for m in marks[:i] if m.role == mark.role and m.name == mark.name)
    return ReferenceAction(action=step.action, role=mark.role, name=mark.name,
                           text=step.text, nth=nth or None)


async def mark_index(page: Page, marks: Sequence[Mark], target: str) -> int:
    """Which mark is the step's element: the element itself, else a marked element inside it
    (a widget's input), else the innermost marked element around it."""
    found = await page.evaluate(f"""() => {{
        document.querySelectorAll('[{_TAG}]').forEach(e => e.removeAttribute('{_TAG}'));
        const e = {target};
        if (e) e.setAttribute('{_TAG}', '');
        return !!e;
    }}""")
    if not found:
        raise Failed("the solver's element is not on the page")
    relation = ("e => { const t = document.querySelector('[" + _TAG + "]');"
                " return e === t ? 0 : t.contains(e) ? 1 : e.contains(t) ? 2 : -1; }")
    best: tuple[int, int] | None = None  # (relation, -index): prefer the element, then inside
    for i, mark in enumerate(marks):
        rel = await page.locator(f"aria-ref={mark.ref}").evaluate(relation, timeout=ACTION_MS)
        if rel >= 0 and (best is None or (rel, -i) < best):
            best = (rel, -i)
    if best is None:
        raise Failed("the solver's element is not among the set-of-marks elements")
    return -best[1]


async def perform(page: Page, marks: Sequence[Mark], ref: ReferenceAction) -> None:
    """Carry out a reference step as the teacher resolves it and the worker executes it
    (producers/browser/execute.py: click; fill then Enter)."""
    action = resolve_reference_action(ref, marks)
    if not action.valid or action.element is None:
        raise Failed(f"the teacher cannot resolve {ref.action} {ref.role} {ref.name!r}")
    ref_of = {m.index: m.ref for m in marks}
    loc = page.locator(f"aria-ref={ref_of[action.element]}")
    if action.kind == ActionKind.CLICK:
        await loc.click(timeout=ACTION_MS)
    elif action.kind == ActionKind.TYPE:
        await loc.fill(action.text or "", timeout=ACTION_MS)
        await loc.press("Enter", timeout=ACTION_MS)
    else:
        raise Failed(f"no such reference action here: {action.kind}")
    await asyncio.sleep(BROWSER.settle_s)


async def state(page: Page) -> tuple[bool, float]:
    raw = await page.evaluate(STATE_JS)
    return bool(raw["done"]), float(raw["raw"])


async def solve(context: BrowserContext, url: str, env: str, seed: int
                ) -> list[ReferenceAction]:
    """Let the solver play the episode; its steps in role/name form."""
    page, utterance = await start(context, url, seed)
    refs: list[ReferenceAction] = []
    try:
        async for step in SOLVERS[env](page, utterance):
            marks = await marks_of(page)
            ref = reference(step, marks, await mark_index(page, marks, step.target))
            await perform(page, marks, ref)
            refs.append(ref)
            if (await state(page))[0]:
                break
    except Unsolvable as err:
        raise Failed(str(err)) from None
    finally:
        await page.close()
    return refs


async def verify(context: BrowserContext, url: str, seed: int,
                 refs: Sequence[ReferenceAction]) -> None:
    """Replay on a fresh page: done with raw reward > 0 after the last step, not before."""
    page, _ = await start(context, url, seed)
    try:
        for i, ref in enumerate(refs):
            await perform(page, await marks_of(page), ref)
            done, reward = await state(page)
            if done and i < len(refs) - 1:
                raise Failed(f"the page said done after step {i + 1} of {len(refs)}")
        if not done or reward <= 0:
            raise Failed(f"replayed: done {done}, raw reward {reward:g}")
    finally:
        await page.close()


async def new_context(browser: Browser) -> BrowserContext:
    """A context with the worker's viewport."""
    return await browser.new_context(viewport={"width": BROWSER.viewport_width,
                                               "height": BROWSER.viewport_height})


async def build_one(browser: Browser, base: str, task: dict[str, Any]) -> list[dict[str, Any]]:
    env = task["environment"]
    url = task["website"].replace("{sandbox}", base)
    context = await new_context(browser)
    try:
        refs = await solve(context, url, env["name"], env["seed"])
        await verify(context, url, env["seed"], refs)
    finally:
        await context.close()
    return [r.model_dump(exclude_none=True) for r in refs]


async def build(tasks: Sequence[dict[str, Any]], concurrency: int
                ) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str]]:
    """References of the tasks that verified, and why the others have none."""
    port = free_port()
    runner = await start_sandbox("127.0.0.1", port)
    kept: dict[str, list[dict[str, Any]]] = {}
    failed: dict[str, str] = {}
    sem = asyncio.Semaphore(concurrency)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn(), TextColumn("{task.fields[failed]} failed"))
    try:
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(**launch_options(BROWSER), args=LAUNCH_ARGS)
            with Progress(*columns) as progress:
                bar = progress.add_task("MiniWoB references", total=len(tasks), failed=0)

                async def one(task: dict[str, Any]) -> None:
                    async with sem:
                        try:
                            kept[task["task_id"]] = await asyncio.wait_for(
                                build_one(browser, f"http://127.0.0.1:{port}", task), 90)
                        except Exception as err:  # noqa: BLE001 - any failure: no reference
                            failed[task["task_id"]] = (str(err).strip().splitlines() or
                                                       [type(err).__name__])[0][:200]
                        progress.update(bar, advance=1, failed=len(failed))

                await asyncio.gather(*(one(t) for t in tasks))
            await browser.close()
    finally:
        await runner.cleanup()
    return kept, failed


def coverage(tasks: Sequence[dict[str, Any]], kept: dict[str, Any]) -> dict[str, str]:
    """Per environment: verified / all seeds, e.g. {"click-test": "30/30"}."""
    total = Counter(t["environment"]["name"] for t in tasks)
    ok = Counter(t["environment"]["name"] for t in tasks if t["task_id"] in kept)
    return {env: f"{ok[env]}/{n}" for env, n in total.items()}


def dump(references: dict[str, list[dict[str, Any]]]) -> str:
    """The file's text: one task a line, sorted (small diffs when a solver changes)."""
    lines = [f"{json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}"
             for k, v in sorted(references.items())]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", action="append", help="only these environments (repeatable); "
                    "the others keep their references in the file")
    ap.add_argument("--missing", action="store_true",
                    help="only the tasks without a reference in the file yet")
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--output", type=Path, default=REFERENCES)
    args = ap.parse_args(argv)
    old = json.loads(args.output.read_text()) if args.output.exists() else {}
    tasks = [t for t in all_tasks() if t["environment"]["name"] in SOLVERS
             and (not args.env or t["environment"]["name"] in args.env)
             and not (args.missing and t["task_id"] in old)]
    kept, failed = asyncio.run(build(tasks, args.concurrency))
    rebuilt, listed = {t["task_id"] for t in tasks}, {t["task_id"] for t in all_tasks({})}
    # a task no longer in the file (a seed held out nowhere now) keeps no reference
    merged = {k: v for k, v in old.items() if k not in rebuilt and k in listed} | kept
    args.output.write_text(dump(merged), encoding="utf-8")
    for task_id, why in sorted(failed.items()):
        print(f"  no reference for {task_id}: {why}")
    for env, cov in coverage(tasks, kept).items():
        print(f"{env:24} {cov}")
    print(f"{len(kept)} of {len(tasks)} verified; {len(merged)} references in {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
