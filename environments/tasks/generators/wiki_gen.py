"""Generated Sandpedia tasks: infobox look-ups, facts one and two links deep, comparisons.

Questions follow the infobox links the pages really render: a value written "[[Title]]"
is a link, so "the capital of Kestrin" is one click from Kestrin's article.

Each look-up asks one fact an article (or chain), rotating; the other facts are drafted
pool-only: further tasks over the rollout pool's region (splits)."""

from __future__ import annotations

import re
from collections.abc import Callable

from environments import wiki_data as d
from environments.tasks.common import Action, answer, go_back, link, type_
from environments.tasks.generators.draft import Draft, pool_only

_ONE_LINK = re.compile(r"^\[\[([^\]|]+)\]\]$")
# Plain (unlinked) infobox labels as a question names them.
PHRASE = {"Population": "population", "Area": "area", "Founded": "founding year",
          "Elevation": "elevation", "Mayor": "mayor", "Length": "length", "Mouth": "mouth",
          "First ascent": "year of the first ascent", "Maximum depth": "maximum depth",
          "Born": "year of birth", "Died": "year of death", "Office": "office",
          "In office since": "year of taking office", "Occupation": "occupation",
          "Speakers": "number of speakers", "Script": "script", "Code": "currency code",
          "Subunit": "subunit", "Introduced": "year of introduction"}
# Single-link labels: the noun phrase for "the thing this label points to, seen from x".
HOP: dict[str, Callable[[str], str]] = {
    "Capital": lambda x: f"the capital of {x}",
    "Currency": lambda x: f"the currency of {x}",
    "Official language": lambda x: f"the official language of {x}",
    "Head of state": lambda x: f"the head of state of {x}",
    "Country": lambda x: f"the country that {x} is in",
    "River": lambda x: f"the river that {x} lies on",
    "Source": lambda x: f"the source of {x}",
    "Largest city": lambda x: f"the largest city on {x}",
    "Countries": lambda x: f"the country {x} flows through",
    "First climbed by": lambda x: f"the first person to climb {x}",
    "Birthplace": lambda x: f"the birthplace of {x}",
    "Spoken in": lambda x: f"the country where {x} is spoken",
    "Used in": lambda x: f"the country that uses {x}",
}
NOUN = {"countries": "country", "cities": "city", "rivers": "river", "landmarks": "landmark",
        "people": "person", "languages": "language", "currencies": "currency"}
# (category, label, what the winner does, whether the larger number wins)
COMPARABLE = [
    ("countries", "Population", "has the larger population", True),
    ("countries", "Area", "is larger by area", True),
    ("countries", "Founded", "was founded earlier", False),
    ("cities", "Population", "has the larger population", True),
    ("cities", "Elevation", "lies higher", True),
    ("cities", "Founded", "was founded earlier", False),
    ("rivers", "Length", "is longer", True),
    ("people", "Born", "was born earlier", False),
    ("languages", "Speakers", "has more speakers", True),
    ("currencies", "Introduced", "was introduced earlier", False),
]


def _name(a: d.Article) -> str:
    """How a sentence names the article: "the Ambra River", "Veloria"."""
    return f"the {a.title}" if a.category in ("rivers", "currencies") else a.title


def _e(*articles: d.Article) -> list[str]:
    return [f"article:{a.title}" for a in articles]


def _plain(a: d.Article) -> list[str]:
    return [k for k, v in a.facts if "[[" not in v and k in PHRASE]


def _hops(a: d.Article) -> list[tuple[str, d.Article]]:
    """(label, target) for every infobox row that is exactly one internal link."""
    out: list[tuple[str, d.Article]] = []
    for k, v in a.facts:
        m = _ONE_LINK.match(v)
        if m and k in HOP and m.group(1) in d.BY_TITLE:
            out.append((k, d.BY_TITLE[m.group(1)]))
    return out


def _category(a: d.Article) -> Action:
    return link(d.CATEGORIES[a.category])


def _infobox(a: d.Article, key: str) -> Draft:
    return Draft("wiki-infobox", f"According to Sandpedia, what is the {PHRASE[key]} of "
                 f"{_name(a)}?", "wiki", "lookup", 2,
                 [("Infobox", [f"The {a.title} infobox lists {key} {a.fact(key)}"])],
                 [_category(a), link(a.title), answer(a.fact(key))], _e(a))


