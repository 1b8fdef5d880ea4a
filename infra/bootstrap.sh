#!/usr/bin/env bash
# Installs everything WebGym Stream needs on a fresh Debian 12 machine, idempotently:
# system packages (Java 17 + Maven for Kafka, Chromium headless shell for browser workers),
# the project's virtualenv (.venv, from the hash-pinned requirements.lock and
# requirements-dev.lock), the Kafka jars, the MinIO binary, vLLM's and LLaMA-Factory's venvs
# (from their hash-pinned locks in infra/locks) and the model (all cached under
# ${WEBGYM_HOME:-~/.cache/webgym}, keyed by their pins), and the unprivileged user a root
# pipeline runs Chromium as (its sandbox refuses root).
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step says when it starts (time since the install began) and how long it took.
step_start=$SECONDS
step() {
  done_step
  step_start=$SECONDS
  printf '==> [%dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"
}
done_step() {
  if [ -n "${step_name:-}" ]; then printf '    done in %ds\n' $((SECONDS - step_start)); fi
  step_name=1
}
trap 'done_step; printf "==> installed in %dm%02ds\n" $((SECONDS / 60)) $((SECONDS % 60))' EXIT

need_apt=()
command -v java >/dev/null || need_apt+=(openjdk-17-jre-headless)
command -v mvn >/dev/null || need_apt+=(maven)
[ -x /usr/lib/chromium/chromium-headless-shell ] || need_apt+=(chromium-headless-shell)
if [ ${#need_apt[@]} -gt 0 ]; then
  step "apt-get install ${need_apt[*]}"
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
  step "creating .venv"
  "$PY" -m venv .venv
fi
LOCKS=(infra/locks/pip.lock requirements.lock requirements-dev.lock)
stamp=.venv/.installed-$(cat pyproject.toml "${LOCKS[@]}" | sha256sum | cut -c1-16)
if [ ! -f "$stamp" ]; then
  # Every file is checked against the lock's sha256 and only wheels are taken (an sdist's
  # build would fetch its build requirements unchecked); pip itself comes from its lock first.
  step "pip install (hash-pinned: ${LOCKS[*]})"
  pip=(.venv/bin/python -m pip install --require-hashes --only-binary :all:)
  "${pip[@]}" -q -r infra/locks/pip.lock
  "${pip[@]}" --progress-bar on -r requirements.lock -r requirements-dev.lock \
    | sed '/^Requirement already satisfied/d'
  # The project itself: its dependencies are the locks' (--no-deps), and it builds with the
  # locked setuptools and wheel (--no-build-isolation fetches nothing).
  .venv/bin/python -m pip install -q --no-deps --no-build-isolation -e .
  .venv/bin/python -m pip check
  rm -f .venv/.installed-*
  touch "$stamp"
fi

step "Kafka jars, MinIO binary, vLLM's and LLaMA-Factory's venvs, the model (cached; first time: minutes)"
.venv/bin/webgym infra prepare --with-vllm --with-trainer
