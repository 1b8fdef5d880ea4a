"""Sandbox forum ("Sandbox Q&A"): login, boards, threads, replies and votes.

A session's replies and votes are kept per session only, so concurrent agents never see each
other's writes and a fresh browser context always finds the seeded state.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from aiohttp import web

from environments import forum_data as data
from environments.layout import esc, link, notice, render, table, text_field, url

BRAND = "Sandbox Q&A"
COOKIE = "qa_session"
_MAX_SESSIONS = 5000


@dataclass
class Session:
    user: str
    replies: dict[int, list[str]] = field(default_factory=dict)
    votes: set[tuple[int, int]] = field(default_factory=set)


_SESSIONS: dict[str, Session] = {}


def _session(request: web.Request) -> Session | None:
    return _SESSIONS.get(request.cookies.get(COOKIE, ""))


def _page(request: web.Request, title: str, body: str, status: int = 200) -> web.Response:
    s = _session(request)
    nav = [("/forum/", "Forum home"), ("/forum/users", "Members"), ("/", "All sandbox sites")]
    if s is None:
        nav.append((url("/forum/login", {"next": request.path_qs}), "Log in"))
        who = "<p>You are not signed in.</p>"
    else:
        who = (
            f'<form class="inline" method="post" action="/forum/logout"><p>Signed in as '
            f'<strong>{esc(s.user)}</strong> <button type="submit">Log out</button></p></form>'
        )
    q = esc(request.query.get("q", "")) if request.path == "/forum/search" else ""
    search = (
        '<form role="search" action="/forum/search" method="get">'
        f'<label for="qa-q">Search forum</label><input id="qa-q" type="search" name="q" '
        f'value="{q}"><button type="submit">Search</button></form>'
    )
    return render(f"{title} - {BRAND}", who + search + body, brand=BRAND, nav=nav,
                  status=status)


async def home(request: web.Request) -> web.Response:
    rows = [
        [link(f"/forum/board/{k}", v), str(len(data.in_board(k))),
         "Members only" if k in data.PRIVATE_BOARDS else "Public"]
        for k, v in data.BOARDS.items()
    ]
    body = "<h1>Boards</h1>" + table(["Board", "Threads", "Access"], rows, "Boards")
    return _page(request, "Boards", body)


def _login_prompt(request: web.Request, text: str) -> str:
    return f"<p>{link(url('/forum/login', {'next': request.path_qs}), text)}</p>"


async def board(request: web.Request) -> web.Response:
    key = request.match_info["key"]
    if key not in data.BOARDS:
        raise web.HTTPNotFound(text="No such board")
    name = data.BOARDS[key]
    if key in data.PRIVATE_BOARDS and _session(request) is None:
        body = (f"<h1>{esc(name)}</h1><p>This board is only visible to signed-in members.</p>"
                + _login_prompt(request, "Log in to view this board"))
        return _page(request, name, body)
    threads = data.in_board(key)
    pages = max(1, -(-len(threads) // data.THREADS_PER_PAGE))
    page_s = request.query.get("page", "1")
    page = min(pages, max(1, int(page_s))) if page_s.isdigit() else 1
    chunk = threads[(page - 1) * data.THREADS_PER_PAGE: page * data.THREADS_PER_PAGE]
    rows = [[link(f"/forum/thread/{t.tid}", t.title), esc(t.author), str(t.replies),
             t.posts[-1].date] for t in chunk]
    pager = [f"Page {page} of {pages}"]
    if page > 1:
        pager.append(link(url(f"/forum/board/{key}", {"page": page - 1}), "Previous page"))
    if page < pages:
        pager.append(link(url(f"/forum/board/{key}", {"page": page + 1}), "Next page"))
    body = (f"<h1>{esc(name)}</h1>"
            + table(["Thread", "Started by", "Replies", "Last post"], rows, name)
            + f'<nav aria-label="Pages"><p>{" ".join(pager)}</p></nav>')
    return _page(request, name, body)


def _post_html(tid: int, p: data.Post, votes: int, s: Session | None) -> str:
    badge = "<p><strong>✔ Accepted answer</strong></p>" if p.accepted else ""
    vote = ""
    if s is not None and (tid, p.number) in s.votes:
        vote = "<p>You upvoted this post.</p>"
    elif s is not None:
        vote = (f'<form method="post" action="/forum/thread/{tid}/upvote/{p.number}">'
                f'<button type="submit">Upvote post {p.number}</button></form>')
    return (
        f'<article aria-label="Post {p.number}"><h2>Post {p.number} by {esc(p.author)}</h2>'
        f"<p>Posted on {esc(p.date)}</p>{badge}<p>{esc(p.body)}</p>"
        f"<p>Votes: {votes}</p>{vote}</article>"
    )


def _all_posts(t: data.Thread, s: Session | None) -> list[data.Post]:
    posts = list(t.posts)
    if s is not None:
        for text in s.replies.get(t.tid, []):
            posts.append(data.Post(len(posts) + 1, s.user, "just now", text, 0))
    return posts


async def thread(request: web.Request) -> web.Response:
    t = data.BY_ID.get(int(request.match_info["tid"]))
    if t is None:
        raise web.HTTPNotFound(text="No such thread")
    s = _session(request)
    crumb = f'<nav aria-label="Breadcrumb">{link(f"/forum/board/{t.board}", data.BOARDS[t.board])}'
    if t.board in data.PRIVATE_BOARDS and s is None:
        body = (crumb + "</nav><h1>Members only</h1>"
                + _login_prompt(request, "Log in to view this thread"))
        return _page(request, "Members only", body)
    msg = ""
    if "posted" in request.query:
        msg = notice(f"Your reply was posted as post {request.query['posted']}.")
    elif "upvoted" in request.query:
        msg = notice(f"You upvoted post {request.query['upvoted']}.")
    elif "error" in request.query:
        msg = notice("Reply cannot be empty.", kind="error")
    people = sorted({p.author for p in t.posts})
    parts = ", ".join(link(f"/forum/user/{u}", u) for u in people)
    posts = "".join(
        _post_html(t.tid, p, p.votes + (1 if s and (t.tid, p.number) in s.votes else 0), s)
        for p in _all_posts(t, s)
    )
    if s is None:
        reply = _login_prompt(request, "Log in to reply")
    else:
        reply = (
            f'<form method="post" action="/forum/thread/{t.tid}/reply" aria-label="Reply">'
            '<label for="reply-body">Your reply</label>'
            '<textarea id="reply-body" name="body" rows="3" cols="60"></textarea>'
            '<button type="submit">Post reply</button></form>'
        )
    body = (f"{crumb}</nav><h1>{esc(t.title)}</h1>{msg}<p>Participants: {parts}</p>"
            f"{posts}<h2>Reply to this thread</h2>{reply}")
    return _page(request, t.title, body)


def _require(request: web.Request) -> tuple[data.Thread, Session]:
    t = data.BY_ID.get(int(request.match_info["tid"]))
    s = _session(request)
    if t is None:
        raise web.HTTPNotFound(text="No such thread")
    if s is None:
        raise web.HTTPSeeOther(url("/forum/login", {"next": f"/forum/thread/{t.tid}"}))
    return t, s


async def reply(request: web.Request) -> web.Response:
    t, s = _require(request)
    text = str((await request.post()).get("body", "")).strip()
    if not text:
        raise web.HTTPSeeOther(url(f"/forum/thread/{t.tid}", {"error": "empty"}))
    s.replies.setdefault(t.tid, []).append(text[:2000])
    number = len(_all_posts(t, s))
    raise web.HTTPSeeOther(url(f"/forum/thread/{t.tid}", {"posted": number}))


async def upvote(request: web.Request) -> web.Response:
    t, s = _require(request)
    n = int(request.match_info["n"])
    if 1 <= n <= len(t.posts):
        s.votes.add((t.tid, n))
    raise web.HTTPSeeOther(url(f"/forum/thread/{t.tid}", {"upvoted": n}))


def _login_form(user: str, nxt: str, msg: str) -> str:
    return (
        f"<h1>Log in</h1>{msg}"
        '<form method="post" action="/forum/login" aria-label="Log in">'
        + text_field("username", "Username", user)
        + text_field("password", "Password", kind="password")
        + f'<input type="hidden" name="next" value="{esc(nxt)}">'
        '<button type="submit">Sign in</button></form>'
        "<p>Demo accounts: alice / wonderland, bob / builder, carol / singer.</p>"
    )


async def login(request: web.Request) -> web.Response:
    if request.method == "GET":
        return _page(request, "Log in", _login_form("", request.query.get("next", ""), ""))
    form = await request.post()
    user = str(form.get("username", "")).strip().lower()
    password = str(form.get("password", ""))
    nxt = str(form.get("next", ""))
    if not user or not password:
        # Enter in either field submits; keep what was typed and ask for the rest.
        missing = "password" if user else "username"
        return _page(request, "Log in", _login_form(user, nxt, notice(f"Enter your {missing}.")))
    if data.PASSWORDS.get(user) != password:
        msg = notice("Invalid username or password.", kind="error")
        return _page(request, "Log in", _login_form(user, nxt, msg))
    token = secrets.token_urlsafe(16)
    if len(_SESSIONS) >= _MAX_SESSIONS:
        _SESSIONS.pop(next(iter(_SESSIONS)))
    _SESSIONS[token] = Session(user)
    resp = web.HTTPSeeOther(nxt if nxt.startswith("/forum/") else "/forum/")
    resp.set_cookie(COOKIE, token, path="/forum", httponly=True)
    raise resp


async def logout(request: web.Request) -> web.Response:
    _SESSIONS.pop(request.cookies.get(COOKIE, ""), None)
    resp = web.HTTPSeeOther("/forum/")
    resp.del_cookie(COOKIE, path="/forum")
    raise resp


async def users(request: web.Request) -> web.Response:
    rows = [[link(f"/forum/user/{u.name}", u.name), str(u.reputation), u.joined,
             esc(u.location)] for u in sorted(data.USERS, key=lambda u: -u.reputation)]
    body = "<h1>Members</h1>" + table(["Member", "Reputation", "Joined", "Location"], rows,
                                      "Members by reputation")
    return _page(request, "Members", body)


async def user(request: web.Request) -> web.Response:
    u = data.USER_BY_NAME.get(request.match_info["name"])
    if u is None:
        raise web.HTTPNotFound(text="No such member")
    posts = data.posts_by(u.name)
    titles = dict.fromkeys(t.title for t, _ in posts)
    items = "".join(f"<li>{link(f'/forum/thread/{data.BY_TITLE[x].tid}', x)}</li>"
                    for x in titles)
    body = (f"<h1>{esc(u.name)}</h1><p>Reputation: {u.reputation}</p><p>Joined: {u.joined}</p>"
            f"<p>Location: {esc(u.location)}</p><p>Posts: {len(posts)}</p>"
            f"<h2>Threads with posts by {esc(u.name)}</h2><ul>{items}</ul>")
    return _page(request, u.name, body)


async def search(request: web.Request) -> web.Response:
    q = request.query.get("q", "").strip()
    hits = data.search(q, include_private=_session(request) is not None)
    rows = [[link(f"/forum/thread/{t.tid}", t.title), esc(data.BOARDS[t.board]),
             str(t.replies)] for t in hits]
    res = table(["Thread", "Board", "Replies"], rows, "Matching threads") if hits else (
        "<p>No threads found.</p>")
    return _page(request, f"Search: {q}", f"<h1>Search results</h1><p>{len(hits)} threads "
                 f"match “{esc(q)}”</p>{res}")


def routes() -> list[web.RouteDef]:
    return [
        web.get("/forum/", home),
        web.get("/forum/board/{key}", board),
        web.get(r"/forum/thread/{tid:\d+}", thread),
        web.post(r"/forum/thread/{tid:\d+}/reply", reply),
        web.post(r"/forum/thread/{tid:\d+}/upvote/{n:\d+}", upvote),
        web.get("/forum/login", login),
        web.post("/forum/login", login),
        web.post("/forum/logout", logout),
        web.get("/forum/users", users),
        web.get("/forum/user/{name}", user),
        web.get("/forum/search", search),
    ]
