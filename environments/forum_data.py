"""Users, boards, threads and posts of the sandbox forum ("Sandbox Q&A").

Seeded generation plus a few hand-written answers that tasks ask about. Posts are numbered
from 1 (the opening post) inside each thread.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

# Demo accounts that can log in; other members exist only as authors.
PASSWORDS = {"alice": "wonderland", "bob": "builder", "carol": "singer"}


@dataclass(frozen=True)
class User:
    name: str
    reputation: int
    joined: str
    location: str


USERS = [
    User("alice", 1840, "2019-04-02", "Lisbon"),
    User("bob", 925, "2020-01-17", "Berlin"),
    User("carol", 2310, "2018-09-30", "Oslo"),
    User("dave", 410, "2021-06-11", "Rome"),
    User("erin", 3075, "2017-02-08", "Vienna"),
    User("frank", 150, "2023-03-21", "Madrid"),
    User("grace", 1288, "2019-11-05", "Dublin"),
    User("heidi", 667, "2022-07-14", "Zurich"),
]
USER_BY_NAME = {u.name: u for u in USERS}

BOARDS = {
    "general": "General discussion",
    "python": "Python help",
    "hardware": "Hardware",
    "travel": "Travel tips",
    "staff": "Staff lounge",
}
PRIVATE_BOARDS = {"staff"}
THREADS_PER_PAGE = 4

_TITLES = {
    "general": ["Introduce yourself here", "Forum rules and etiquette",
                "What are you reading this month?", "Favourite offline hobbies",
                "Best note-taking app?", "Weekend photo challenge",
                "Suggestions for new boards"],
    "python": ["How do I reverse a list in place?", "asyncio.gather vs TaskGroup",
               "Virtual environments explained", "Why is my dict ordering different?",
               "Reading a CSV file with the csv module", "Type hints for callbacks",
               "Speeding up a slow loop"],
    "hardware": ["Laptop fan is always loud", "Choosing a monitor for programming",
                 "Mechanical keyboard switches compared", "External SSD not detected",
                 "Is 16 GB of RAM enough?", "Noise cancelling headphones for the office"],
    "travel": ["Cheapest way from Lisbon to Berlin", "Packing list for a week in Oslo",
               "Rome in three days", "Train or plane to Vienna?",
               "Travel insurance recommendations", "Madrid tapas tour tips"],
    "staff": ["Maintenance window this weekend", "Moderator rota for June"],
}

# Hand-written bodies for posts that tasks quote: (thread title, post number) -> text.
_BODIES = {
    ("How do I reverse a list in place?", 2):
        "Call my_list.reverse(). It reverses the list in place and returns None.",
    ("asyncio.gather vs TaskGroup", 2):
        "Prefer asyncio.TaskGroup: if one task fails, the others are cancelled for you.",
    ("Virtual environments explained", 2):
        "Run python -m venv .venv, then activate it before installing packages.",
    ("Laptop fan is always loud", 2):
        "Clean the air vents and set the power plan to Balanced; mine went quiet.",
    ("Is 16 GB of RAM enough?", 2):
        "16 GB is enough for most development work; get 32 GB for virtual machines.",
    ("Choosing a monitor for programming", 2):
        "A 27 inch 2560x1440 IPS panel is the sweet spot for reading code.",
    ("Cheapest way from Lisbon to Berlin", 2):
        "Book the early morning flight on a Tuesday; it is usually the cheapest.",
    ("Maintenance window this weekend", 1):
        "The forum will be read-only on Saturday from 03:00 to 05:00 UTC for maintenance.",
    ("Moderator rota for June", 1):
        "June rota: week 1 erin, week 2 carol, week 3 grace, week 4 alice.",
}

_GENERIC = [
    "Thanks, that helped a lot.", "I had the same problem last year.",
    "Could you share more details?", "Good question, following this thread.",
    "This worked for me too.", "I would try a different approach.",
    "Here is what I do in that situation.", "Agreed with the answer above.",
]


@dataclass(frozen=True)
class Post:
    number: int
    author: str
    date: str
    body: str
    votes: int
    accepted: bool = False


@dataclass(frozen=True)
class Thread:
    tid: int
    board: str
    title: str
    posts: tuple[Post, ...]

    @property
    def author(self) -> str:
        return self.posts[0].author

    @property
    def replies(self) -> int:
        return len(self.posts) - 1


def _build() -> list[Thread]:
    rng = random.Random(7)
    names = [u.name for u in USERS]
    threads: list[Thread] = []
    tid = 100
    for board, titles in _TITLES.items():
        for title in titles:
            tid += 1
            count = 1 if board == "staff" else rng.randint(2, 6)
            month, day = rng.randint(1, 12), rng.randint(1, 28)
            has_accepted = board in ("python", "hardware")
            posts: list[Post] = []
            for n in range(1, count + 1):
                author = "erin" if board == "staff" else rng.choice(names)
                if n > 1 and author == posts[0].author:
                    author = names[(names.index(author) + n) % len(names)]
                body = _BODIES.get((title, n)) or (
                    f"{title} - opening post." if n == 1 else rng.choice(_GENERIC)
                )
                posts.append(Post(
                    number=n, author=author, date=f"2025-{month:02d}-{min(28, day + n):02d}",
                    body=body, votes=rng.randint(0, 48), accepted=has_accepted and n == 2,
                ))
            threads.append(Thread(tid, board, title, tuple(posts)))
    return threads


THREADS: list[Thread] = _build()
BY_ID: dict[int, Thread] = {t.tid: t for t in THREADS}
BY_TITLE: dict[str, Thread] = {t.title: t for t in THREADS}


def in_board(board: str) -> list[Thread]:
    """Newest thread first, like most forums."""
    return sorted((t for t in THREADS if t.board == board), key=lambda t: -t.tid)


def board_page_of(thread: Thread) -> int:
    return in_board(thread.board).index(thread) // THREADS_PER_PAGE + 1


def search(query: str, include_private: bool = False) -> list[Thread]:
    q = query.strip().lower()
    if not q:
        return []
    return [
        t for t in THREADS
        if (include_private or t.board not in PRIVATE_BOARDS)
        and (q in t.title.lower() or any(q in p.body.lower() for p in t.posts))
    ]


def posts_by(user: str) -> list[tuple[Thread, Post]]:
    return [(t, p) for t in THREADS if t.board not in PRIVATE_BOARDS
            for p in t.posts if p.author == user]
