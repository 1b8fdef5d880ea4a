"""The pure decisions of the MiniWoB++ solvers: read an utterance, compute an answer.

The solvers (miniwob_solvers.py) read the page and act; everything that can be decided from
strings alone is here, so it is unit-tested without a browser.
"""

from __future__ import annotations

import re

_QUOTED = re.compile(r'"([^"]*)"')
_ORDINAL = re.compile(r"\b(\d+)(?:st|nd|rd|th)\b")
_NON_LETTERS = re.compile(r"[^a-zA-Z]+")


class Unsolvable(Exception):
    """The solver cannot read this episode (an utterance of an unexpected shape)."""


def quoted(utterance: str, i: int = 0) -> str:
    """The i-th double-quoted string of the utterance ('Click on the "okay" button.')."""
    found = _QUOTED.findall(utterance)
    if len(found) <= i:
        raise Unsolvable(f"no quoted string #{i} in {utterance!r}")
    return found[i]


def ordinal(utterance: str) -> int:
    """The 0-based position an ordinal names ("the 3rd input" -> 2)."""
    found = _ORDINAL.search(utterance)
    if found is None:
        raise Unsolvable(f"no ordinal in {utterance!r}")
    return int(found[1]) - 1


def after(utterance: str, prefix: str, suffix: str) -> str:
    """The text between a prefix and a suffix ("Click button " ONE ".")."""
    found = re.search(re.escape(prefix) + r"(.*?)" + re.escape(suffix), utterance)
    if found is None:
        raise Unsolvable(f"{utterance!r} is not {prefix!r}…{suffix!r}")
    return found[1]


def button_sequence(utterance: str) -> list[str]:
    """click-button-sequence: "Click button ONE, then click button TWO." -> [ONE, TWO]."""
    return re.findall(r"button (\w+)", utterance)


def checkbox_labels(utterance: str) -> list[str]:
    """click-checkboxes(-large): "Select a, b and click Submit." -> [a, b]; "Select nothing
    and click Submit." -> [] (the words are random strings with no comma or space)."""
    words = after(utterance, "Select ", " and click Submit")
    return [] if words == "nothing" else [w.strip() for w in words.split(",") if w.strip()]


def cased(utterance: str, text: str) -> str:
    """enter-text-2: the text in the case the utterance asks for."""
    if "upper case" in utterance:
        return text.upper()
    if "lower case" in utterance:
        return text.lower()
    raise Unsolvable(f"no case in {utterance!r}")


def arithmetic(problem: str) -> str:
    """simple-arithmetic: "3 x 4 = " -> "12" (digits 0-9; +, - and x)."""
    found = re.fullmatch(r"\s*(-?\d+)\s*([-+x])\s*(-?\d+)\s*=\s*", problem)
    if found is None:
        raise Unsolvable(f"not a problem: {problem!r}")
    a, op, b = int(found[1]), found[2], int(found[3])
    return str(a + b if op == "+" else a - b if op == "-" else a * b)


def nth_word(paragraph: str, n: int) -> str:
    """find-word: the n-th (0-based) word of the paragraph without its punctuation, as the
    page compares it."""
    words = [w for w in (_NON_LETTERS.sub("", w) for w in paragraph.split()) if w]
    if n >= len(words):
        raise Unsolvable(f"no word #{n} in {paragraph!r}")
    return words[n]


def is_odd(number: str) -> bool:
    return int(number.strip()) % 2 == 1  # Python's % is non-negative for negative numbers


def movie_fields(utterance: str) -> dict[str, str]:
    """multi-layouts / multi-orderings: "Search for action movies directed by Bowen from
    year 1998." -> the value of each field: genre, director, year."""
    found = re.search(r"Search for (.+?) movies directed by (.+?) from year (\d+)", utterance)
    if found is None:
        raise Unsolvable(f"not a movie search: {utterance!r}")
    return {"genre": found[1], "director": found[2], "year": found[3]}


def field_of(label: str) -> str | None:
    """Which movie field an input's label names ("Movie Genre", "Director Name", "Released
    Date", "Year:")."""
    label = label.lower()
    for key, field in (("genre", "genre"), ("director", "director"), ("year", "year"),
                       ("date", "year")):
        if key in label:
            return field
    return None


def results_page(index: int, per_page: int = 3) -> int:
    """search-engine: the page (1-based) of the index-th (0-based) result."""
    return index // per_page + 1
