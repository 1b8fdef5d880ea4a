#!/usr/bin/env bash
# Installs everything WebGym Stream needs on a fresh Debian 12 machine, idempotently:
# system packages (Java 17 + Maven for Kafka, Chromium headless shell for browser workers),
# the project's virtualenv (.venv, pinned by requirements.lock), the Kafka jars, the
# MinIO binary, vLLM's and LLaMA-Factory's venvs and the model (all cached under
# ${WEBGYM_HOME:-~/.cache/webgym}, keyed by their pins).
set -euo pipefail
cd "$(dirname "$0")/.."

need_apt=()
command -v java >/dev/null || need_apt+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || need_apt+=(maven)
[ -x /usr/lib/chromium/chromium-headless-shell ] || need_apt+=(chromium-headless-shell)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "==> apt-get install ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null
fi
if ! command -v go >/dev/null; then
  echo "error: Go >= 1.24 is needed to build MinIO (Debian's golang is too old); install it from go.dev" >&2
  exit 1
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "==> creating .venv"
  "$PY" -m venv .venv
fi
stamp=.venv/.installed-$(cat pyproject.toml requirements.lock | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  echo "==> pip install (pinned by requirements.lock)"
  .venv/bin/pip install -q --upgrade pip
  .venv/bin/pip install -q -c requirements.lock -e ".[dev]"
  rm -f .venv/.installed-*
  touch "$stamp"
fi

echo "==> Kafka jars, MinIO binary, vLLM's and LLaMA-Factory's venvs, the model (cached; first time: minutes)"
.venv/bin/webgym infra prepare --with-vllm --with-trainer
