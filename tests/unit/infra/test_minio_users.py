"""Each service's MinIO user and policy (infra/minio_users.py): only what the service does.
Against a real MinIO: tests/integration/test_minio_users.py."""

from __future__ import annotations

from fnmatch import fnmatch

import pytest

from consumers.trainer.app import checkpoint_prefix
from infra import minio_users
from infra.minio_users import ACCESS, password_variable, passwords, policy
from webgym_common.choices import ScreenshotFormat
from webgym_common.objectstore import blob_key

SHA = "ab" * 32


def allowed(service: str, action: str, key: str) -> bool:
    for st in policy("webgym", ACCESS[service])["Statement"]:
        if action in st["Action"] and any(fnmatch(f"arn:aws:s3:::webgym/{key}", r)
                                          for r in st["Resource"]):
            return True
    return False


def test_the_browser_writes_screenshots_and_nothing_else() -> None:
    for fmt in ScreenshotFormat:
        assert allowed("browser", "s3:PutObject", blob_key(SHA, fmt.mime)), fmt
    assert not allowed("browser", "s3:PutObject", blob_key(SHA, "application/json"))
    assert not allowed("browser", "s3:GetObject", blob_key(SHA, "image/jpeg"))
    assert not allowed("browser", "s3:PutObject", f"{checkpoint_prefix('m', 1)}/a.bin")
    (statement,) = policy("webgym", ACCESS["browser"])["Statement"]
    assert statement["Action"] == ["s3:PutObject"]


def test_checkpoints_are_written_by_the_trainer_alone() -> None:
    key = f"{checkpoint_prefix('webgym-policy', 3)}/adapter_model.safetensors"
    writers = {s for s in ACCESS if allowed(s, "s3:PutObject", key)}
    readers = {s for s in ACCESS if allowed(s, "s3:GetObject", key)}
    assert writers == {"trainer"} and readers == {"trainer", "model-loader"}


def test_prompts_are_written_by_the_policy_alone() -> None:
    key = blob_key(SHA, "application/json")
    assert {s for s in ACCESS if allowed(s, "s3:PutObject", key)} == {"policy"}


def test_no_policy_grants_wildcard_delete_or_admin_actions() -> None:
    for service, access in ACCESS.items():
        for st in policy("webgym", access)["Statement"]:
            assert st["Effect"] == "Allow"
            assert set(st["Action"]) <= {"s3:GetObject", "s3:PutObject", "s3:ListBucket"}, service
            assert all(r.startswith("arn:aws:s3:::webgym") for r in st["Resource"])
            if st["Action"] == ["s3:ListBucket"]:  # only under the prefixes it names
                assert st["Condition"]["StringLike"]["s3:prefix"]


def test_each_password_comes_from_its_own_variable() -> None:
    assert password_variable("model-loader") == "MINIO_MODEL_LOADER_PASSWORD"
    assert minio_users.access_key("browser") == "webgym-browser"
    env = {password_variable(s): f"secret-{s}" for s in ACCESS}
    assert passwords(env) == {s: f"secret-{s}" for s in ACCESS}
    with pytest.raises(ValueError, match="MINIO_BROWSER_PASSWORD"):
        passwords({**env, "MINIO_BROWSER_PASSWORD": "short"})
