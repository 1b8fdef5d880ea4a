"""Hostile pages and an injected Visit, with the broker killed mid-iteration (issue 34's bar).

One 50-episode iteration over the chaos tasks plus two hostile ones (scenario.HOSTILE_TASKS:
a start page with a 10 MB title, a 1 MB URL and a 1 MB alert; one with a 50 MB tree), 8 in
flight; every episode's policy replies once `Visit [<a loopback server counting requests>]`
(tests/chaos/visit_policy.py: half through the product's parser, half let through as a Visit
action), the target on the browser's private allowlist, so nothing but the parser and the
browser worker's refusal stands in the way; and the Kafka broker SIGKILLed and restarted at
a seeded moment. From the topics: nothing lost, duplicated or wrong, no dead letter, every
hostile-page episode answered with its page text cut to the caps, and no browser went to
the target (hostile.verdict).
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import pytest

from producers.browser.urlpolicy import UrlPolicy
from tests.chaos.faults import broker_restart
from tests.chaos.harness import Run, assert_exactly_once, play, verdict
from tests.chaos.hostile import VisitTarget, allow, read_seen
from tests.chaos.hostile import verdict as hostile_verdict
from tests.chaos.scenario import CHAOS_TASKS, HOSTILE_TASKS, Options

pytestmark = [pytest.mark.integration, pytest.mark.chaos, pytest.mark.chaos_fast,
              pytest.mark.asyncio(loop_scope="session")]

SEED = 1
# 10 tasks x 5 draws. A 50 MB tree takes seconds to read on a busy CPU (the browser worker's
# integration test needed observe_timeout_s 120 on its own): room for it, not a hung page.
OPTIONS = Options(episodes=50, tasks=(*CHAOS_TASKS, *HOSTILE_TASKS), bound_s=480.0)
HUGE_PAGES = {"observe_timeout_s": 120.0, "action_timeout_s": 30.0}


@pytest.mark.timeout(900)
async def test_hostile_pages_and_an_injected_visit_survive_a_broker_kill(
    chaos_run: Callable[..., Run]
) -> None:
    run = chaos_run(f"hostile pages + injected Visit + broker SIGKILL (seed {SEED})", OPTIONS)
    async with VisitTarget() as target:
        allow(run, target, **HUGE_PAGES)
        # The control: the target counts what reaches it, and the URL policy lets it through.
        async with httpx.AsyncClient(timeout=10) as client:
            assert (await client.get(target.url)).status_code == 200
        assert target.hits == [""]
        target.hits.clear()
        await UrlPolicy.for_browser(run.settings.browser, run.settings.sandbox_url).check(
            target.url)

        result = await play(run, broker_restart(SEED))
        seen = await read_seen(run.settings, target)
    wrong, notes = hostile_verdict(seen, target.url)
    result.notes += notes
    result.wrong += len(set(wrong))
    assert_exactly_once(result, run)
    assert not wrong, verdict(result, run)
