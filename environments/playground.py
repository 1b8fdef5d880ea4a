"""Action playground: one page with a target for every action kind, for testing browser workers.

Deterministic, no external resources, and a fixed layout (explicit sizes, no reflow when a
status changes) so tests in coordinates mode can aim at the centre of a mark's box.

- "Press me" (button): a click counts up "Button clicked N times".
- "Hover target" (div role=button): mouseover sets "Hover status hovered".
- "Echo" (text field in a GET form): Enter goes to /playground/echo?text=... ("You typed: ...").
- "Start here" (autofocus field) then "Tab target" (button, the next focusable element):
  Tab + Enter from a freshly loaded page sets "Tab status tab-entered".
- "Scroll box" (region, scrollable): its scrollTop is shown as "Box scrollTop N"; the page is
  3000 px taller than the viewport and its scrollY is shown as "Window scrollY N". The box has
  cursor: pointer, which is what makes a non-interactive role a numbered mark, so
  `Scroll [N]` can target it in set-of-marks mode.
- "Next page" (link): /playground/next, for GoBack; "Jump to tall section" (link): #tall, for
  GoBack within the page.
- /playground/covered: "Covered button" lies under a fixed cookie banner (`#cookie-banner`)
  that takes its clicks until its "Accept cookies" button removes it, as real sites' banners
  and MiniWoB's start overlay do; clicking the covered button sets "Covered button clicked".

- /playground/settle: pages that take their time after a click, for the page-driven settle:
  "Load later" fetches /playground/late (answered after 400 ms) and then shows "Late status
  loaded"; "Animate" changes the page every 50 ms for 300 ms and ends on "Animation status
  done"; "Restless" changes the page every 20 ms from then on ("Restless tick N").

The statuses live in a fixed bar at the bottom of the viewport (pointer-events: none, so it
never covers a target) and are plain text, so they show in screenshots and aria snapshots.
"""

from __future__ import annotations

import asyncio

from aiohttp import web

from environments.layout import esc, link, render

BRAND = "Sandbox action playground"
NAV = [("/playground/", "Playground"), ("/", "All sandbox sites")]
BOX_PARTS = 12

_CSS = """
.pg-row{display:flex;align-items:center;gap:24px;height:48px;margin:8px 0}
.pg-row button,.pg-row input,.pg-hover{height:36px;box-sizing:border-box;font-size:16px}
.pg-row button{width:140px}
.pg-row input{width:240px;padding:0 6px}
.pg-row label{width:60px;margin:0}
.pg-hover{width:160px;line-height:34px;text-align:center;border:1px solid #889;
  background:#e8ecf6;user-select:none}
.pg-box{width:320px;height:160px;overflow-y:scroll;border:1px solid #889;margin:8px 0;
  overscroll-behavior:contain;cursor:pointer}
.pg-box p{margin:0;height:200px;padding:4px 6px;box-sizing:border-box}
.pg-tall{height:3000px;border-top:1px dashed #ccd;padding-top:8px}
.pg-status{position:fixed;left:0;right:0;bottom:0;height:32px;line-height:32px;
  background:#fff6d6;border-top:1px solid #e0c060;pointer-events:none;font-size:14px;
  display:flex;gap:32px;padding:0 16px;white-space:nowrap}
"""

_SCRIPT = """
(function () {
  var clicks = 0;
  function set(id, text) { document.getElementById(id).textContent = text; }
  document.getElementById('press').addEventListener('click', function () {
    clicks += 1;
    set('click-status', 'Button clicked ' + clicks + ' times');
  });
  document.getElementById('hover').addEventListener('mouseover', function () {
    set('hover-status', 'Hover status hovered');
  });
  document.getElementById('tab-target').addEventListener('click', function () {
    set('tab-status', 'Tab status tab-entered');
  });
  var box = document.getElementById('box');
  box.addEventListener('scroll', function () {
    set('box-scroll', 'Box scrollTop ' + Math.round(box.scrollTop));
  });
  window.addEventListener('scroll', function () {
    set('window-scroll', 'Window scrollY ' + Math.round(window.scrollY));
  });
})();
"""


def _page(title: str, body: str, script: str = "") -> web.Response:
    return render(title, body, brand=BRAND, nav=NAV, head=f"<style>{_CSS}</style>",
                  script=script)


