"""Set-of-marks: the numbered, interactive elements of a page's aria snapshot.

Shared by the browser worker (producers/browser/observe.py, every observation) and the
MiniWoB++ reference builder (environments/tasks/miniwob_references.py), so a reference
step is checked against exactly the marks the teacher-forcing policy will see.
"""

from __future__ import annotations

import re

from webgym_common.events import Mark

# Roles a user can act on; they get a number in set-of-marks mode.
INTERACTIVE_ROLES = frozenset({
    "button", "link", "textbox", "searchbox", "combobox", "checkbox", "radio", "option",
    "menuitem", "menuitemcheckbox", "menuitemradio", "tab", "switch", "slider", "spinbutton",
    "listbox", "treeitem", "gridcell", "columnheader",
})
_LINE = re.compile(
    # A line whose name holds ": " is YAML-quoted: - 'link "Price: low" [ref=e5]'
    r"""^\s*- '?(?P<role>[\w-]+)(?: "(?P<name>(?:[^"\\]|\\.)*)")?(?P<attrs>.*?)"""
    r"\[ref=(?P<ref>[\w-]+)\](?P<rest>.*)$"
)
_BOX = re.compile(r"\[box=(-?\d+(?:\.\d+)?),(-?\d+(?:\.\d+)?),(\d+(?:\.\d+)?),(\d+(?:\.\d+)?)\]")
_INLINE_TEXT = re.compile(r"\]: (?P<text>.+)$")
UNNAMED_TEXT_CHARS = 80


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def text_of(lines: list[str], i: int) -> str:
    """A name for an element the snapshot leaves unnamed (a clickable div, MiniWoB's START
    overlay): its inline text, else its first descendant's name or text."""
    if found := _INLINE_TEXT.search(lines[i]):
        return found["text"].strip().strip("'\"")[:UNNAMED_TEXT_CHARS]
    for line in lines[i + 1:]:
        if _indent(line) <= _indent(lines[i]):
            break
        child = _LINE.match(line)
        if child and child["name"]:
            return child["name"][:UNNAMED_TEXT_CHARS]
        if found := _INLINE_TEXT.search(line) or re.search(r"- text: (?P<text>.+)$", line):
            return found["text"].strip().strip("'\"")[:UNNAMED_TEXT_CHARS]
    return ""


def parse_marks(tree: str, max_marks: int) -> list[Mark]:
    """Number the interactive, visible elements of an aria snapshot (mode="ai", boxes=True)."""
    marks: list[Mark] = []
    lines = tree.splitlines()
    for i, line in enumerate(lines):
        m = _LINE.match(line)
        if not m:
            continue
        interactive = m["role"] in INTERACTIVE_ROLES or "[cursor=pointer]" in line
        box = _BOX.search(m["attrs"] + m["rest"])
        if not interactive or box is None:
            continue
        x, y, w, h = (float(v) for v in box.groups())
        if w <= 0 or h <= 0:
            continue
        name = (m["name"] or "").replace('\\"', '"') or text_of(lines, i)
        marks.append(Mark(index=len(marks) + 1, ref=m["ref"], role=m["role"], name=name,
                          x=x, y=y, width=w, height=h))
        if len(marks) >= max_marks:
            break
    return marks
