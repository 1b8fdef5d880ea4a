"""The embedded stack's secrets: MinIO's root user and password and the local vLLM's API key.

Made once per data dir and never changed: the first process that loads the settings for a
data dir while a credential of the embedded stack is unset (in practice `webgym infra up` or
`webgym run`) generates them and writes <data_dir>/secrets.json, mode 0600. Every later
process of that stack reads the same file, so MinIO, vLLM and their clients agree without
any credential on a command line. Concurrent first loads agree too: the file is written
under a temporary name and linked into place, which fails if another process got there
first, and the loser reads the winner's file. Settings given explicitly (WEBGYM_S3__*,
WEBGYM_VLLM__API_KEY, YAML, arguments) win over the file.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

FILE_NAME = "secrets.json"


class SecretsFileError(RuntimeError):
    """The secrets file cannot be read or written, or others may read it.

    Not a ValueError: raised while the settings are validated, it must reach the user as
    itself (pydantic would turn a ValueError into a validation error that prints its input).
    """


class StackSecrets(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    minio_access_key: str = Field(min_length=3)
    minio_secret_key: str = Field(min_length=8)  # MinIO refuses shorter root passwords
    vllm_api_key: str = Field(min_length=16)


def secrets_file(data_dir: Path) -> Path:
    return Path(data_dir) / FILE_NAME


def generate() -> StackSecrets:
    """Fresh random credentials (256 bits for each secret)."""
    return StackSecrets(
        minio_access_key=f"webgym-{secrets.token_hex(4)}",
        minio_secret_key=secrets.token_urlsafe(32),
        vllm_api_key=secrets.token_urlsafe(32),
    )


def too_open(mode: int) -> bool:
    """Whether a file with this st_mode may be read or written by its group or others."""
    return bool(stat.S_IMODE(mode) & 0o077)


def read(data_dir: Path) -> StackSecrets | None:
    """The data dir's secrets; None when it has none yet."""
    path = secrets_file(data_dir)
    try:
        mode = path.stat().st_mode
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as err:
        raise SecretsFileError(f"cannot read the stack's secrets {path}: {err}") from None
    if too_open(mode):
        raise SecretsFileError(
            f"{path} holds the stack's credentials but other users may read it "
            f"(mode {stat.S_IMODE(mode):o}): chmod 600 {path}")
    try:
        return StackSecrets.model_validate_json(text)
    except ValidationError:
        raise SecretsFileError(
            f"{path} is not a secrets file written by webgym; move it away and "
            "`webgym infra down` then `webgym infra up` to generate new ones") from None


def ensure(data_dir: Path) -> StackSecrets:
    """The data dir's secrets, generated and written (0600) if it has none."""
    found = read(data_dir)
    if found is not None:
        return found
    path = secrets_file(data_dir)
    tmp = path.with_name(f".{FILE_NAME}.{os.getpid()}.{secrets.token_hex(4)}")
    made = generate()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Created 0600 from the start: the secrets are never readable by others, not even
        # for the moment between creating and a chmod.
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(made.model_dump_json(indent=2) + "\n")
            out.flush()
            os.fsync(out.fileno())
        try:
            os.link(tmp, path)  # atomic, and fails if another process wrote it first
        except FileExistsError:
            pass
    except OSError as err:
        raise SecretsFileError(f"cannot write the stack's secrets {path}: {err}") from None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    ours = read(data_dir)
    if ours is None:  # removed between the link and the read: nothing sensible to share
        raise SecretsFileError(f"{path} vanished right after it was written")
    return ours
