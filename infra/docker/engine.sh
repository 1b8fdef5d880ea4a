#!/usr/bin/env bash
# A Docker engine with compose v2 and buildx on a Debian bookworm machine that has none
# (what `make compose-test` needs; a machine with Docker Desktop or docker-ce has it all).
# Debian's docker.io is the engine; bookworm packages no compose v2 or buildx plugin, so
# both come from Debian's next release (static Go binaries: they need only libc).
#
# They come through apt, with its signatures: a private apt configuration (nothing under
# /etc/apt changes) reads trixie's InRelease, signed by the Debian archive keys the
# debian-archive-keyring package installs, and `apt-get download` refuses a .deb whose
# sha256 differs from that signed index; the file's sha256 must also be the one pinned here.
# Only then is the plugin unpacked (as root) and installed.
set -euo pipefail

MIRROR=http://deb.debian.org/debian
SUITE=trixie
KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg
# package=version sha256 (of the .deb, as trixie's signed Packages index gives it)
COMPOSE="docker-compose=2.26.1-4 47681197cb2b1ab88206b42a1a92fc75f50d9530a6322d03494a473eed0408ea"
BUILDX="docker-buildx=0.13.1+ds1-3 fcf8c48204d1603c8f209451d7827eb91bf30759578baf7704e9e1a87e5f1d7f"
PLUGINS=${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins

step() { printf '==> %s\n' "$*"; }

APT_DIR=""
apt_next() {  # apt-get against the next release only, in a private state directory
  apt-get -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$APT_DIR/sources" \
    -o Dir::State::Lists="$APT_DIR/lists" -o Dir::Cache="$APT_DIR/cache" \
    -o APT::Architectures=amd64 -o Acquire::Languages=none "$@"
}
apt_next_init() {  # once: the private configuration and the signed index
  [ -z "$APT_DIR" ] || return 0
  APT_DIR=$(mktemp -d)
  trap 'rm -rf "$APT_DIR"' EXIT
  chmod 755 "$APT_DIR"  # apt's download sandbox (user _apt) must reach it
  mkdir -p "$APT_DIR/sources" "$APT_DIR/lists/partial" "$APT_DIR/cache/archives/partial"
  printf 'Types: deb\nURIs: %s\nSuites: %s\nComponents: main\nSigned-By: %s\n' \
    "$MIRROR" "$SUITE" "$KEYRING" > "$APT_DIR/sources/next.sources"
  apt_next update -q >/dev/null
}

if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
  step "docker.io and debootstrap from Debian"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io debootstrap >/dev/null \
    || { apt-get update -q >/dev/null && \
         DEBIAN_FRONTEND=noninteractive apt-get install -y -q docker.io debootstrap >/dev/null; }
fi

plugin() {  # name, "package=version sha256"
  if docker "$1" version >/dev/null 2>&1; then return; fi
  local pkg=${2% *} sum=${2#* } tmp deb
  step "docker $1 plugin: $pkg from Debian $SUITE (apt, signed index)"
  apt_next_init
  tmp=$(mktemp -d -p "$APT_DIR")
  chown _apt "$tmp" 2>/dev/null || true  # apt downloads as its sandbox user
  (cd "$tmp" && apt_next download -q "$pkg" >/dev/null)
  deb=$(ls "$tmp"/*.deb)
  if ! echo "$sum  $deb" | sha256sum --quiet -c - >/dev/null 2>&1; then
    echo "error: $pkg: sha256 $(sha256sum "$deb" | cut -d' ' -f1), pinned $sum" >&2
    exit 1
  fi
  dpkg-deb -x "$deb" "$tmp/x"
  mkdir -p "$PLUGINS"
  install -m 0755 "$tmp/x/usr/libexec/docker/cli-plugins/docker-$1" "$PLUGINS/docker-$1"
}

if ! docker info >/dev/null 2>&1; then
  step "starting dockerd (log: /var/log/webgym-dockerd.log)"
  nohup dockerd >/var/log/webgym-dockerd.log 2>&1 &
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { tail -20 /var/log/webgym-dockerd.log; exit 1; }
fi
plugin compose "$COMPOSE"
plugin buildx "$BUILDX"
step "engine $(docker info --format '{{.ServerVersion}}'), compose $(docker compose version --short), buildx $(docker buildx version | awk '{print $2}')"
