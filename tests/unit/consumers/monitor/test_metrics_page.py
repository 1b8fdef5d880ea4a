"""The monitor's metrics page and plot: the policy's success, the demonstrations apart."""

from __future__ import annotations

from aiohttp.test_utils import TestClient, TestServer

from consumers.monitor.hub import Monitor
from consumers.monitor.pages import make_app
from consumers.monitor.plots import metrics_png
from consumers.monitor.state import View
from webgym_common.config import load_settings
from webgym_common.events import RolloutMetrics


def metrics(iteration: int, demonstrations: int) -> RolloutMetrics:
    return RolloutMetrics(iteration=iteration, split="train", episodes=8, crashed_rate=0.0,
                          blocked_rate=0.0, success_rate=0.25, avg_steps=3.0,
                          avg_chars_per_response=50.0, goback_rate=0.0,
                          demonstrations=demonstrations,
                          demonstration_success_rate=1.0 if demonstrations else 0.0)


async def test_the_page_shows_the_policys_success_and_the_demonstrations_apart() -> None:
    view = View()
    view.apply(metrics(0, 4), 1)
    view.apply(metrics(1, 0), 2)
    async with TestClient(TestServer(make_app(Monitor(load_settings(), view)))) as client:
        html = await (await client.get("/metrics")).text()
    assert "success_rate (policy)" in html and "not counted" in html
    # iteration 0: 8 episodes, 4 the policy's, 0.25 solved; 4 demonstrations, all solved
    assert "<td>8</td><td>4</td>\n  <td>0.250</td><td>4</td>\n  <td>1.000</td>" in html
    assert "<td>0</td>\n  <td>–</td>" in html  # iteration 1 had none: no rate, not 0


def test_the_plot_draws_with_and_without_demonstrations() -> None:
    for rows in ([metrics(0, 4)], [metrics(0, 0)], [metrics(0, 4), metrics(1, 0)], []):
        assert metrics_png(rows)[:8] == b"\x89PNG\r\n\x1a\n"