async def playground(request: web.Request) -> web.Response:
    lines = "".join(f"<p>Box part {i} of {BOX_PARTS}</p>" for i in range(1, BOX_PARTS + 1))
    body = (
        "<h1>Action playground</h1>"
        '<div class="pg-row">'
        '<button id="press" type="button">Press me</button>'
        '<div id="hover" class="pg-hover" role="button">Hover target</div>'
        f"{link('/playground/next', 'Next page')}"
        f"{link('#tall', 'Jump to tall section')}"
        "</div>"
        '<form class="pg-row" method="get" action="/playground/echo">'
        '<label for="echo">Echo</label>'
        '<input id="echo" name="text" type="text" autocomplete="off">'
        "</form>"
        '<div class="pg-row">'
        '<input id="start" type="text" aria-label="Start here" autocomplete="off" autofocus>'
        '<button id="tab-target" type="button">Tab target</button>'
        "</div>"
        f'<div id="box" class="pg-box" role="region" aria-label="Scroll box">{lines}</div>'
        '<section id="tall" class="pg-tall" aria-label="Tall section">'
        "<p>Tall section top</p></section>"
        '<div class="pg-status" role="status" aria-label="Playground status">'
        '<span id="click-status">Button clicked 0 times</span>'
        '<span id="hover-status">Hover status idle</span>'
        '<span id="tab-status">Tab status idle</span>'
        '<span id="window-scroll">Window scrollY 0</span>'
        '<span id="box-scroll">Box scrollTop 0</span>'
        "</div>"
    )
    return _page("Action playground", body, _SCRIPT)


_COVER_CSS = """
.pg-banner{position:fixed;left:0;top:0;right:0;bottom:0;background:rgba(20,20,40,.55);
  display:flex;align-items:flex-start;justify-content:center;padding-top:220px}
.pg-banner div{background:#fff;padding:16px 24px;border-radius:6px}
"""
_COVER_SCRIPT = """
document.getElementById('accept').addEventListener('click', function () {
  document.getElementById('cookie-banner').remove();
});
document.getElementById('covered').addEventListener('click', function () {
  document.getElementById('cover-status').textContent = 'Covered button clicked';
});
"""


async def covered(request: web.Request) -> web.Response:
    body = (
        f"<style>{_COVER_CSS}</style><h1>Covered</h1>"
        '<div class="pg-row"><button id="covered" type="button">Covered button</button></div>'
        '<p id="cover-status" role="status">Covered button idle</p>'
        '<div id="cookie-banner" class="pg-banner"><div>We use cookies. '
        '<button id="accept" type="button">Accept cookies</button></div></div>'
    )
    return _page("Covered", body, _COVER_SCRIPT)


_SETTLE_SCRIPT = """
(function () {
  function set(id, text) { document.getElementById(id).textContent = text; }
  document.getElementById('later').addEventListener('click', function () {
    set('late-status', 'Late status waiting');
    fetch('/playground/late').then(function (r) { return r.text(); })
      .then(function (text) { set('late-status', 'Late status ' + text); });
  });
  document.getElementById('animate').addEventListener('click', function () {
    var frame = 0;
    var timer = setInterval(function () {
      frame += 1;
      set('animation-status', 'Animation frame ' + frame);
      if (frame === 6) { clearInterval(timer); set('animation-status', 'Animation status done'); }
    }, 50);
  });
  document.getElementById('restless').addEventListener('click', function () {
    var tick = 0;
    setInterval(function () { tick += 1; set('restless-status', 'Restless tick ' + tick); }, 20);
  });
})();
"""


async def settle_page(request: web.Request) -> web.Response:
    body = (
        "<h1>Settle</h1>"
        '<div class="pg-row">'
        '<button id="later" type="button">Load later</button>'
        '<button id="animate" type="button">Animate</button>'
        '<button id="restless" type="button">Restless</button>'
        "</div>"
        '<p id="late-status" role="status">Late status idle</p>'
        '<p id="animation-status" role="status">Animation status idle</p>'
        '<p id="restless-status" role="status">Restless idle</p>'
    )
    return _page("Settle", body, _SETTLE_SCRIPT)


async def late(request: web.Request) -> web.Response:
    await asyncio.sleep(0.4)
    return web.Response(text="loaded")


async def echo(request: web.Request) -> web.Response:
    text = request.query.get("text", "")
    body = (f"<h1>Echo</h1><p>You typed: {esc(text)}</p>"
            f"<p>{link('/playground/', 'Back to playground')}</p>")
    return _page("Echo", body)


async def next_page(request: web.Request) -> web.Response:
    body = ("<h1>Next page</h1><p>You followed the link from the playground.</p>"
            f"<p>{link('/playground/', 'Back to playground')}</p>")
    return _page("Next page", body)


async def _to_root(request: web.Request) -> web.Response:
    raise web.HTTPMovedPermanently("/playground/")


def routes() -> list[web.RouteDef]:
    return [
        web.get("/playground/", playground),
        web.get("/playground", _to_root),
        web.get("/playground/echo", echo),
        web.get("/playground/next", next_page),
        web.get("/playground/covered", covered),
        web.get("/playground/settle", settle_page),
        web.get("/playground/late", late),
    ]
