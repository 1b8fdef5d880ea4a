"""Shared HTML helpers for the sandbox sites.

Pages are plain server-rendered HTML with inline CSS and no external resources, so they
render identically offline and every control has an accessible name for role-based lookup.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from html import escape
from urllib.parse import urlencode

from aiohttp import web

_CSS = """
body{font-family:system-ui,sans-serif;margin:0;color:#1d2330;background:#f6f7fb}
header{background:#243b6b;color:#fff;padding:.6rem 1rem}
header a{color:#fff;margin-right:1rem}
header .brand{font-weight:700;font-size:1.2rem;margin-right:1.5rem}
main{max-width:960px;margin:1rem auto;padding:0 1rem;background:#fff}
table{border-collapse:collapse;margin:.5rem 0}
td,th{border:1px solid #ccd;padding:.25rem .5rem;text-align:left}
.notice{background:#fff6d6;border:1px solid #e0c060;padding:.5rem}
.error{background:#fde2e2;border:1px solid #d66;padding:.5rem}
.infobox{float:right;width:300px;margin:0 0 1rem 1rem;background:#eef}
form.inline{display:inline}
label{margin-right:.4rem}
.field{display:inline-block;margin:.3rem 1rem .3rem 0}
#cal{border:1px solid #ccd;padding:.4rem;margin:.3rem 0;max-width:22rem}
#cal-days{display:grid;grid-template-columns:repeat(7,2.6rem);gap:2px;margin-top:.3rem}
footer{color:#667;font-size:.8rem;text-align:center;padding:1rem}
"""

# Enter inside a single-line field already submits its form; this makes Enter in a
# <textarea> (and date fields, where browsers differ) submit too, so "type then Enter"
# works the same on every field. Shift+Enter keeps the newline.
_ENTER_SUBMITS = """
document.addEventListener('keydown', function (e) {
  var t = e.target;
  if (e.key !== 'Enter' || e.shiftKey || !t.form) return;
  if (t.tagName === 'TEXTAREA' || t.type === 'date' || t.type === 'number') {
    e.preventDefault();
    t.form.requestSubmit();
  }
});
"""


def esc(value: object) -> str:
    return escape(str(value), quote=True)


def link(href: str, text: str, **attrs: str) -> str:
    extra = "".join(f' {k.replace("_", "-")}="{esc(v)}"' for k, v in attrs.items())
    return f'<a href="{esc(href)}"{extra}>{esc(text)}</a>'


def url(path: str, params: Mapping[str, object] | Iterable[tuple[str, object]] = ()) -> str:
    items = list(params.items()) if isinstance(params, Mapping) else list(params)
    items = [(k, v) for k, v in items if v not in (None, "")]
    return f"{path}?{urlencode(items)}" if items else path


def money(value: float, symbol: str = "$") -> str:
    return f"{symbol}{value:,.2f}"


def table(headers: list[str], rows: Iterable[Iterable[str]], caption: str = "") -> str:
    """Cells are raw HTML (callers escape); headers are escaped here."""
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    head = "".join(f'<th scope="col">{esc(h)}</th>' for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table>{cap}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def text_field(
    name: str, label: str, value: str = "", *, kind: str = "text", required: bool = False,
    extra: str = "",
) -> str:
    fid = f"f-{name}"
    req = " required" if required else ""
    return (
        f'<span class="field"><label for="{fid}">{esc(label)}</label>'
        f'<input id="{fid}" name="{esc(name)}" type="{kind}" value="{esc(value)}"{req}{extra}>'
        "</span>"
    )


def render(
    title: str,
    body: str,
    *,
    brand: str = "Sandbox",
    nav: Iterable[tuple[str, str]] = (),
    status: int = 200,
    head: str = "",
    script: str = "",
) -> web.Response:
    nav_html = "".join(link(h, t) for h, t in nav)
    html = (
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{esc(title)}</title><style>{_CSS}</style>{head}</head><body>"
        f'<header><span class="brand">{esc(brand)}</span>'
        f'<nav aria-label="{esc(brand)} navigation">{nav_html}</nav></header>'
        f"<main>{body}</main>"
        '<footer>Offline sandbox site for web-agent training. No real orders or bookings.'
        "</footer>"
        f"<script>{_ENTER_SUBMITS}{script}</script></body></html>"
    )
    return web.Response(text=html, content_type="text/html", status=status)


def notice(text: str, *, kind: str = "notice") -> str:
    role = "alert" if kind == "error" else "status"
    return f'<p class="{kind}" role="{role}">{esc(text)}</p>'
