"""Which poison still needs its letter (LetterIndex, over a DLQ already read)."""

from __future__ import annotations

from webgym_common.codec import Codec
from webgym_common.config import load_settings
from webgym_common.stream.deadletters import LetterIndex


def index(group: str | None, letters: dict) -> LetterIndex:
    i = LetterIndex(load_settings(), Codec(), group)
    i.letters = letters  # as read from the DLQ
    return i


async def test_a_group_writes_one_letter_per_record_whoever_else_wrote_one() -> None:
    g = index("g", {("t.actions", 0, 5): {"g"}, ("t.actions", 0, 6): {"other", None}})
    assert not await g.first("t.actions", 0, 5)  # its own letter, before a restart
    assert await g.first("t.actions", 0, 6)  # other readers' letters are theirs
    assert await g.first("t.actions", 0, 7)  # new poison
    assert not await g.first("t.actions", 0, 7)  # and only once
    assert not await g.first("t.actions", 0, 6)


async def test_a_reader_without_a_group_writes_none_when_any_reader_wrote_one() -> None:
    r = index(None, {("t.tasks", 1, 0): {"g"}})
    assert not await r.first("t.tasks", 1, 0)
    assert await r.first("t.tasks", 1, 1)
    assert not await r.first("t.tasks", 1, 1)  # read again at its next rebuild: nothing
