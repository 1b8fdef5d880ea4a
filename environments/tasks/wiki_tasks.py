"""Tasks for the sandbox wiki: single lookups up to four-hop link chains.

Each task names its template (its kind of question) and the articles its answer or steps
depend on: the chain of infobox links it follows, read from the articles themselves
(`_chain`), so build_tasks can decide its split from them."""

from __future__ import annotations

import re
from typing import Any

from environments import wiki_data as d
from environments.tasks.common import Action, answer, go_back, link, task, type_


def _f(title: str, label: str) -> str:
    return d.BY_TITLE[title].fact(label)


def _search(text: str) -> Action:
    return type_("searchbox", "Search Sandpedia", text)


def _editor(title: str) -> str:
    return d.history(d.BY_TITLE[title])[0][1]


def _chain(title: str, *labels: str) -> list[str]:
    """The article and the ones its infobox links lead to, row by row (`labels`; a row with
    several links leads to its first): the titles a multi-hop question passes through."""
    out = [d.BY_TITLE[title].title]
    for label in labels:
        found = re.match(r"\[\[([^\]|]+)", dict(d.BY_TITLE[out[-1]].facts)[label])
        assert found and found.group(1) in d.BY_TITLE, (out[-1], label)
        out.append(found.group(1))
    return out


def _t(n: int, instruction: str, sub: str, diff: int, facts: list[tuple[str, list[str]]],
       actions: list[Action], *, template: str, about: list[str]) -> dict[str, Any]:
    return task(f"wiki-{n:03d}", instruction, site="wiki", subdomain=sub, path="/wiki/",
                difficulty=diff, facts=facts, actions=actions, template=template,
                entities=[f"article:{d.BY_TITLE[t].title}" for t in about])


