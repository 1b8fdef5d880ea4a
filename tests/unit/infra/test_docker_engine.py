"""infra/docker/engine.sh takes the compose and buildx plugins from Debian through apt and its
signatures (the signed trixie index, then the pinned sha256 of each .deb), never a bare
download: static checks of the script (its download and the refusals were run by hand: a
keyring without trixie's key fails `apt-get update`, a wrong pinned sha256 fails the step)."""

from __future__ import annotations

import re

from infra.pinned import ROOT

ENGINE = ROOT / "infra" / "docker" / "engine.sh"


def test_no_package_is_fetched_around_apt() -> None:
    text = ENGINE.read_text()
    for bare in ("curl", "wget", "/pool/main", ".deb\""):
        assert bare not in text, bare
    for insecure in ("--allow-unauthenticated", "trusted=yes", "AllowInsecureRepositories",
                     "AllowUnauthenticated", "APT::Sandbox::User=root"):
        assert insecure not in text, insecure


def test_the_plugins_come_from_the_signed_index_and_their_pinned_sha256() -> None:
    text = ENGINE.read_text()
    assert "Signed-By: %s" in text
    assert "KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg" in text
    assert "apt_next download" in text and 'sha256sum --quiet -c -' in text
    pins = dict(re.findall(r'^(COMPOSE|BUILDX)="(\S+=\S+ [0-9a-f]{64})"$', text, re.M))
    assert set(pins) == {"COMPOSE", "BUILDX"}
    assert 'plugin compose "$COMPOSE"' in text and 'plugin buildx "$BUILDX"' in text
    # dpkg-deb unpacks only what passed the check: it comes after it.
    assert text.index("sha256sum --quiet -c -") < text.index("dpkg-deb -x")
