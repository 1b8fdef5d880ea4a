"""Scripted MiniWoB++ solvers: read a started episode's page, yield the steps that solve it.

A solver is an async generator `solve(page, utterance)` yielding `Step`s: an action (Click or
Type, the two the references need) and the element it acts on, as a JS expression that
evaluates to that DOM element. The builder (miniwob_references.py) carries out each step
before the solver goes on (a step can change the page: a tab opens, a popup appears), and
turns its element into the role/name/nth of the set-of-marks element the worker would number.
Decisions that need no page are in miniwob_parse.py.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from playwright.async_api import Page

from environments.tasks import miniwob_parse as parse
from environments.tasks.miniwob_parse import Unsolvable


@dataclass(frozen=True)
class Step:
    action: str  # "Click" or "Type"
    target: str  # a JS expression evaluating to the element
    text: str | None = None


Solver = Callable[[Page, str], AsyncIterator[Step]]


def css(selector: str, i: int = 0) -> str:
    """The i-th element a CSS selector matches."""
    return f"document.querySelectorAll({json.dumps(selector)})[{i}]"


def with_text(selector: str, text: str) -> str:
    """The first element a selector matches whose trimmed text is exactly `text`."""
    return (f"[...document.querySelectorAll({json.dumps(selector)})]"
            f".find(e => e.textContent.trim() === {json.dumps(text)})")


def labelled_input(text: str) -> str:
    """The input inside the <label> whose text is exactly `text` (radios, checkboxes)."""
    return f"({with_text('#area label', text)}).querySelector('input')"


async def read(page: Page, js: str) -> Any:
    return await page.evaluate(f"() => {js}")


def click(target: str) -> Step:
    return Step("Click", target)


def type_(target: str, text: str) -> Step:
    return Step("Type", target, text)


SUBMIT = css("#subbtn")


async def click_test(page: Page, u: str) -> AsyncIterator[Step]:
    yield click(css("#area button"))


async def click_test_2(page: Page, u: str) -> AsyncIterator[Step]:
    yield click(with_text("#area button", parse.after(u, "Click button ", ".")))


async def click_button(page: Page, u: str) -> AsyncIterator[Step]:
    yield click(with_text("#area button", parse.quoted(u)))


async def click_button_sequence(page: Page, u: str) -> AsyncIterator[Step]:
    for label in parse.button_sequence(u):
        yield click(with_text("#area button", label))


async def click_dialog(page: Page, u: str) -> AsyncIterator[Step]:
    yield click(css(".ui-dialog-titlebar-close"))


async def click_dialog_2(page: Page, u: str) -> AsyncIterator[Step]:
    label = parse.quoted(u)
    yield click(css(".ui-dialog-titlebar-close") if label.lower() == "x"
                else with_text(".ui-dialog button", label))


async def focus_text(page: Page, u: str) -> AsyncIterator[Step]:
    yield click(css("#area input"))


async def focus_text_2(page: Page, u: str) -> AsyncIterator[Step]:
    yield click(css("#area input", parse.ordinal(u)))


async def click_tab(page: Page, u: str) -> AsyncIterator[Step]:
    yield click(with_text("#area a", parse.after(u, "Click on ", ".").strip()))


async def enter_text(page: Page, u: str) -> AsyncIterator[Step]:
    yield type_(css("#area input"), parse.quoted(u))
    yield click(SUBMIT)


async def enter_text_2(page: Page, u: str) -> AsyncIterator[Step]:
    yield type_(css("#area input"), parse.cased(u, parse.quoted(u)))
    yield click(SUBMIT)


async def click_option(page: Page, u: str) -> AsyncIterator[Step]:
    yield click(labelled_input(parse.after(u, "Select ", " and click Submit")))
    yield click(SUBMIT)


async def click_checkboxes(page: Page, u: str) -> AsyncIterator[Step]:
    for label in parse.checkbox_labels(u):
        yield click(labelled_input(label))
    yield click(SUBMIT)


async def click_collapsible(page: Page, u: str) -> AsyncIterator[Step]:
    yield click(css("#area h3"))
    yield click(SUBMIT)


async def click_widget(page: Page, u: str) -> AsyncIterator[Step]:
    yield click(css(f'#area [data-type="{parse.quoted(u)}"]'))


async def enter_password(page: Page, u: str) -> AsyncIterator[Step]:
    password = parse.quoted(u)
    yield type_(css("#password"), password)
    yield type_(css("#verify"), password)
    yield click(SUBMIT)


async def login_user(page: Page, u: str) -> AsyncIterator[Step]:
    yield type_(css("#username"), parse.quoted(u, 0))
    yield type_(css("#password"), parse.quoted(u, 1))
    yield click(SUBMIT)


async def login_user_popup(page: Page, u: str) -> AsyncIterator[Step]:
    """Focusing a field may open a popup that disables the form: cancel it, then fill in
    whatever it kept from being filled."""
    wanted = {"#username": parse.quoted(u, 0), "#password": parse.quoted(u, 1)}
    for _ in range(6):
        if await read(page, "!!document.querySelector('#popup')"):
            yield click(css("#popup-cancel"))
            continue
        missing = [sel for sel, value in wanted.items()
                   if await read(page, f"{css(sel)}.value") != value]
        if not missing:
            break
        yield type_(css(missing[0]), wanted[missing[0]])
    yield click(SUBMIT)


async def read_table(page: Page, u: str) -> AsyncIterator[Step]:
    key = parse.after(u, "Enter the value of ", " into")
    rows = await read(page, "[...document.querySelectorAll('#tab tr')].map("
                            "r => [...r.querySelectorAll('td')].map(c => c.textContent))")
    value = next((r[1] for r in rows if len(r) == 2 and r[0] == key), None)
    if value is None:
        raise Unsolvable(f"no row {key!r}")
    yield type_(css("#tt"), value)
    yield click(SUBMIT)


async def find_word(page: Page, u: str) -> AsyncIterator[Step]:
    paragraph = await read(page, "document.querySelector('#area p').textContent")
    yield type_(css("#answer-input"), parse.nth_word(paragraph, parse.ordinal(u)))
    yield click(SUBMIT)


async def simple_arithmetic(page: Page, u: str) -> AsyncIterator[Step]:
    problem = await read(page, "document.querySelector('#math-problem').textContent")
    yield type_(css("#math-answer"), parse.arithmetic(problem))
    yield click(SUBMIT)


async def copy_paste(page: Page, u: str) -> AsyncIterator[Step]:
    text = await read(page, "document.querySelector('#to-copy').value")
    yield type_(css("#answer-input"), text)
    yield click(SUBMIT)


async def use_spinner(page: Page, u: str) -> AsyncIterator[Step]:
    yield type_(css("#spinner"), parse.after(u, "Select ", " with"))
    yield click(SUBMIT)


async def odd_or_even(page: Page, u: str) -> AsyncIterator[Step]:
    numbers = await read(page, "[...document.querySelectorAll('.display-number')]"
                               ".map(e => e.textContent)")
    for i, number in enumerate(numbers):
        yield click(css(f".row:nth-child({i + 1}) .{'odd' if parse.is_odd(number) else 'even'}"))
    yield click(css("#submit"))


async def multi_layouts(page: Page, u: str) -> AsyncIterator[Step]:
    """Three inputs whose labels (and order) vary by layout: an input's label is the text of
    its nearest ancestor that has any."""
    values = parse.movie_fields(u)
    labels = await read(page, """[...document.querySelectorAll('#area input')].map(i => {
        let e = i.parentElement;
        while (e && !e.textContent.trim()) e = e.parentElement;
        return e ? e.textContent.trim() : '';
    })""")
    for i, label in enumerate(labels):
        field = parse.field_of(label)
        if field is None:
            raise Unsolvable(f"an input labelled {label!r}")
        yield type_(css("#area input", i), values[field])
    yield click(css("#area button, #area .final, #area .ui-submit"))


async def search_engine(page: Page, u: str) -> AsyncIterator[Step]:
    index = parse.ordinal(u)
    yield type_(css("#search-text"), parse.quoted(u))
    yield click(css("#search"))
    if (number := parse.results_page(index)) > 1:
        yield click(with_text("#pagination a", str(number)))
    yield click(css(f'#page-content a[data-result="{index}"]'))


async def navigate_tree(page: Page, u: str) -> AsyncIterator[Step]:
    """Open each collapsed folder on the way to the first item with that name, then click
    it (the page checks the name, not which of two equal names)."""
    name = parse.quoted(u)
    depth = await read(page, f"""(() => {{
        const t = {with_text('#tree span', name)};
        let n = 0;
        for (let e = t && t.parentElement.parentElement.closest('li'); e;
             e = e.parentElement.closest('li')) n++;
        return t ? n : -1;
    }})()""")
    if depth < 0:
        raise Unsolvable(f"no item {name!r}")
    for level in range(depth, 0, -1):  # outermost folder first
        chain = "t.parentElement" + ".parentElement.closest('li')" * level
        yield click(f"(() => {{ const t = {with_text('#tree span', name)}; "
                    f"return {chain}.querySelector(':scope > span'); }})()")
    yield click(with_text("#tree span", name))


async def hidden_link(page: Page, u: str, opener: str, panel: str) -> AsyncIterator[Step]:
    """click-tab-2 / click-collapsible-2: open the tab or section that holds the link, then
    click it. `opener` selects the tab or section headers, `panel` the panels in the same
    order."""
    name = parse.quoted(u)
    i = await read(page, f"""[...document.querySelectorAll({json.dumps(panel)})].findIndex(
        p => [...p.querySelectorAll('.alink')].some(a => a.textContent.trim() ===
        {json.dumps(name)}))""")
    if i < 0:
        raise Unsolvable(f"no link {name!r}")
    yield click(css(opener, i))
    yield click(with_text(".alink", name))


async def click_tab_2(page: Page, u: str) -> AsyncIterator[Step]:
    async for step in hidden_link(page, u, "#area li a", "#area > div"):
        yield step


async def click_collapsible_2(page: Page, u: str) -> AsyncIterator[Step]:
    async for step in hidden_link(page, u, "#area h3", "#area h3 + div"):
        yield step


SOLVERS: dict[str, Solver] = {
    "click-test": click_test, "click-test-2": click_test_2, "click-button": click_button,
    "click-button-sequence": click_button_sequence, "click-dialog": click_dialog,
    "click-dialog-2": click_dialog_2, "focus-text": focus_text, "focus-text-2": focus_text_2,
    "click-tab": click_tab, "click-tab-2": click_tab_2, "enter-text": enter_text,
    "enter-text-2": enter_text_2, "enter-text-dynamic": enter_text, "enter-password":
    enter_password, "login-user": login_user, "login-user-popup": login_user_popup,
    "click-option": click_option, "click-checkboxes": click_checkboxes,
    "click-checkboxes-large": click_checkboxes, "click-collapsible": click_collapsible,
    "click-collapsible-2": click_collapsible_2, "click-widget": click_widget,
    "read-table": read_table, "find-word": find_word, "simple-arithmetic": simple_arithmetic,
    "copy-paste": copy_paste, "use-spinner": use_spinner, "odd-or-even": odd_or_even,
    "multi-layouts": multi_layouts, "multi-orderings": multi_layouts,
    "search-engine": search_engine, "navigate-tree": navigate_tree,
}
