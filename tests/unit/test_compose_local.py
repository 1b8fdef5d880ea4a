"""Static checks of docker-compose.local.yml: it only adjusts the main file's services and
runs the images `python -m infra.images` builds (tests/compose runs it for real)."""

from __future__ import annotations

from typing import Any

import yaml

from tests.support.compose_files import ROOT, as_argv, environment
from tests.unit.test_compose import compose, services

__all__ = ["compose", "services"]  # the main file's fixtures, used here too


class _ComposeTagsLoader(yaml.SafeLoader):
    """Reads compose's merge tags (`!reset`, `!override`) as the plain value they carry."""


for _tag in ("!reset", "!override"):
    _ComposeTagsLoader.add_constructor(
        _tag, lambda loader, node: (loader.construct_sequence(node)
                                    if isinstance(node, yaml.SequenceNode) else
                                    loader.construct_mapping(node)
                                    if isinstance(node, yaml.MappingNode) else
                                    loader.construct_scalar(node)))


def local_services() -> dict[str, dict[str, Any]]:
    data = yaml.load((ROOT / "docker-compose.local.yml").read_text(), _ComposeTagsLoader)
    return data["services"]


def test_the_local_file_only_adjusts_services_of_the_main_file(
    services: dict[str, dict[str, Any]],
) -> None:
    assert set(local_services()) <= set(services)


def test_the_local_file_runs_the_images_infra_images_builds() -> None:
    from infra.images import images
    from webgym_common.config import get_settings

    built = {i.tag for i in images(get_settings(), with_trainer=True)}
    used = {svc["image"] for svc in local_services().values() if "image" in svc}
    assert used == {"webgym-kafka:local", "webgym-minio:local", "webgym-vllm-cpu:local"}
    assert used <= built


def test_the_local_broker_keeps_the_service_name_and_both_listeners() -> None:
    broker = local_services()["broker"]
    env = environment(broker)
    assert env["KAFKA_INTERNAL_ADDRESS"] == "broker:9092"
    assert env["KAFKA_EXTERNAL_ADDRESS"] == "localhost:${WEBGYM_BROKER_PORT:-19092}"
    entrypoint = (ROOT / "infra/docker/kafka/entrypoint.sh").read_text()
    assert "auto.create.topics.enable=false" in entrypoint


def test_the_local_vllm_serves_the_policy_name_with_lora_and_no_gpu(
    services: dict[str, dict[str, Any]],
) -> None:
    vllm = local_services()["vllm"]
    argv = as_argv(vllm["command"])
    assert argv[argv.index("--served-model-name") + 1] == "webgym-policy"
    assert "--enable-lora" in argv
    assert vllm["deploy"] == {}  # `!reset {}`: no device request
    # The main file's key reaches the CPU server too (its environment is merged, not reset).
    assert "VLLM_API_KEY" in environment(services["vllm"])
