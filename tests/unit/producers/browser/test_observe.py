"""Set-of-marks numbering from an aria snapshot (observe.parse_marks), and a page's text cut
to the caps (observe.capped).

playground.aria.txt is a snapshot recorded from the sandbox's /playground/ page with
`page.aria_snapshot(mode="ai", boxes=True)` in chromium-headless-shell at 1280x720, the
call observe() makes; it is kept verbatim.
"""

from __future__ import annotations

from pathlib import Path

from producers.browser.observe import capped
from webgym_common.agent.marks import parse_marks
from webgym_common.agent.pageview import page_view
from webgym_common.pagetext import CAPS, TREE_SEP, marker

RECORDED = (Path(__file__).parent / "playground.aria.txt").read_text(encoding="utf-8")


def test_interactive_visible_elements_are_numbered_in_document_order() -> None:
    marks = parse_marks(RECORDED, max_marks=100)
    assert [(m.index, m.ref, m.role, m.name) for m in marks] == [
        (1, "e4", "link", "Playground"),
        (2, "e5", "link", "All sandbox sites"),
        (3, "e9", "button", "Press me"),
        (4, "e10", "button", "Hover target"),
        (5, "e11", "link", "Next page"),
        (6, "e12", "link", "Jump to tall section"),
        (7, "e15", "textbox", "Echo"),
        (8, "e17", "textbox", "Start here"),  # [active] between name and ref
        (9, "e18", "button", "Tab target"),
        # Not an interactive role, but the page made it clickable (cursor=pointer).
        (10, "e19", "region", "Scroll box"),
    ]


def test_marks_carry_their_boxes() -> None:
    marks = {m.ref: m for m in parse_marks(RECORDED, max_marks=100)}
    assert (marks["e9"].x, marks["e9"].y, marks["e9"].width, marks["e9"].height) == (
        160.0, 148.0, 140.0, 36.0)
    assert (marks["e19"].x, marks["e19"].y, marks["e19"].width, marks["e19"].height) == (
        160.0, 310.0, 322.0, 162.0)


def test_text_headings_and_unreferenced_lines_get_no_mark() -> None:
    refs = {m.ref for m in parse_marks(RECORDED, max_marks=100)}
    # Generic containers, headings, paragraphs, the text-only region and the content info.
    assert not refs & {"e1", "e2", "e3", "e6", "e7", "e8", "e14", "e20", "e32", "e33", "e34"}
    assert "Button clicked 0 times" in RECORDED  # the status lines have no ref at all


def test_max_marks_keeps_the_first_ones() -> None:
    assert [m.index for m in parse_marks(RECORDED, max_marks=3)] == [1, 2, 3]
    assert [m.ref for m in parse_marks(RECORDED, max_marks=3)] == ["e4", "e5", "e9"]


def test_quoted_names_hidden_and_boxless_elements() -> None:
    # Hand-written lines in the snapshot's syntax for cases the playground page lacks.
    tree = "\n".join([
        "- list [ref=e1] [box=0,0,800,600]:",
        # A name holding ": " makes the whole line YAML-quoted.
        """  - 'link "Sort: price, low to high" [ref=e2] [cursor=pointer] [box=10,20,150,19]'""",
        r'''  - button "Say \"hi\"" [ref=e3] [box=-5,30.5,60,20.25]''',
        '  - button "Collapsed" [ref=e4] [box=10,50,0,20]',  # zero width: not visible
        '  - button "No box" [ref=e5]',
        '  - checkbox [checked] [ref=e6] [box=1,2,3,4]',  # no name
    ])
    marks = parse_marks(tree, max_marks=10)
    assert [(m.index, m.ref, m.role, m.name) for m in marks] == [
        (1, "e2", "link", "Sort: price, low to high"),
        (2, "e3", "button", 'Say "hi"'),
        (3, "e6", "checkbox", ""),
    ]
    assert (marks[1].x, marks[1].y, marks[1].width, marks[1].height) == (-5.0, 30.5, 60.0, 20.25)


def test_an_empty_snapshot_has_no_marks() -> None:
    assert parse_marks("", max_marks=10) == []


def test_an_unnamed_clickable_element_is_named_by_its_text() -> None:
    # As Chromium's snapshot gives a clickable <div> (MiniWoB's START overlay, a banner).
    tree = "\n".join([
        "- generic [active] [ref=e1] [box=8,8,1264,704]:",
        "  - generic [ref=e2] [cursor=pointer] [box=8,8,200,50]: START",
        "  - generic [ref=e3] [cursor=pointer] [box=8,58,200,50]:",
        "    - paragraph [ref=e4] [box=8,58,200,38]: Long text paragraph inside",
        "  - generic [ref=e5] [cursor=pointer] [box=8,124,200,50]:",
        '    - link "Read more" [ref=e6] [box=8,124,80,20]',
        "  - generic [ref=e7] [cursor=pointer] [box=8,200,20,20]",
        '  - button "Named" [ref=e8] [box=8,230,60,20]: inner text is not its name',
    ])
    marks = parse_marks(tree, 50)
    assert [(m.ref, m.name) for m in marks] == [
        ("e2", "START"), ("e3", "Long text paragraph inside"), ("e5", "Read more"),
        ("e6", "Read more"), ("e7", ""), ("e8", "Named")]


# -- a hostile page's text, cut to the caps (observe.capped) ----------------------------------


def test_a_huge_title_url_and_tree_are_cut_and_the_marks_come_from_the_tree_kept() -> None:
    lines = [
        '- link "Home" [ref=e1] [cursor=pointer] [box=0,0,50,20]',
        f'- button "{"B" * 5000}" [ref=e2] [cursor=pointer] [box=0,30,50,20]',
    ]
    padding = [f"- paragraph [ref=p{i}]: {'lorem ipsum ' * 40}" for i in range(12_000)]
    late = '- link "Past the cut" [ref=e9] [cursor=pointer] [box=0,60,50,20]'
    tree = "\n".join([*lines, *padding, late])
    assert len(tree) > 5 * 1024 * 1024
    obs = capped("http://127.0.0.1/" + "q" * 100_000, "T" * (10 * 1024 * 1024), tree,
                 b"shot", {"tree": 1.0}, max_marks=300)
    assert len(obs.tree) == CAPS.tree and obs.tree.startswith(lines[0])
    assert obs.tree.endswith(TREE_SEP + marker(len(tree)))
    # The model is told too: the page view ends with the marker.
    assert page_view(obs.tree, obs.marks, 4000).endswith(marker(len(tree)))
    assert len(obs.title) == CAPS.title and obs.title.endswith(marker(10 * 1024 * 1024))
    assert len(obs.url) == CAPS.url and obs.url.startswith("http://127.0.0.1/qqq")
    # Numbered in the tree as published: the link past the cut is not a mark.
    assert [m.ref for m in obs.marks] == ["e1", "e2"]
    assert obs.marks[0].name == "Home"
    assert len(obs.marks[1].name) == CAPS.mark_name
    assert obs.marks[1].name.endswith(marker(5000))
    assert obs.screenshot == b"shot" and obs.timings_ms == {"tree": 1.0}


def test_a_page_within_the_caps_is_observed_as_it_is() -> None:
    obs = capped("http://127.0.0.1/playground/", "Action playground", RECORDED, b"",
                 {}, max_marks=100)
    assert (obs.url, obs.title, obs.tree) == (
        "http://127.0.0.1/playground/", "Action playground", RECORDED)
    assert obs.marks == parse_marks(RECORDED, max_marks=100)