def tasks() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    pop = _f("Veloria", "Population")
    out.append(_t(1, "According to Sandpedia, what is the population of Veloria?", "lookup", 1,
                  [("Infobox", [f"The Veloria infobox lists a population of {pop}"])],
                  [link("Countries"), link("Veloria"), answer(pop)],
                  template="hand-wiki-infobox", about=["Veloria"]))
    code = _f("Halvish krone", "Code")
    out.append(_t(2, "Search Sandpedia for 'krone'. What is the currency code of the Halvish "
                  "krone?", "search", 1,
                  [("Code", [f"The Halvish krone article gives the code {code}"])],
                  [_search("krone"), link("Halvish krone"), answer(code)],
                  template="hand-wiki-infobox", about=["Halvish krone"]))
    year = _f("Dunmere", "Founded")
    out.append(_t(3, "In what year was the city of Dunmere founded?", "lookup", 2,
                  [("Founded", [f"Dunmere was founded in {year}"])],
                  [link("Cities"), link("Dunmere"), answer(year)],
                  template="hand-wiki-infobox", about=["Dunmere"]))
    length = _f("Sollo River", "Length")
    out.append(_t(4, "How long is the Sollo River?", "search", 2,
                  [("Length", [f"The Sollo River is {length} long"])],
                  [_search("Sollo"), link("Sollo River"), answer(length)],
                  template="hand-wiki-infobox", about=["Sollo River"]))
    ed = _editor("Mount Corvel")
    out.append(_t(5, "Who made the most recent edit to the Sandpedia article on Mount Corvel?",
                  "history", 3,
                  [("History", [f"The newest revision of Mount Corvel is by {ed}"])],
                  [_search("Mount Corvel"), link("View history"), answer(ed)],
                  template="hand-wiki-history", about=["Mount Corvel"]))
    script = _f("Kestric", "Script")
    out.append(_t(6, "Which script is the Kestric language written in?", "lookup", 2,
                  [("Script", [f"Kestric is written in {script}"])],
                  [link("Languages"), link("Kestric"), answer(script)],
                  template="hand-wiki-infobox", about=["Kestric"]))
    elev = _f("Dunmere", "Elevation")
    out.append(_t(7, "What is the elevation of the capital of Kestrin?", "multi-hop", 4,
                  [("Capital", ["The capital of Kestrin is Dunmere"]),
                   ("Elevation", [f"Dunmere lies at {elev}"])],
                  [_search("Kestrin"), link("Dunmere"), answer(elev)],
                  template="hand-wiki-multi-hop", about=_chain("Kestrin", "Capital")))
    born_in = _f("Mira Valdez", "Birthplace")
    out.append(_t(8, "In which city was the head of state of Ombria born?", "multi-hop", 4,
                  [("Head of state", ["Mira Valdez is the head of state of Ombria"]),
                   ("Birthplace", [f"Mira Valdez was born in {born_in}"])],
                  [link("Countries"), link("Ombria"), link("Mira Valdez"), answer(born_in)],
                  template="hand-wiki-multi-hop", about=_chain("Ombria", "Head of state")))
    depth = _f("Lake Ivar", "Maximum depth")
    out.append(_t(9, "What is the maximum depth of the lake where the Dun River has its "
                  "source?", "multi-hop", 5,
                  [("Source", ["The Dun River's source is Lake Ivar"]),
                   ("Depth", [f"Lake Ivar has a maximum depth of {depth}"])],
                  [link("Rivers"), link("Dun River"), link("Lake Ivar"), answer(depth)],
                  template="hand-wiki-multi-hop", about=_chain("Dun River", "Source")))
    cap = _f("Tessavar", "Capital")
    out.append(_t(10, "Which country uses the currency with code TSF, and what is that "
                  "country's capital? Answer with the capital.", "multi-hop", 5,
                  [("Currency", ["TSF is the code of the Tessavar florin, used in Tessavar"]),
                   ("Capital", [f"The capital of Tessavar is {cap}"])],
                  [link("Currencies"), link("Tessavar florin"), link("Tessavar"), answer(cap)],
                  template="hand-wiki-multi-hop", about=_chain("Tessavar florin", "Used in")))
    born = _f("Edda Lind", "Born")
    out.append(_t(11, "The Ambra River rises on a mountain. In what year was the person who "
                  "first climbed that mountain born?", "multi-hop", 6,
                  [("Mountain", ["The Ambra River's source is Mount Corvel"]),
                   ("Climber", ["Mount Corvel was first climbed by Edda Lind"]),
                   ("Born", [f"Edda Lind was born in {born}"])],
                  [_search("Ambra River"), link("Mount Corvel"), link("Edda Lind"),
                   answer(born)],
                  template="hand-wiki-multi-hop",
                  about=_chain("Ambra River", "Source", "First climbed by")))
    epop = _f("Eskilby", "Population")
    out.append(_t(12, "What is the population of the largest city on the Eskil River?",
                  "multi-hop", 6,
                  [("Largest city", ["The largest city on the Eskil River is Eskilby"]),
                   ("Population", [f"Eskilby has a population of {epop}"])],
                  [link("Rivers"), link("Eskil River"), link("Eskilby"), answer(epop)],
                  template="hand-wiki-multi-hop", about=_chain("Eskil River", "Largest city")))
    length = _f("Eskil River", "Length")
    out.append(_t(13, "The head of state of Halvmark was born in a town on a river. How long "
                  "is that river?", "multi-hop", 7,
                  [("Person", ["Sten Ravald, head of state of Halvmark, was born in Skarholt"]),
                   ("River", [f"Skarholt is on the Eskil River, which is {length} long"])],
                  [_search("Halvmark"), link("Sten Ravald"), link("Skarholt"),
                   link("Eskil River"), answer(length)],
                  template="hand-wiki-multi-hop",
                  about=_chain("Halvmark", "Head of state", "Birthplace", "River")))
    ed = _editor("Eskilby")
    out.append(_t(14, "Who made the most recent edit to the article about the capital of the "
                  "country whose official language is Halvish?", "history", 8,
                  [("Country", ["Halvish is spoken in Halvmark, whose capital is Eskilby"]),
                   ("Editor", [f"The newest revision of Eskilby is by {ed}"])],
                  [link("Languages"), link("Halvish"), link("Halvmark"), link("Eskilby"),
                   link("View history"), answer(ed)],
                  template="hand-wiki-history", about=_chain("Halvish", "Spoken in", "Capital")))
    elev = _f("Sollace", "Elevation")
    out.append(_t(15, "The Sollo River rises on a mountain. What is the elevation of the city "
                  "where that mountain's first climber was born?", "multi-hop", 8,
                  [("Mountain", ["The Sollo River's source is Mount Teradan, first climbed by "
                                 "Marco Ferrante"]),
                   ("City", [f"Marco Ferrante was born in Sollace, elevation {elev}"])],
                  [_search("Sollo"), link("Sollo River"), link("Mount Teradan"),
                   link("Marco Ferrante"), link("Sollace"), answer(elev)],
                  template="hand-wiki-multi-hop",
                  about=_chain("Sollo River", "Source", "First climbed by", "Birthplace")))
    intro = _f("Halvish krone", "Introduced")
    out.append(_t(16, "When was the currency of Edda Lind's birth country introduced?",
                  "multi-hop", 7,
                  [("Birthplace", ["Edda Lind was born in Skarholt, Halvmark"]),
                   ("Currency", [f"Halvmark uses the Halvish krone, introduced in {intro}"])],
                  [_search("Edda Lind"), link("Skarholt"), link("Halvmark"),
                   link("Halvish krone"), answer(intro)],
                  template="hand-wiki-multi-hop",
                  about=_chain("Edda Lind", "Birthplace", "Country", "Currency")))
    pops = {c: int(_f(c, "Population").replace(",", "")) for c in ("Pellucia", "Tessavar")}
    big = max(pops, key=pops.__getitem__)
    small = min(pops, key=pops.__getitem__)
    head = _f(big, "Head of state")
    hborn = _f(head, "Born")
    cap_of = {"Pellucia": "Arvento", "Tessavar": "Quenby"}
    out.append(_t(17, "Compare the countries whose capitals are Arvento and Quenby. In what "
                  "year was the head of state of the more populous one born?", "comparison", 9,
                  [("Populations", [f"{big} has {_f(big, 'Population')} people",
                                    f"{small} has {_f(small, 'Population')} people"]),
                   ("Head of state", [f"{head} heads {big} and was born in {hborn}"])],
                  [link("Cities"), link(cap_of[small]), link(small), go_back(), go_back(),
                   link(cap_of[big]), link(big), link(head), answer(hborn)],
                  template="hand-wiki-compare",
                  about=[*_chain(cap_of[small], "Country"),
                         *_chain(cap_of[big], "Country", "Head of state")]))
    return out
