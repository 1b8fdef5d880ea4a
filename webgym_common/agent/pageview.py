"""The page as the policy sees it: the one spec of the observation text in the prompt.

`page_view(tree, marks, max_chars)` turns a Playwright aria snapshot (mode="ai",
boxes=True) and its set-of-marks into short lines, in document order:

- every mark as `"name" role state value="..." [N]`, name first so a small model
  finds the element by what it reads and copies the number at the end of the line,
  e.g. `"vLr" checkbox checked [4]`, `textbox value="alice" [2]`;
- the page's text (headings, paragraphs, cells, labels, `text:` nodes) as plain
  lines; a table row's cells share one line (`Color | aqua`), inline pieces join.

The [ref]/[box] noise is dropped, a text that repeats the name of its element is
left out, and page text is treated as data: control and format characters are
removed, `[N]` in page text is rewritten so it never reads as an element number,
and each line is capped. Over `max_chars`, element lines are kept first, then text
lines, and a last line says how many were left out.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from webgym_common.events import Mark

MAX_LINE_CHARS = 200  # one text line (a paragraph, a joined table row)
MAX_NAME_CHARS = 80  # an element's name or value
# What a cut view's closing line may take (so the view stays within its budget).
_NOTE_CHARS = 60

# Roles whose inline text is their current value, not their name.
VALUE_ROLES = frozenset({"textbox", "searchbox", "combobox", "spinbutton", "slider"})
# Roles that are checked or not: "unchecked" is said, as absence is easy to miss.
CHECKABLE_ROLES = frozenset({"checkbox", "radio", "switch", "menuitemcheckbox", "menuitemradio"})
# Containers whose accessible name only labels a group: the group's content says it anyway.
_CONTAINER_ROLES = frozenset({
    "generic", "group", "navigation", "region", "main", "banner", "contentinfo",
    "complementary", "form", "search", "list", "table", "rowgroup", "row", "tablist",
    "tabpanel", "menu", "menubar", "toolbar", "tree", "treegrid", "grid", "listbox",
    "radiogroup", "document", "application", "presentation", "none", "separator", "status",
    "log", "marquee", "timer", "article", "figure", "iframe",
})
# Siblings of these roles share a line, separated by " | " (a table row, a select's options).
_CELL_ROLES = frozenset({"cell", "gridcell", "columnheader", "rowheader", "option"})
# Snapshot attributes that are a state worth telling, and the word the view uses.
_STATE_WORDS = {"selected": "selected", "expanded": "expanded", "pressed": "pressed",
                "disabled": "disabled", "active": "focused"}

_NODE = re.compile(
    r"""^(?P<role>[\w-]+)(?: "(?P<name>(?:[^"\\]|\\.)*)")?(?P<attrs>(?: \[[^\]]*\])*)"""
    r"""(?::(?: (?P<text>.*))?)?$"""
)
_ATTR = re.compile(r"\[([^\]=]+)(?:=([^\]]*))?\]")
_ESCAPE = re.compile(r"""\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|.)""")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "0": "\0"}
_NUMBER_REF = re.compile(r"\[(\s*\d+\s*)\]")


@dataclass(frozen=True)
class Node:
    """One line of the snapshot, read."""

    depth: int  # the line's indent
    role: str  # "text" for a text node
    name: str = ""
    text: str = ""  # inline text after `: ` (an input's value, a node's own text)
    ref: str = ""
    attrs: tuple[tuple[str, str], ...] = ()

    def attr(self, key: str) -> str | None:
        return next((v for k, v in self.attrs if k == key), None)


def _unescape(body: str) -> str:
    """A double-quoted YAML scalar's body (Playwright escapes `\\`, `"` and controls)."""
    def one(m: re.Match[str]) -> str:
        code = m.group(1)
        if code[0] in "xu" and len(code) > 1:
            return chr(int(code[1:], 16))
        return _ESCAPES.get(code, code)
    return _ESCAPE.sub(one, body)


def unquote(value: str) -> str:
    """A YAML scalar as it reads: `"a: b"` -> a: b, `'it''s'` -> it's, plain as it is."""
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return _unescape(value[1:-1])
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    return value


def _split_quoted_key(item: str) -> str:
    """`'link "a: b" [ref=e5]': text` -> `link "a: b" [ref=e5]: text` (YAML-quoted key)."""
    if not item.startswith("'"):
        return item
    i = 1
    while i < len(item):
        if item[i] == "'":
            if item[i + 1 : i + 2] == "'":
                i += 2
                continue
            return item[1:i].replace("''", "'") + item[i + 1 :]
        i += 1
    return item


