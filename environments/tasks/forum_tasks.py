"""Tasks for the sandbox forum: reading threads and members, logging in, voting, replying.

Each task names its template (its kind of question) and the threads and members its answer
or steps depend on (a login account is not one: no fact of its profile is asked), so
build_tasks can decide its split from them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from environments import forum_data as d
from environments.tasks.common import Action, answer, button, link, task, type_


def _th(title: str) -> d.Thread:
    return d.BY_TITLE[title]


def _search(text: str) -> Action:
    return type_("searchbox", "Search forum", text)


def _login(user: str) -> list[Action]:
    """Fill the login form one field at a time (each Enter submits; the form keeps values)."""
    return [type_("textbox", "Username", user), type_("textbox", "Password", d.PASSWORDS[user])]


def _to_thread(title: str) -> list[Action]:
    """Open a thread from its board, paging as needed."""
    t = _th(title)
    return ([link(d.BOARDS[t.board])] + [link("Next page")] * (d.board_page_of(t) - 1)
            + [link(title)])


def _t(n: int, instruction: str, sub: str, diff: int, facts: list[tuple[str, list[str]]],
       actions: list[Action], *, template: str, threads: Sequence[d.Thread] = (),
       members: Sequence[d.User] = ()) -> dict[str, Any]:
    return task(f"forum-{n:03d}", instruction, site="forum", subdomain=sub, path="/forum/",
                difficulty=diff, facts=facts, actions=actions, template=template,
                entities=[*(f"thread:{t.title}" for t in threads),
                          *(f"member:{u.name}" for u in members)])


def tasks() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    erin = d.USER_BY_NAME["erin"]
    out.append(_t(1, "How many reputation points does the member erin have on Sandbox Q&A?",
                  "members", 1,
                  [("Profile", [f"erin's profile shows reputation {erin.reputation}"])],
                  [link("Members"), link("erin"), answer(str(erin.reputation))],
                  template="hand-forum-member", members=[erin]))
    t = _th("Forum rules and etiquette")
    out.append(_t(2, f"Who started the thread '{t.title}'?", "threads", 2,
                  [("Author", [f"Post 1 of '{t.title}' is by {t.author}"])],
                  [*_to_thread(t.title), answer(t.author)],
                  template="hand-forum-thread", threads=[t]))
    t = _th("How do I reverse a list in place?")
    acc = next(p for p in t.posts if p.accepted)
    out.append(_t(3, f"How many votes does the accepted answer in '{t.title}' have?", "threads",
                  2, [("Accepted answer", [f"Post {acc.number} is the accepted answer with "
                                           f"{acc.votes} votes"])],
                  [_search("reverse a list"), link(t.title), answer(str(acc.votes))],
                  template="hand-forum-thread", threads=[t]))
    grace = d.USER_BY_NAME["grace"]
    out.append(_t(4, "Where is the member grace located?", "members", 3,
                  [("Profile", [f"grace's location is {grace.location}"])],
                  [link("Members"), link("grace"), answer(grace.location)],
                  template="hand-forum-member", members=[grace]))
    t = _th("Virtual environments explained")
    cmd = "python -m venv .venv"
    out.append(_t(5, f"In the thread '{t.title}', which command does the accepted answer tell "
                  "you to run?", "threads", 3,
                  [("Answer", [f"The accepted answer says to run {cmd}"])],
                  [_search("virtual environments"), link(t.title), answer(cmd)],
                  template="hand-forum-thread", threads=[t]))
    oldest = d.in_board("python")[-1]
    out.append(_t(6, "Which is the oldest thread on the Python help board (threads are listed "
                  "newest first)?", "threads", 4,
                  [("Oldest", [f"'{oldest.title}' is the last thread on the last page of "
                               "Python help"])],
                  [link("Python help"), link("Next page"), answer(oldest.title)],
                  template="hand-forum-list-top", threads=d.in_board("python")))
    out.append(_t(7, "Log in as alice (password: wonderland). According to the Staff lounge, "
                  "at what time (UTC) does this weekend's maintenance start?", "login", 5,
                  [("Login", ["The user is signed in as alice"]),
                   ("Maintenance", ["The maintenance post says Saturday from 03:00 to 05:00 "
                                    "UTC"])],
                  [link("Log in"), *_login("alice"), link("Staff lounge"),
                   link("Maintenance window this weekend"), answer("03:00")],
                  template="hand-forum-staff-login",
                  threads=[_th("Maintenance window this weekend")]))
    dave = d.posts_by("dave")
    out.append(_t(8, "How many posts has the member dave written?", "members", 4,
                  [("Profile", [f"dave's profile shows Posts: {len(dave)}"])],
                  [link("Members"), link("dave"), answer(str(len(dave)))],
                  template="hand-forum-member", members=[d.USER_BY_NAME["dave"]]))
    top = max(d.USERS, key=lambda u: u.reputation)
    out.append(_t(9, "Which member has the highest reputation, and where are they located? "
                  "Answer with the location.", "members", 4,
                  [("Top member", [f"{top.name} has the highest reputation, {top.reputation}"]),
                   ("Location", [f"{top.name} is located in {top.location}"])],
                  [link("Members"), link(top.name), answer(top.location)],
                  template="hand-forum-list-top", members=d.USERS))
    t = _th("Laptop fan is always loud")
    acc = next(p for p in t.posts if p.accepted)
    out.append(_t(10, f"Log in as bob (password: builder) and upvote the accepted answer in "
                  f"'{t.title}'. How many votes does it have afterwards?", "voting", 7,
                  [("Login", ["The user is signed in as bob"]),
                   ("Vote", [f"Post {acc.number} was upvoted and now shows {acc.votes + 1} "
                             "votes"])],
                  [*_to_thread(t.title), link("Log in to reply"), *_login("bob"),
                   button(f"Upvote post {acc.number}"), answer(str(acc.votes + 1))],
                  template="hand-forum-write", threads=[t]))
    t = _th("asyncio.gather vs TaskGroup")
    n = len(t.posts) + 1
    out.append(_t(11, f"Log in as alice (password: wonderland) and reply 'Thanks, TaskGroup "
                  f"solved it.' to the thread '{t.title}'. Which post number did your reply "
                  "get?", "posting", 7,
                  [("Reply", ["A reply 'Thanks, TaskGroup solved it.' by alice is shown"]),
                   ("Number", [f"The site confirms the reply was posted as post {n}"])],
                  [_search("TaskGroup"), link(t.title), link("Log in to reply"),
                   *_login("alice"), type_("textbox", "Your reply",
                                           "Thanks, TaskGroup solved it."),
                   answer(f"post {n}")],
                  template="hand-forum-write", threads=[t]))
    out.append(_t(12, "Log in as carol (password: singer). According to the moderator rota in "
                  "the Staff lounge, who is on duty in week 3 of June?", "login", 8,
                  [("Login", ["The user is signed in as carol"]),
                   ("Rota", ["The June rota lists grace for week 3"])],
                  [link("Staff lounge"), link("Log in to view this board"), *_login("carol"),
                   link("Moderator rota for June"), answer("grace")],
                  template="hand-forum-staff-login", threads=[_th("Moderator rota for June")]))
    t = _th("Cheapest way from Lisbon to Berlin")
    second = d.USER_BY_NAME[t.posts[1].author]
    out.append(_t(13, "On the Travel tips board, find the thread about getting from Lisbon to "
                  "Berlin. What is the reputation of the member who wrote its second post?",
                  "members", 7,
                  [("Thread", [f"Post 2 in '{t.title}' is by {second.name}"]),
                   ("Reputation", [f"{second.name} has reputation {second.reputation}"])],
                  [*_to_thread(t.title), link(second.name), answer(str(second.reputation))],
                  template="hand-forum-post-author", threads=[t], members=[second]))
    t = _th("Choosing a monitor for programming")
    n = len(t.posts) + 1
    out.append(_t(14, f"Log in as bob (password: builder), upvote the opening post of "
                  f"'{t.title}' and reply 'I use a 27 inch IPS panel too.'. What post number "
                  "did your reply get?", "posting", 9,
                  [("Vote", ["Post 1 shows that bob upvoted it"]),
                   ("Reply", [f"The reply was posted as post {n}"])],
                  [link("Log in"), *_login("bob"), *_to_thread(t.title),
                   button("Upvote post 1"),
                   type_("textbox", "Your reply", "I use a 27 inch IPS panel too."),
                   answer(f"post {n}")],
                  template="hand-forum-write", threads=[t]))
    t = _th("Is 16 GB of RAM enough?")
    acc = next(p for p in t.posts if p.accepted)
    who = d.USER_BY_NAME[acc.author]
    out.append(_t(15, f"Who wrote the accepted answer in '{t.title}', and what is their "
                  "reputation? Answer with the reputation.", "members", 6,
                  [("Accepted answer", [f"The accepted answer is by {who.name}"]),
                   ("Reputation", [f"{who.name} has reputation {who.reputation}"])],
                  [_search("16 GB"), link(t.title), link(who.name),
                   answer(str(who.reputation))],
                  template="hand-forum-post-author", threads=[t], members=[who]))
    return out
