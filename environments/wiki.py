"""Sandbox wiki ("Sandpedia"): articles with infoboxes, internal links, search, categories."""

from __future__ import annotations

import re

from aiohttp import web

from environments import wiki_data as data
from environments.layout import esc, link, render, table

BRAND = "Sandpedia"
NAV = [("/wiki/", "Main page"), ("/wiki/all", "All articles"), ("/", "All sandbox sites")]
_LINK = re.compile(r"\[\[([^\]|]+)(?:\|([^\]]+))?\]\]")


def _href(title: str) -> str:
    return f"/wiki/article/{data.BY_TITLE[title].slug}"


def _linkify(text: str, linked: set[str], current: str = "") -> str:
    """Link each target once per page (as Wikipedia does), so link names stay unique."""
    out, pos = [], 0
    for m in _LINK.finditer(text):
        out.append(esc(text[pos:m.start()]))
        target, label = m.group(1), m.group(2) or m.group(1)
        if target in data.BY_TITLE and target not in linked and target != current:
            linked.add(target)
            out.append(link(_href(target), label))
        else:
            out.append(esc(label))
        pos = m.end()
    out.append(esc(text[pos:]))
    return "".join(out)


def _page(request: web.Request, title: str, body: str) -> web.Response:
    q = esc(request.query.get("q", "")) if request.path == "/wiki/search" else ""
    search = (
        '<form role="search" action="/wiki/search" method="get">'
        '<label for="wiki-q">Search Sandpedia</label>'
        f'<input id="wiki-q" type="search" name="q" value="{q}">'
        '<button type="submit">Search</button></form>'
    )
    return render(f"{title} - {BRAND}", search + body, brand=BRAND, nav=NAV)


async def main_page(request: web.Request) -> web.Response:
    cats = "".join(f"<li>{link(f'/wiki/category/{k}', v)}</li>"
                   for k, v in data.CATEGORIES.items())
    featured = data.BY_TITLE["Veloria"]
    body = (
        "<h1>Welcome to Sandpedia</h1>"
        f"<p>The free encyclopedia of the Lune continent, with {len(data.ARTICLES)} articles.</p>"
        f'<section aria-label="Browse by category"><h2>Browse by category</h2><ul>{cats}</ul>'
        "</section><h2>Featured article</h2>"
        f"<p>{_linkify('[[Veloria]]: ' + featured.summary, set())}</p>"
    )
    return _page(request, "Main page", body)


async def all_articles(request: web.Request) -> web.Response:
    items = "".join(f"<li>{link(_href(a.title), a.title)}</li>"
                    for a in sorted(data.ARTICLES, key=lambda a: a.title))
    return _page(request, "All articles", f"<h1>All articles</h1><ul>{items}</ul>")


async def category(request: web.Request) -> web.Response:
    key = request.match_info["key"]
    if key not in data.CATEGORIES:
        raise web.HTTPNotFound(text="No such category")
    col = data.CATEGORY_COLUMN[key]
    rows = [[link(_href(a.title), a.title), esc(a.fact(col))] for a in data.in_category(key)]
    name = data.CATEGORIES[key]
    body = f"<h1>Category: {esc(name)}</h1>" + table(["Article", col], rows, name)
    return _page(request, f"Category: {name}", body)


async def article(request: web.Request) -> web.Response:
    a = data.BY_SLUG.get(request.match_info["slug"])
    if a is None:
        raise web.HTTPNotFound(text="There is currently no text in this page.")
    linked: set[str] = set()
    rows = "".join(
        f'<tr><th scope="row">{esc(k)}</th><td>{_linkify(v, linked, a.title)}</td></tr>'
        for k, v in a.facts
    )
    cat = data.CATEGORIES[a.category]
    body = (
        f"<h1>{esc(a.title)}</h1>"
        f"<p>{link(f'/wiki/history/{a.slug}', 'View history')}</p>"
        f'<aside class="infobox" aria-label="Infobox"><table><caption>{esc(a.title)}</caption>'
        f"{rows}</table></aside>"
        f"<p>{_linkify(a.summary, linked, a.title)}</p>"
        f'<p style="clear:both">Category: {link(f"/wiki/category/{a.category}", cat)}</p>'
    )
    return _page(request, a.title, body)


async def history(request: web.Request) -> web.Response:
    a = data.BY_SLUG.get(request.match_info["slug"])
    if a is None:
        raise web.HTTPNotFound(text="No such article")
    rows = [[esc(d), esc(e), esc(s)] for d, e, s in data.history(a)]
    body = (
        f"<h1>Revision history of {esc(a.title)}</h1>"
        f"<p>Back to the article: {link(_href(a.title), a.title)}</p>"
        + table(["Date", "Editor", "Edit summary"], rows, "Revisions, newest first")
    )
    return _page(request, f"History of {a.title}", body)


async def search(request: web.Request) -> web.Response:
    q = request.query.get("q", "").strip()
    exact = next((a for a in data.ARTICLES if a.title.lower() == q.lower()), None)
    if exact is not None:
        raise web.HTTPFound(_href(exact.title))
    hits = data.search(q)
    if hits:
        items = "".join(
            f"<li>{link(_href(a.title), a.title)}: {esc(data.strip_links(a.summary))}</li>"
            for a in hits
        )
        results = f"<p>{len(hits)} results</p><ul>{items}</ul>"
    else:
        results = "<p>There were no results matching the query.</p>"
    return _page(request, f"Search: {q}", f"<h1>Search results for “{esc(q)}”</h1>{results}")


def routes() -> list[web.RouteDef]:
    return [
        web.get("/wiki/", main_page),
        web.get("/wiki/all", all_articles),
        web.get("/wiki/category/{key}", category),
        web.get("/wiki/article/{slug}", article),
        web.get("/wiki/history/{slug}", history),
        web.get("/wiki/search", search),
    ]
