"""The embedded stack's generated secrets (webgym_common/config/stack_secrets.py): made once
per data dir, 0600, the same for every process, refused when others may read them."""

from __future__ import annotations

import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from webgym_common.config import load_settings
from webgym_common.config.stack_secrets import (
    SecretsFileError,
    ensure,
    generate,
    read,
    secrets_file,
)


def test_made_once_readable_by_its_owner_only(tmp_path: Path) -> None:
    data_dir = tmp_path / "fresh" / "data"
    assert read(data_dir) is None
    made = ensure(data_dir)
    assert stat.S_IMODE(secrets_file(data_dir).stat().st_mode) == 0o600
    assert ensure(data_dir) == read(data_dir) == made  # never changed once made
    assert len(made.minio_secret_key) >= 32 and len(made.vllm_api_key) >= 32
    assert made.minio_secret_key != made.vllm_api_key != generate().vllm_api_key
    assert list(data_dir.iterdir()) == [secrets_file(data_dir)]  # no temporary file left


def test_concurrent_first_loads_agree_on_one_set(tmp_path: Path) -> None:
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda _: ensure(tmp_path), range(16)))
    assert len(set(results)) == 1 and read(tmp_path) == results[0]


def test_a_file_others_may_read_is_refused_with_the_fix(tmp_path: Path) -> None:
    ensure(tmp_path)
    secrets_file(tmp_path).chmod(0o644)
    with pytest.raises(SecretsFileError, match="chmod 600"):
        read(tmp_path)
    # Loading the settings says the same, as itself (not as a validation error that would
    # print the settings it was given).
    with pytest.raises(SecretsFileError, match="chmod 600"):
        load_settings(infra={"data_dir": tmp_path})


def test_a_file_not_ours_is_refused(tmp_path: Path) -> None:
    path = secrets_file(tmp_path)
    path.write_text('{"minio_access_key": "webgym"}')
    path.chmod(0o600)
    with pytest.raises(SecretsFileError, match="not a secrets file"):
        ensure(tmp_path)
