"""Which trained version the policy asks for: the newest served, never older than requested."""

from __future__ import annotations

from typing import Any, cast

from processors.policy.models import ServedModels
from tests.factories import sample_event
from webgym_common.config import load_settings
from webgym_common.events import ModelServed
from webgym_common.versions import served_name


class RecordingPolicy:
    def __init__(self) -> None:
        self.used: list[tuple[str, str]] = []

    def use_model(self, model: str, version: str) -> None:
        self.used.append((model, version))


def served(model: str, version: int) -> ModelServed:
    event = sample_event("ModelServed")
    assert isinstance(event, ModelServed)
    return event.model_copy(update={"model_name": model, "version": version,
                                    "served_name": served_name(model, version)})


def test_switches_only_forward_and_only_for_its_model() -> None:
    policy = RecordingPolicy()
    models = ServedModels(load_settings(trainer={"model_name": "m"}), cast(Any, policy))
    for event in (served("m", 2), served("m", 1), served("other", 5), served("m", 2),
                  served("m", 3)):
        models.seen(event)
    assert policy.used == [("m-v2", "v2"), ("m-v3", "v3")]
    assert models.using == 3


def test_an_episode_requested_on_a_newer_version_pins_it_before_the_announcement() -> None:
    policy = RecordingPolicy()
    models = ServedModels(load_settings(trainer={"model_name": "m"}), cast(Any, policy))
    models.pin("v2")  # the controller saw v2 served before this process read the news
    models.pin("base")
    models.pin("demonstration")
    models.seen(served("m", 2))  # the announcement, late: nothing changes
    models.pin("v1")  # an older request never moves it back
    assert policy.used == [("m-v2", "v2")]
