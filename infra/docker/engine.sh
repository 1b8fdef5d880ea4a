#!/usr/bin/env bash
# A Docker engine with compose v2 and buildx on a Debian bookworm machine that has none
# (what `make compose-test` needs; a machine with Docker Desktop or docker-ce has it all).
# Debian's docker.io is the engine; bookworm packages no compose v2 or buildx plugin, so
# both come from Debian's next release (static Go binaries: they need only libc).
set -euo pipefail

POOL=http://deb.debian.org/debian/pool/main/d
COMPOSE_DEB=docker-compose/docker-compose_2.26.1-4_amd64.deb
BUILDX_DEB=docker-buildx/docker-buildx_0.13.1+ds1-3_amd64.deb
PLUGINS=${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins

step() { printf '==> %s\n' "$*"; }

if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
  step "docker.io and debootstrap from Debian"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io debootstrap >/dev/null \
    || { apt-get update -q >/dev/null && \
         DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io debootstrap >/dev/null; }
fi

plugin() {  # name, .deb path in the pool
  if docker "$1" version >/dev/null 2>&1; then return; fi
  step "docker $1 plugin from $2"
  local tmp; tmp=$(mktemp -d)
  curl -fsSL --retry 3 -m 300 -o "$tmp/p.deb" "$POOL/$2"
  dpkg-deb -x "$tmp/p.deb" "$tmp/x"
  mkdir -p "$PLUGINS"
  install -m 0755 "$tmp/x/usr/libexec/docker/cli-plugins/docker-$1" "$PLUGINS/docker-$1"
  rm -rf "$tmp"
}

if ! docker info >/dev/null 2>&1; then
  step "starting dockerd (log: /var/log/webgym-dockerd.log)"
  nohup dockerd >/var/log/webgym-dockerd.log 2>&1 &
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { tail -20 /var/log/webgym-dockerd.log; exit 1; }
fi
plugin compose "$COMPOSE_DEB"
plugin buildx "$BUILDX_DEB"
step "engine $(docker info --format '{{.ServerVersion}}'), compose $(docker compose version --short), buildx $(docker buildx version | awk '{print $2}')"
