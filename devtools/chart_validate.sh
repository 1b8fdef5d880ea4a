#!/usr/bin/env bash
# The Helm chart (deploy/helm/webgym), validated offline: rendered by `helm template` with its
# default values and with each deploy/helm/webgym/ci/*-values.yaml (browsers scaled; external
# model servers, SASL, a second Strimzi API version), then every rendered document checked by
# deploy/helm/validate.py: built-in kinds against the Kubernetes schemas of the PyPI package
# kubernetes-validate, KafkaTopic and ScaledObject against their CRDs' own schemas
# (deploy/helm/schemas/), an unknown kind or any error fails. No cluster is involved.
#
#   bash devtools/chart_validate.sh                 # render and validate
#   bash devtools/chart_validate.sh --out DIR       # ... and keep the renderings in DIR
#   bash devtools/chart_validate.sh --print-helm    # only build helm; print its path
#   bash devtools/chart_validate.sh --kube-version 1.30.0   # another Kubernetes (1.33.0)
#
# Tools are built once and cached under ${WEBGYM_HOME:-~/.cache/webgym}/tools: helm with
# `go install` (Go >= 1.24 on PATH; a few minutes the first time), the validator in a venv
# from infra/locks/chart-validate.lock (hash-pinned, keyed by the lock's digest).
set -euo pipefail
cd "$(dirname "$0")/.."

HELM_VERSION=v3.19.0
KUBE_VERSION=1.33.0
TOOLS=${WEBGYM_HOME:-$HOME/.cache/webgym}/tools
CHART=deploy/helm/webgym
LOCKS=(infra/locks/pip.lock infra/locks/chart-validate.lock)

out="" print_helm=""
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift 2 ;;
    --print-helm) print_helm=1; shift ;;
    --kube-version) KUBE_VERSION=$2; shift 2 ;;
    *) sed -n '2,16p' "$0" >&2; exit 2 ;;
  esac
done

mkdir -p "$TOOLS"
helm=$TOOLS/helm-$HELM_VERSION/helm
if [ ! -x "$helm" ]; then
  command -v go >/dev/null || { echo "error: Go >= 1.24 is needed to build helm" >&2; exit 1; }
  echo "building helm $HELM_VERSION with go install (once)" >&2
  build=$(mktemp -d "$TOOLS/helm-build.XXXXXX")
  # Built at low priority; GOMAXPROCS and GOFLAGS from the environment apply.
  GOBIN=$build CGO_ENABLED=0 nice -n 10 go install "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >&2
  mkdir -p "$(dirname "$helm")"
  mv "$build/helm" "$helm"
  rm -rf "$build"
fi
if [ -n "$print_helm" ]; then
  echo "$helm"
  exit 0
fi

venv=$TOOLS/chart-validate-$(cat "${LOCKS[@]}" | sha256sum | cut -c1-16)
if [ ! -f "$venv/.installed" ]; then
  echo "installing the validator into $venv (once)" >&2
  rm -rf "$venv"
  "${PYTHON:-python3}" -m venv "$venv"
  for lock in "${LOCKS[@]}"; do
    "$venv/bin/python" -m pip install -q --disable-pip-version-check --require-hashes \
      --only-binary :all: -r "$lock"
  done
  touch "$venv/.installed"
fi

if [ -z "$out" ]; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
renderings=()
render() {  # name, helm arguments...
  local name=$1; shift
  "$helm" template webgym "$CHART" --namespace webgym --kube-version "$KUBE_VERSION" "$@" \
    > "$out/$name.yaml"
  renderings+=("$out/$name.yaml")
}
render default
for values in "$CHART"/ci/*-values.yaml; do
  render "$(basename "$values" -values.yaml)" --values "$values"
done
"$venv/bin/python" deploy/helm/validate.py --kubernetes-version "$KUBE_VERSION" "${renderings[@]}"
