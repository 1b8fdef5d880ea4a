"""Pages that try to reach what the browser's URL policy refuses, for its integration test.

`/security/probe?run=R&port=P` makes every kind of request a page can make (image, script,
fetch, WebSocket, a redirect, a dedicated worker's fetch and WebSocket, a WebSocket from a
fresh iframe) once to an allowed target (this server, by the address the page came from)
and once to a refused one: 127.0.0.2:P (nothing listens there) or this very server under
another name (`localhost`), whose arrivals `/security/hit` and `/security/echo` count per
run and `via`, so a test can tell a refused request from one that was sent and failed.
The outcome of every probe is in `window.probes` once `window.probesDone` is true.

`/security/webrtc?port=P` opens an RTCPeerConnection whose STUN server is 127.0.0.1:P (a
test listens there for UDP) and gathers its ICE candidates: each candidate line, the local
description's SDP (where candidates also appear) and how gathering ended are in
`window.webrtc` once `window.webrtcDone` is true. A browser that lets WebRTC's UDP around its
proxy shows host candidates and sends STUN binding requests to P; the worker's shows none.
"""

from __future__ import annotations

import json
from collections import Counter

from aiohttp import WSMsgType, web

from environments.layout import render

# run id -> via -> requests that arrived (module-level: the app is frozen once started).
HITS: dict[str, Counter[str]] = {}
_GIF = bytes.fromhex("47494638396101000100800000000000ffffff21f90401000000002c"
                     "00000000010001000002024401003b")

_PROBES = r"""
const q = new URLSearchParams(location.search), run = q.get('run'), port = q.get('port');
const here = location.host, other = 'localhost:' + location.port;
const escape = encodeURIComponent;
const hit = (via) => `http://${other}/security/hit?run=${run}&via=${via}`;
const probes = window.probes = {};
const limit = (p, ms) => Promise.race([p, new Promise(r => setTimeout(() => r('timeout'), ms))]);
const load = (tag, src) => new Promise(r => {
  const el = document.createElement(tag); el.src = src;
  el.onload = () => r('ok'); el.onerror = () => r('error'); document.body.appendChild(el);
});
const get = (u) => fetch(u).then(r => r.ok ? 'ok' : 'status ' + r.status, () => 'error');
const socket = (u, WS = WebSocket) => new Promise(r => {
  let ws;
  try { ws = new WS(u); } catch (e) { return r('throws ' + e.name); }
  ws.onopen = () => ws.send('ping');
  ws.onmessage = (e) => { r('echo ' + e.data); ws.close(); };
  ws.onclose = (e) => r('closed ' + e.code);
});
const worker = () => new Promise(r => {
  const src = `(async () => {
    const out = {};
    out.fetch = await fetch('${hit('worker-fetch')}').then(() => 'ok', () => 'error');
    out.ws = await new Promise(r => { const ws = new WebSocket(
      'ws://${other}/security/echo?run=${run}&via=worker-ws');
      ws.onopen = () => r('open'); ws.onclose = (e) => r('closed ' + e.code); });
    postMessage(out); })()`;
  const w = new Worker(URL.createObjectURL(new Blob([src])));
  w.onmessage = (e) => r(e.data); w.onerror = () => r('worker error');
});
const iframeSocket = () => {
  const f = document.createElement('iframe'); document.body.appendChild(f);
  return socket(`ws://${other}/security/echo?run=${run}&via=iframe-ws`, f.contentWindow.WebSocket);
};
(async () => {
  const tries = {
    img_allowed: () => load('img', '/security/pixel.gif'),
    img_refused: () => load('img', hit('img')),
    img_redirected: () => load('img', '/security/redirect?to=' + escape(hit('img-redirect'))),
    script_refused: () => load('script', hit('script')),
    fetch_allowed: () => get('/security/data'),
    fetch_refused: () => get(`http://127.0.0.2:${port}/x`),
    fetch_other_name: () => get(hit('fetch')),
    ws_allowed: () => socket(`ws://${here}/security/echo?run=${run}&via=allowed`),
    ws_refused: () => socket(`ws://127.0.0.2:${port}/`),
    ws_other_name: () => socket(`ws://${other}/security/echo?run=${run}&via=ws`),
    ws_iframe: iframeSocket,
    worker: worker,
  };
  for (const [name, t] of Object.entries(tries)) probes[name] = await limit(t(), 3000);
  document.getElementById('done').textContent = 'Probes done';
  window.probesDone = true;
})();
"""


_WEBRTC = r"""
const port = new URLSearchParams(location.search).get('port');
const out = window.webrtc = {candidates: [], sdp: '', state: null, error: null};
(async () => {
  try {
    const pc = new RTCPeerConnection({iceServers: [{urls: `stun:127.0.0.1:${port}`}]});
    pc.createDataChannel('probe');
    const gathered = new Promise(r => {
      pc.onicecandidate = (e) => e.candidate ? out.candidates.push(e.candidate.candidate) : r();
      pc.onicegatheringstatechange = () => { if (pc.iceGatheringState === 'complete') r(); };
    });
    await pc.setLocalDescription(await pc.createOffer());
    out.state = await Promise.race([gathered.then(() => 'complete'),
                                    new Promise(r => setTimeout(() => r('timeout'), 5000))]);
    out.sdp = pc.localDescription ? pc.localDescription.sdp : '';
    pc.close();
  } catch (e) { out.error = e.name + ': ' + e.message; }
  document.getElementById('done').textContent = 'WebRTC probe done';
  window.webrtcDone = true;
})();
"""


def _count(request: web.Request) -> None:
    run, via = request.query.get("run", ""), request.query.get("via", "")
    HITS.setdefault(run, Counter())[via] += 1


async def probe(request: web.Request) -> web.Response:
    body = '<h1>URL policy probes</h1><p id="done">Probing...</p>'
    return render("URL policy probes", body, script=_PROBES)


async def webrtc(request: web.Request) -> web.Response:
    body = '<h1>WebRTC probe</h1><p id="done">Gathering ICE candidates...</p>'
    return render("WebRTC probe", body, script=_WEBRTC)


async def hit(request: web.Request) -> web.Response:
    _count(request)
    return web.Response(body=_GIF, content_type="image/gif")


async def pixel(request: web.Request) -> web.Response:
    return web.Response(body=_GIF, content_type="image/gif")


async def data(request: web.Request) -> web.Response:
    return web.json_response({"ok": True})


async def redirect(request: web.Request) -> web.Response:
    raise web.HTTPFound(request.query.get("to", "/security/data"))


async def echo(request: web.Request) -> web.WebSocketResponse:
    _count(request)
    ws = web.WebSocketResponse(heartbeat=None)
    await ws.prepare(request)
    async for msg in ws:
        if msg.type == WSMsgType.TEXT:
            await ws.send_str(msg.data)
    return ws


async def hits(request: web.Request) -> web.Response:
    counts = HITS.get(request.query.get("run", ""), Counter())
    return web.Response(text=json.dumps(dict(counts)), content_type="application/json")


def routes() -> list[web.RouteDef]:
    return [
        web.get("/security/probe", probe), web.get("/security/hit", hit),
        web.get("/security/pixel.gif", pixel), web.get("/security/data", data),
        web.get("/security/redirect", redirect), web.get("/security/echo", echo),
        web.get("/security/hits", hits), web.get("/security/webrtc", webrtc),
    ]
