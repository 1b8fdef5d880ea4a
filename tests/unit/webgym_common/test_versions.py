"""Version tags and served names."""

from __future__ import annotations

import pytest

from webgym_common.config import SettingsError, load_settings
from webgym_common.versions import (
    DEMONSTRATION_VERSION,
    BadModelName,
    checked_model_name,
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


@pytest.mark.parametrize("name", ["webgym-policy", "webgym-policy-control", "m", "t1a2b3",
                                  "trainer-t0123456789", "Qwen2.5_VL-3B", "_x", "x" * 100])
def test_model_names_are_one_plain_path_component(name: str) -> None:
    assert checked_model_name(name) == name
    assert served_name(name, 2) == f"{name}-v2"


@pytest.mark.parametrize("name", ["", "..", ".", "../x", "a/b", "a\\b", "/abs", ".hidden",
                                  "-flag", "a b", "a\nb", "a\x00b", "x" * 101, "é"])
def test_anything_else_is_refused_before_a_path_or_served_name_is_built(name: str) -> None:
    with pytest.raises(BadModelName):
        checked_model_name(name)
    with pytest.raises(BadModelName):
        served_name(name, 1)


def test_the_trainer_setting_takes_model_names_only() -> None:
    assert load_settings(trainer={"model_name": "my-model.v2"}).trainer.model_name == "my-model.v2"
    with pytest.raises(SettingsError, match="MODEL_NAME"):
        load_settings(trainer={"model_name": "../../elsewhere"})