def parse_line(line: str) -> Node | None:
    """One snapshot line as a Node; None for what is no node (`/url:` properties, blanks)."""
    stripped = line.lstrip()
    if not stripped.startswith("- "):
        return None
    depth = len(line) - len(stripped)
    item = _split_quoted_key(stripped[2:].strip())
    if item.startswith("/"):
        return None
    node = _NODE.match(item)
    if node is None:  # a bare string item: text
        return Node(depth, "text", text=unquote(item))
    attrs = tuple((k.strip(), (v or "").strip()) for k, v in _ATTR.findall(node["attrs"] or ""))
    return Node(
        depth, node["role"], name=_unescape(node["name"] or ""),
        text=unquote(node["text"] or ""), ref=dict(attrs).get("ref", ""), attrs=attrs,
    )


def element_state(line: str) -> list[str]:
    """The state words of a snapshot line's element, in a fixed order: `checked`,
    `unchecked` (a checkable role without [checked]), `mixed`, `selected`, `expanded`,
    `pressed`, `disabled`, `focused` ([active])."""
    node = parse_line(line)
    if node is None:
        return []
    words: list[str] = []
    checked = node.attr("checked")
    if checked is not None:
        words.append("mixed" if checked == "mixed" else "checked")
    elif node.role in CHECKABLE_ROLES:
        words.append("unchecked")
    for key, word in _STATE_WORDS.items():
        value = node.attr(key)
        if value is not None and value != "false":
            words.append("mixed" if value == "mixed" and word == "pressed" else word)
    return words


def element_value(line: str) -> str | None:
    """The current value of a text field, combobox, spinbutton or slider: its inline text
    (`textbox [ref=e6]: alice` -> "alice"); None for other roles or an empty field."""
    node = parse_line(line)
    if node is None or node.role not in VALUE_ROLES:
        return None
    return node.text or None


def clean(text: str, limit: int = MAX_LINE_CHARS) -> str:
    """Page text made safe to show: control and format characters (bidi overrides,
    zero-width) removed, whitespace collapsed, `[N]` written `(N)` so page text never
    looks like an element's number, cut to `limit` characters."""
    kept = "".join(
        " " if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c
        for c in text if unicodedata.category(c) != "Cf"
    )
    kept = _NUMBER_REF.sub(r"(\1)", " ".join(kept.split()))
    return kept if len(kept) <= limit else kept[: limit - 3].rstrip() + "..."


def _quoted(text: str) -> str:
    # A name's own double quotes would end it early: they become single quotes.
    return '"' + clean(text, MAX_NAME_CHARS).replace('"', "'") + '"'


def element_line(index: int, role: str, name: str = "", states: Sequence[str] = (),
                 value: str | None = None) -> str:
    """`"name" role state value="..." [N]`; an unnamed element starts with its role."""
    parts = [_quoted(name)] if clean(name) else []
    parts += [role, *states]
    if value is not None:
        parts.append(f"value={_quoted(value)}")
    parts.append(f"[{index}]")
    return " ".join(parts)


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


@dataclass
class _Line:
    text: str
    element: bool
    name: str = ""  # an element's name (to leave out text repeating it)
    parent: int = -1  # the node index of the parent (text lines join with siblings)
    role: str = ""
    inline: bool = False  # a `text:` node: it joins its siblings' text


def _selected_option(nodes: Sequence[Node], i: int) -> str | None:
    """A select's value: the name of its [selected] option (the options are its children)."""
    for node in nodes[i + 1 :]:
        if node.depth <= nodes[i].depth:
            break
        if node.role == "option" and node.attr("selected") is not None:
            return node.name
    return None


def _texts(node: Node) -> list[str]:
    """What a node that is no mark shows: its name (content roles) and its own text."""
    if node.role == "text":
        return [node.text]
    texts = [node.name] if node.name and node.role not in _CONTAINER_ROLES else []
    if node.text and not (texts and _same(node.text, node.name)):
        texts.append(node.text)
    return texts