def infobox() -> list[Draft]:
    out: list[Draft] = []
    more: list[Draft] = []
    for i, a in enumerate(d.ARTICLES):
        labels = _plain(a)
        key = labels[i % len(labels)]
        out.append(_infobox(a, key))
        more += [_infobox(a, k) for k in labels if k != key]
    return out + pool_only(more)


def _two_hop(a: d.Article, hop: str, b: d.Article, key: str) -> Draft:
    return Draft("wiki-two-hop", f"On Sandpedia, what is the {PHRASE[key]} of "
                 f"{HOP[hop](_name(a))}?", "wiki", "multi-hop", 4,
                 [("Link", [f"{a.title} lists {hop} {b.title}"]),
                  ("Fact", [f"{b.title} lists {key} {b.fact(key)}"])],
                 [type_("searchbox", "Search Sandpedia", a.title), link(b.title),
                  answer(b.fact(key))], _e(a, b))


def two_hop() -> list[Draft]:
    out: list[Draft] = []
    more: list[Draft] = []
    for a in d.ARTICLES:
        for hop, b in _hops(a):
            labels = _plain(b)
            key = labels[len(out) % len(labels)]
            out.append(_two_hop(a, hop, b, key))
            more += [_two_hop(a, hop, b, k) for k in labels if k != key]
    return out + pool_only(more)


def _three_hop(a: d.Article, hop1: str, b: d.Article, hop2: str, c: d.Article,
               key: str) -> Draft:
    return Draft("wiki-three-hop", f"On Sandpedia, what is the {PHRASE[key]} of "
                 f"{HOP[hop2](HOP[hop1](_name(a)))}?", "wiki", "multi-hop", 7,
                 [("First link", [f"{a.title} lists {hop1} {b.title}"]),
                  ("Second link", [f"{b.title} lists {hop2} {c.title}"]),
                  ("Fact", [f"{c.title} lists {key} {c.fact(key)}"])],
                 [_category(a), link(a.title), link(b.title), link(c.title),
                  answer(c.fact(key))], _e(a, b, c))


def three_hop() -> list[Draft]:
    """Two links deep: one second hop and fact per first hop, rotating, never back to the
    start; every other second hop and fact pool-only."""
    out: list[Draft] = []
    more: list[Draft] = []
    for a in d.ARTICLES:
        for hop1, b in _hops(a):
            seconds = [(h, c) for h, c in _hops(b) if c.title != a.title]
            if not seconds:
                continue
            hop2, c = seconds[len(out) % len(seconds)]
            labels = _plain(c)
            key = labels[len(out) % len(labels)]
            out.append(_three_hop(a, hop1, b, hop2, c, key))
            more += [_three_hop(a, hop1, b, h, x, k) for h, x in seconds for k in _plain(x)
                     if (h, x.title, k) != (hop2, c.title, key)]
    return out + pool_only(more)


def _num(value: str) -> float:
    found = re.match(r"[\d.]+", value.replace(",", ""))
    assert found, value
    return float(found.group())


def compare() -> list[Draft]:
    """Every pair within a category, per comparable label (splits keeps the held-out ones)."""
    out: list[Draft] = []
    for cat, key, does, larger in COMPARABLE:
        items = d.in_category(cat)
        for i, a in enumerate(items):
            for b in items[i + 1:]:
                va, vb = _num(a.fact(key)), _num(b.fact(key))
                if va == vb:
                    continue
                win, lose = (a, b) if (va > vb) == larger else (b, a)
                out.append(Draft("wiki-compare", f"On Sandpedia, which {NOUN[cat]} {does}: "
                                 f"{a.title} or {b.title}? Answer with the article title.",
                                 "wiki", "comparison", 6,
                                 [("Both values", [f"{x.title} lists {key} {x.fact(key)}"
                                                   for x in (a, b)]),
                                  ("Winner", [f"{win.title} {does}"])],
                                 [_category(a), link(lose.title), go_back(), link(win.title),
                                  answer(win.title)], _e(a, b)))
    return out


TEMPLATES = [infobox, two_hop, compare, three_hop]
