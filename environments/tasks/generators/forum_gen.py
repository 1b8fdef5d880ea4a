"""Generated Sandbox Q&A tasks: thread authors, members' reputations, members-only answers
behind the login, and upvotes. Staff answers are parsed from the seeded posts, not typed.
Upvotes ask one post a thread; the thread's other posts are drafted pool-only: further tasks
over the rollout pool's threads (splits)."""

from __future__ import annotations

import re

from environments import forum_data as d
from environments.tasks.common import Action, answer, button, link, type_
from environments.tasks.generators.draft import Draft, pool_only

DEMO_USERS = sorted(d.PASSWORDS)  # alice, bob, carol: the accounts that can log in
PUBLIC = [t for t in d.THREADS if t.board not in d.PRIVATE_BOARDS]
MAINTENANCE = d.BY_TITLE["Maintenance window this weekend"]
ROTA = d.BY_TITLE["Moderator rota for June"]


def _e(t: d.Thread) -> str:
    return f"thread:{t.title}"


def _to_thread(t: d.Thread) -> list[Action]:
    """Open a thread from its board (newest first, four a page), paging as needed."""
    return ([link(d.BOARDS[t.board])] + [link("Next page")] * (d.board_page_of(t) - 1)
            + [link(t.title)])


def _login(user: str) -> list[Action]:
    """One field per Type: Enter submits, and the form keeps what was typed."""
    return [type_("textbox", "Username", user), type_("textbox", "Password", d.PASSWORDS[user])]


def author() -> list[Draft]:
    return [Draft("forum-author", f"On Sandbox Q&A, who started the thread '{t.title}'?",
                  "forum", "threads", 2, [("Author", [f"Post 1 of '{t.title}' is by {t.author}"])],
                  [*_to_thread(t), answer(t.author)], [_e(t)])
            for t in PUBLIC]


def member_reputation() -> list[Draft]:
    """Each member's first reply in each thread (a profile fact, so the member is an entity
    too; drafting every pair lets splits find pairs entirely on either side)."""
    out: list[Draft] = []
    for t in PUBLIC:
        firsts = {p.author: p for p in reversed(t.posts[1:])}
        for post in sorted(firsts.values(), key=lambda p: p.number):
            who = d.USER_BY_NAME[post.author]
            out.append(Draft("forum-member-reputation", f"On Sandbox Q&A, what is the reputation "
                             f"of the member who wrote post {post.number} in the thread "
                             f"'{t.title}'?", "forum", "members", 4,
                             [("Post", [f"Post {post.number} in '{t.title}' is by {who.name}"]),
                              ("Reputation", [f"{who.name}'s profile shows reputation "
                                              f"{who.reputation}"])],
                             [*_to_thread(t), link(who.name), answer(str(who.reputation))],
                             [_e(t), f"member:{who.name}"]))
    return out


def _staff_questions() -> list[tuple[str, d.Thread, str, str]]:
    """(question, thread, answer, fact) read from the two members-only posts."""
    m = re.search(r"on (\w+) from (\d\d:\d\d) to (\d\d:\d\d) UTC", MAINTENANCE.posts[0].body)
    assert m, MAINTENANCE.posts[0].body
    day, start, end = m.groups()
    out = [("on which day of the week is this weekend's maintenance", MAINTENANCE, day,
            f"The maintenance post says {day}"),
           ("at what time (UTC) does this weekend's maintenance start", MAINTENANCE, start,
            f"The maintenance starts at {start} UTC"),
           ("at what time (UTC) does this weekend's maintenance end", MAINTENANCE, end,
            f"The maintenance ends at {end} UTC")]
    for week, name in re.findall(r"week (\d) (\w+)", ROTA.posts[0].body):
        out.append((f"who is on moderator duty in week {week} of June", ROTA, name,
                    f"The June rota lists {name} for week {week}"))
    return out


def staff_login() -> list[Draft]:
    """Members-only answers; half log in first, half from the board's login prompt."""
    out: list[Draft] = []
    for i, (question, t, text, fact) in enumerate(_staff_questions()):
        for j, user in enumerate(DEMO_USERS):
            if (i + j) % 2 == 0:
                steps = [link("Log in"), *_login(user), link("Staff lounge"), link(t.title)]
            else:
                steps = [link("Staff lounge"), link("Log in to view this board"), *_login(user),
                         link(t.title)]
            out.append(Draft("forum-staff-login", f"Log in to Sandbox Q&A as {user} (password: "
                             f"{d.PASSWORDS[user]}). According to the Staff lounge, {question}?",
                             "forum", "login", 5,
                             [("Login", [f"The user is signed in as {user}"]),
                              ("Answer", [fact])], [*steps, answer(text)], [_e(t)]))
    return out


def _upvote(t: d.Thread, post: d.Post, user: str) -> Draft:
    after = str(post.votes + 1)
    return Draft("forum-upvote", f"Log in to Sandbox Q&A as {user} (password: "
                 f"{d.PASSWORDS[user]}) and upvote post {post.number} in the thread "
                 f"'{t.title}'. How many votes does the post have afterwards?",
                 "forum", "voting", 7,
                 [("Login", [f"The user is signed in as {user}"]),
                  ("Vote", [f"Post {post.number} was upvoted and now shows {after} votes"])],
                 [*_to_thread(t), link("Log in to reply"), *_login(user),
                  button(f"Upvote post {post.number}"), answer(after)], [_e(t)])


def upvote() -> list[Draft]:
    """One post a thread, rotating; its other posts pool-only (the demo users in turn)."""
    out: list[Draft] = []
    more: list[Draft] = []
    for i, t in enumerate(PUBLIC):
        post = t.posts[t.tid % len(t.posts)]
        out.append(_upvote(t, post, DEMO_USERS[i % len(DEMO_USERS)]))
        more += [_upvote(t, p, DEMO_USERS[(i + p.number) % len(DEMO_USERS)])
                 for p in t.posts if p.number != post.number]
    return out + pool_only(more)


TEMPLATES = [author, member_reputation, staff_login, upvote]
