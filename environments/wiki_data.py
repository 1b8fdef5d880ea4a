"""Articles of "Sandpedia", an encyclopedia of an invented continent.

Everything is fictional on purpose: an agent cannot answer from memory, it has to read the
page. Infobox values written as "[[Title]]" become internal links; summaries use the same
markup. Revision histories are derived from a hash so they are stable across restarts.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

CATEGORIES = {
    "countries": "Countries",
    "cities": "Cities",
    "rivers": "Rivers",
    "landmarks": "Mountains and lakes",
    "people": "People",
    "languages": "Languages",
    "currencies": "Currencies",
}


@dataclass(frozen=True)
class Article:
    title: str
    category: str
    facts: tuple[tuple[str, str], ...]
    summary: str

    @property
    def slug(self) -> str:
        return self.title.replace(" ", "_")

    def fact(self, label: str) -> str:
        """Fact value with link markup stripped, as the reader sees it."""
        return strip_links(dict(self.facts)[label])


def strip_links(text: str) -> str:
    return re.sub(r"\[\[([^\]|]+)(?:\|([^\]]+))?\]\]", lambda m: m.group(2) or m.group(1), text)


def _a(title: str, category: str, summary: str, **facts: str) -> Article:
    return Article(title, category, tuple((k.replace("_", " "), v) for k, v in facts.items()),
                   summary)


ARTICLES: list[Article] = [
    # Countries
    _a("Veloria", "countries",
       "Veloria is a kingdom on the western coast of the continent. Its capital is [[Marlow]] "
       "and the [[Ambra River]] crosses the country from [[Mount Corvel]] to the Sea of Lune.",
       Capital="[[Marlow]]", Population="4,812,300", Area="61,240 km²",
       Currency="[[Velorian crown]]", Official_language="[[Velorian]]", Founded="1203",
       Head_of_state="[[Isolde Farrow]]"),
    _a("Kestrin", "countries",
       "Kestrin is a republic in the northern highlands, governed from [[Dunmere]]. Most of "
       "its fresh water comes from [[Lake Ivar]].",
       Capital="[[Dunmere]]", Population="2,104,950", Area="38,410 km²",
       Currency="[[Kestrin mark]]", Official_language="[[Kestric]]", Founded="1457",
       Head_of_state="[[Tomas Hale]]"),
    _a("Ombria", "countries",
       "Ombria is the most populous country of the continent. The [[Sollo River]] flows past "
       "its capital [[Sollace]].",
       Capital="[[Sollace]]", Population="9,331,700", Area="120,580 km²",
       Currency="[[Ombrian lira]]", Official_language="[[Ombrese]]", Founded="988",
       Head_of_state="[[Mira Valdez]]"),
    _a("Tessavar", "countries",
       "Tessavar is a small duchy downstream of [[Veloria]] on the [[Ambra River]]. It shares "
       "the [[Velorian]] language with its neighbour.",
       Capital="[[Quenby]]", Population="1,275,400", Area="22,905 km²",
       Currency="[[Tessavar florin]]", Official_language="[[Velorian]]", Founded="1610",
       Head_of_state="[[Aurel Brannock]]"),
    _a("Halvmark", "countries",
       "Halvmark is a northern kingdom on the Grey Sea. The [[Eskil River]] runs through its "
       "capital [[Eskilby]].",
       Capital="[[Eskilby]]", Population="3,560,120", Area="88,770 km²",
       Currency="[[Halvish krone]]", Official_language="[[Halvish]]", Founded="1099",
       Head_of_state="[[Sten Ravald]]"),
    _a("Pellucia", "countries",
       "Pellucia is a southern republic that uses the [[Ombrian lira]] and shares the "
       "[[Sollo River]] with [[Ombria]].",
       Capital="[[Arvento]]", Population="6,044,810", Area="74,330 km²",
       Currency="[[Ombrian lira]]", Official_language="[[Ombrese]]", Founded="1322",
       Head_of_state="[[Lucia Ortolan]]"),
    # Cities
    _a("Marlow", "cities", "Marlow is the capital and largest city of [[Veloria]].",
       Country="[[Veloria]]", Population="912,400", Elevation="38 m", Founded="1140",
       Mayor="Petra Quist", River="[[Ambra River]]"),
    _a("Brightwater", "cities", "Brightwater is a port city of [[Veloria]] famous for "
       "shipbuilding.", Country="[[Veloria]]", Population="288,150", Elevation="4 m",
       Founded="1311", Mayor="Jonas Elm", River="[[Ambra River]]"),
    _a("Dunmere", "cities", "Dunmere is the capital of [[Kestrin]], built on the [[Dun River]].",
       Country="[[Kestrin]]", Population="401,870", Elevation="612 m", Founded="1388",
       Mayor="Ola Brenner", River="[[Dun River]]"),
    _a("Fennick", "cities", "Fennick is a university town in [[Kestrin]] on the shore of "
       "[[Lake Ivar]].", Country="[[Kestrin]]", Population="97,300", Elevation="705 m",
       Founded="1502", Mayor="Idris Kell", River="[[Dun River]]"),
    _a("Sollace", "cities", "Sollace is the capital of [[Ombria]] and its main river port.",
       Country="[[Ombria]]", Population="1,740,220", Elevation="121 m", Founded="902",
       Mayor="Carla Benedetti", River="[[Sollo River]]"),
    _a("Castel Rua", "cities", "Castel Rua is a hill town in [[Ombria]] near "
       "[[Mount Teradan]].", Country="[[Ombria]]", Population="54,610", Elevation="1,140 m",
       Founded="1177", Mayor="Dario Fenn", River="[[Sollo River]]"),
    _a("Quenby", "cities", "Quenby is the capital of [[Tessavar]], at the mouth of the "
       "[[Ambra River]].", Country="[[Tessavar]]", Population="233,900", Elevation="12 m",
       Founded="1598", Mayor="Hugo Marr", River="[[Ambra River]]"),
    _a("Eskilby", "cities", "Eskilby is the capital of [[Halvmark]].",
       Country="[[Halvmark]]", Population="655,780", Elevation="27 m", Founded="1064",
       Mayor="Siri Holm", River="[[Eskil River]]"),
    _a("Skarholt", "cities", "Skarholt is a mining town in [[Halvmark]].",
       Country="[[Halvmark]]", Population="41,020", Elevation="388 m", Founded="1420",
       Mayor="Bjorn Aas", River="[[Eskil River]]"),
    _a("Arvento", "cities", "Arvento is the capital of [[Pellucia]].",
       Country="[[Pellucia]]", Population="1,020,640", Elevation="210 m", Founded="1290",
       Mayor="Nina Solari", River="[[Sollo River]]"),
    # Rivers
    _a("Ambra River", "rivers", "The Ambra River rises on [[Mount Corvel]] and flows west "
       "through [[Veloria]] and [[Tessavar]] to the Sea of Lune.",
       Length="812 km", Source="[[Mount Corvel]]", Mouth="Sea of Lune",
       Countries="[[Veloria]], [[Tessavar]]", Largest_city="[[Marlow]]"),
    _a("Dun River", "rivers", "The Dun River drains [[Lake Ivar]] and flows through "
       "[[Kestrin]].", Length="344 km", Source="[[Lake Ivar]]", Mouth="Sea of Lune",
       Countries="[[Kestrin]]", Largest_city="[[Dunmere]]"),
    _a("Sollo River", "rivers", "The Sollo River is the longest river of the continent.",
       Length="1,096 km", Source="[[Mount Teradan]]", Mouth="Bay of Arvento",
       Countries="[[Ombria]], [[Pellucia]]", Largest_city="[[Sollace]]"),
    _a("Eskil River", "rivers", "The Eskil River flows north into the Grey Sea.",
       Length="455 km", Source="[[Lake Ivar]]", Mouth="Grey Sea",
       Countries="[[Halvmark]]", Largest_city="[[Eskilby]]"),
    # Landmarks
    _a("Mount Corvel", "landmarks", "Mount Corvel is the highest peak of [[Veloria]]. It was "
       "first climbed by [[Edda Lind]].", Elevation="4,102 m", Country="[[Veloria]]",
       First_ascent="1871", First_climbed_by="[[Edda Lind]]"),
    _a("Mount Teradan", "landmarks", "Mount Teradan is a volcano in [[Ombria]].",
       Elevation="3,655 m", Country="[[Ombria]]", First_ascent="1902",
       First_climbed_by="[[Marco Ferrante]]"),
    _a("Lake Ivar", "landmarks", "Lake Ivar is the largest lake of [[Kestrin]].",
       Area="212 km²", Maximum_depth="148 m", Country="[[Kestrin]]",
       Outflows="[[Dun River]], [[Eskil River]]"),
    # People
    _a("Isolde Farrow", "people", "Isolde Farrow is the Queen of [[Veloria]].",
       Born="1968", Birthplace="[[Brightwater]]", Office="Queen of Veloria",
       In_office_since="2001"),
    _a("Tomas Hale", "people", "Tomas Hale is the President of [[Kestrin]].",
       Born="1959", Birthplace="[[Fennick]]", Office="President of Kestrin",
       In_office_since="2016"),
    _a("Mira Valdez", "people", "Mira Valdez is the Chancellor of [[Ombria]].",
       Born="1974", Birthplace="[[Castel Rua]]", Office="Chancellor of Ombria",
       In_office_since="2019"),
    _a("Aurel Brannock", "people", "Aurel Brannock is the Duke of [[Tessavar]].",
       Born="1951", Birthplace="[[Quenby]]", Office="Duke of Tessavar",
       In_office_since="1994"),
    _a("Sten Ravald", "people", "Sten Ravald is the King of [[Halvmark]].",
       Born="1962", Birthplace="[[Skarholt]]", Office="King of Halvmark",
       In_office_since="2008"),
    _a("Lucia Ortolan", "people", "Lucia Ortolan is the President of [[Pellucia]].",
       Born="1981", Birthplace="[[Arvento]]", Office="President of Pellucia",
       In_office_since="2022"),
    _a("Edda Lind", "people", "Edda Lind was a mountaineer who made the first ascent of "
       "[[Mount Corvel]].", Born="1843", Died="1920", Birthplace="[[Skarholt]]",
       Occupation="Mountaineer"),
    _a("Marco Ferrante", "people", "Marco Ferrante was a geologist who first climbed "
       "[[Mount Teradan]].", Born="1870", Died="1939", Birthplace="[[Sollace]]",
       Occupation="Geologist"),
    # Languages
    _a("Velorian", "languages", "Velorian is spoken in [[Veloria]] and [[Tessavar]].",
       Speakers="6.1 million", Script="Velorian alphabet", Spoken_in="[[Veloria]], [[Tessavar]]"),
    _a("Kestric", "languages", "Kestric is the language of [[Kestrin]].",
       Speakers="2.3 million", Script="Runic Kestric", Spoken_in="[[Kestrin]]"),
    _a("Ombrese", "languages", "Ombrese is the most widely spoken language of the continent.",
       Speakers="15.2 million", Script="Latin", Spoken_in="[[Ombria]], [[Pellucia]]"),
    _a("Halvish", "languages", "Halvish is spoken in [[Halvmark]].",
       Speakers="3.4 million", Script="Latin", Spoken_in="[[Halvmark]]"),
    # Currencies
    _a("Velorian crown", "currencies", "The Velorian crown is the currency of [[Veloria]].",
       Code="VLC", Subunit="100 pence", Introduced="1781", Used_in="[[Veloria]]"),
    _a("Kestrin mark", "currencies", "The Kestrin mark is the currency of [[Kestrin]].",
       Code="KSM", Subunit="100 pfen", Introduced="1873", Used_in="[[Kestrin]]"),
    _a("Ombrian lira", "currencies", "The Ombrian lira is used in [[Ombria]] and "
       "[[Pellucia]].", Code="OML", Subunit="100 centesimi", Introduced="1802",
       Used_in="[[Ombria]], [[Pellucia]]"),
    _a("Tessavar florin", "currencies", "The Tessavar florin is the currency of [[Tessavar]].",
       Code="TSF", Subunit="20 stivers", Introduced="1655", Used_in="[[Tessavar]]"),
    _a("Halvish krone", "currencies", "The Halvish krone is the currency of [[Halvmark]].",
       Code="HVK", Subunit="100 ore", Introduced="1835", Used_in="[[Halvmark]]"),
]

BY_TITLE: dict[str, Article] = {a.title: a for a in ARTICLES}
BY_SLUG: dict[str, Article] = {a.slug: a for a in ARTICLES}
EDITORS = ["Quillfeather", "MapMaker", "RiverRat", "Archivist42", "Lunette", "OldCartographer"]

# Which infobox column the category listing shows next to each title.
CATEGORY_COLUMN = {
    "countries": "Capital", "cities": "Country", "rivers": "Mouth", "landmarks": "Country",
    "people": "Birthplace", "languages": "Script", "currencies": "Code",
}


def in_category(category: str) -> list[Article]:
    return sorted((a for a in ARTICLES if a.category == category), key=lambda a: a.title)


def search(query: str) -> list[Article]:
    q = query.strip().lower()
    if not q:
        return []
    return [a for a in ARTICLES
            if q in a.title.lower() or q in strip_links(a.summary).lower()]


def history(article: Article) -> list[tuple[str, str, str]]:
    """(date, editor, summary) newest first; derived from the title hash, no clock involved."""
    h = hashlib.sha256(article.title.encode()).digest()
    n = 3 + h[0] % 3
    revs = []
    for i in range(n):
        month, day = 1 + h[i + 1] % 12, 1 + h[i + 6] % 28
        editor = EDITORS[h[i + 11] % len(EDITORS)]
        what = ["Fixed typo", "Updated infobox", "Added infobox", "Copy edit",
                "Added citation"][h[i + 16] % 5]
        revs.append((f"{2025 - i}-{month:02d}-{day:02d}", editor, what))
    return revs