def _lines(tree: str, marks: Sequence[Mark]) -> list[_Line]:
    """The view's lines in document order, before joining and budgeting."""
    read = [(parse_line(line), line) for line in tree.splitlines()]
    pairs = [(node, line) for node, line in read if node is not None]
    nodes = [node for node, _ in pairs]
    by_ref = {m.ref: m for m in marks}
    out: list[_Line] = []
    ancestors: list[tuple[int, int, str]] = []  # (depth, node index, element name or "")
    for i, (node, line) in enumerate(pairs):
        while ancestors and ancestors[-1][0] >= node.depth:
            ancestors.pop()
        parent = ancestors[-1][1] if ancestors else -1
        mark = by_ref.get(node.ref) if node.ref else None
        if mark is not None:
            # An unnamed field's mark takes its value as a name (marks.text_of): not here.
            name = node.name if node.role in VALUE_ROLES else mark.name
            value = element_value(line)
            if value is None and node.role == "combobox":
                value = _selected_option(nodes, i)
            if out and not out[-1].element and name and _same(out[-1].text, name):
                out.pop()  # a label just before its element: the element says it
            out.append(_Line(element_line(mark.index, node.role, name, element_state(line),
                                          value), True, name=name))
            ancestors.append((node.depth, i, name))
            if node.role not in VALUE_ROLES and node.text and not _same(node.text, name):
                out.append(_Line(" ".join(node.text.split()), False, parent=i, role="text",
                                 inline=True))
            continue
        ancestors.append((node.depth, i, ""))
        names = {a[2].casefold() for a in ancestors[:-1] if a[2]}
        for text in _texts(node):
            text = " ".join(text.split())
            if not text or text.casefold() in names:
                continue
            last = out[-1] if out else None
            if last is not None and (_same(last.name or last.text, text)):
                continue  # repeats the element (or the text) just before
            out.append(_Line(text, False, parent=parent, role=node.role,
                             inline=node.role == "text"))
    return out


def _joined(lines: list[_Line]) -> list[_Line]:
    """Siblings' text on one line: a row's cells (` | `), inline pieces (` `)."""
    out: list[_Line] = []
    for line in lines:
        prev = out[-1] if out else None
        if prev is not None and not prev.element and not line.element and (
            prev.parent == line.parent
        ):
            if prev.role in _CELL_ROLES and line.role in _CELL_ROLES:
                prev.text += " | " + line.text
                continue
            if prev.inline or line.inline:
                prev.text += " " + line.text
                prev.inline = line.inline
                continue
        out.append(line)
    return out


def fit(lines: Sequence[tuple[str, bool]], max_chars: int) -> list[str]:
    """Lines `(text, is_element)` cut to `max_chars` (newlines counted): all of them when
    they fit; else every element line and the text lines that still fit, in document
    order; else the element lines that fit. A last line says what was left out."""
    if sum(len(t) + 1 for t, _ in lines) <= max_chars:
        return [t for t, _ in lines]
    budget = max_chars - _NOTE_CHARS
    keep = [False] * len(lines)
    element_chars = sum(len(t) + 1 for t, e in lines if e)
    used = 0
    if element_chars <= budget:
        used = element_chars
        for i, (_, element) in enumerate(lines):
            keep[i] = element
    for priority in (True, False):  # elements first, then text
        if priority and element_chars <= budget:
            continue
        for i, (text, element) in enumerate(lines):
            if keep[i] or element != priority:
                continue
            if used + len(text) + 1 <= budget:
                keep[i] = True
                used += len(text) + 1
    kept = [t for (t, _), k in zip(lines, keep, strict=True) if k]
    left_texts = sum(1 for (_, e), k in zip(lines, keep, strict=True) if not k and not e)
    left_elements = sum(1 for (_, e), k in zip(lines, keep, strict=True) if not k and e)
    parts = [f"{left_elements} elements"] if left_elements else []
    parts += [f"{left_texts} text lines"] if left_texts else []
    return [*kept, f"({' and '.join(parts)} not shown)"]


def marks_view(marks: Sequence[Mark], max_chars: int) -> str:
    """The view from marks alone (no snapshot): one element line each, no state or value."""
    lines = [(element_line(m.index, m.role, m.name), True) for m in marks]
    return "\n".join(fit(lines, max_chars)) or "(no interactive elements)"


def page_view(tree: str, marks: Sequence[Mark], max_chars: int,
              omit: Collection[str] = ()) -> str:
    """The page text the prompt shows (see the module docstring); from the marks alone when
    there is no snapshot. Text lines equal to one of `omit` are left out (the task, which
    the prompt states already: MiniWoB pages print it)."""
    if not tree.strip():
        return marks_view(marks, max_chars)
    lines = [(clean(line.text) if not line.element else line.text, line.element)
             for line in _joined(_lines(tree, marks))
             if line.element or not any(_same(line.text, o) for o in omit)]
    return "\n".join(fit(lines, max_chars)) or "(empty page)"
