"""Version tags and served names."""

from __future__ import annotations

import pytest

from webgym_common.versions import (
    DEMONSTRATION_VERSION,
    is_demonstration_version,
    served_name,
    version_number,
    version_tag,
)


@pytest.mark.parametrize(("tag", "number"), [
    ("base", 0), ("v0", 0), ("v1", 1), ("v12", 12), ("demonstration", None),
    ("teacher-forcing", None), ("m:v2", None), ("v", None), ("v1x", None)])
def test_version_numbers_of_tags(tag: str, number: int | None) -> None:
    assert version_number(tag) == number


def test_tags_and_served_names_round_trip() -> None:
    assert [version_tag(n) for n in (0, 1, 7)] == ["base", "v1", "v7"]
    assert all(version_number(version_tag(n)) == n for n in range(20))
    assert served_name("webgym-policy", 3) == "webgym-policy-v3"


def test_only_the_demonstration_tag_marks_a_demonstration() -> None:
    assert is_demonstration_version(DEMONSTRATION_VERSION)
    assert not any(map(is_demonstration_version, ("base", "v1", "teacher-forcing", "")))
