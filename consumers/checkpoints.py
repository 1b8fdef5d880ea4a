"""A checkpoint's file digests: what the trainer publishes in ModelVersion.file_sha256 and
what the model loader (and the next run, for its parent) checks before using the files.

Delivery semantics: none (pure functions); a file whose bytes differ from the digest the
trainer published is never used: the caller refuses the version, saying which file differs.

The object store is shared by every process and its keys are not content-addressed (a
checkpoint lives under models/<model>/v<N>/), so anyone who can write to the bucket could
replace an adapter between the trainer's upload and vLLM's load. The digest travels in
the event, on the log, not beside the files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from pathlib import Path

_CHUNK = 1 << 20


class DigestMismatch(ValueError):
    """A checkpoint file that is not what the trainer published (or has no digest)."""


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def file_sha256(path: Path) -> str:
    """A file's sha256, read in chunks (an adapter may be hundreds of MB)."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def file_digests(paths: Iterable[Path]) -> dict[str, str]:
    """File name -> sha256 of each file, as ModelVersion.file_sha256 carries them."""
    return {p.name: file_sha256(p) for p in paths}


def mismatches(got: Mapping[str, str], published: Mapping[str, str]) -> list[str]:
    """Why the files whose digests are `got` are not the ones `published` (empty: they are):
    a file without a published digest counts as differing."""
    out = []
    for name, digest in sorted(got.items()):
        want = published.get(name)
        if want is None:
            out.append(f"{name} has no published digest")
        elif want.lower() != digest:
            out.append(f"{name} has sha256 {digest}, the trainer published {want}")
    return out


def check(got: Mapping[str, str], published: Mapping[str, str], where: str) -> None:
    """DigestMismatch unless every file matches its published digest."""
    if not published:
        raise DigestMismatch(f"{where}: published without file digests, so its files cannot "
                             "be checked")
    if wrong := mismatches(got, published):
        raise DigestMismatch(f"{where}: {'; '.join(wrong)}")
