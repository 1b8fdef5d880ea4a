"""A checkpoint's file digests: made from the files, checked against what was published."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from consumers.checkpoints import DigestMismatch, check, file_digests, mismatches, sha256_hex


def test_digests_are_the_sha256_of_each_files_bytes_by_name(tmp_path: Path) -> None:
    (tmp_path / "adapter_config.json").write_bytes(b"{}")
    big = tmp_path / "adapter_model.safetensors"
    big.write_bytes(b"w" * (3 << 20))  # read in chunks: the same digest as whole
    assert file_digests(sorted(tmp_path.iterdir())) == {
        "adapter_config.json": hashlib.sha256(b"{}").hexdigest(),
        "adapter_model.safetensors": hashlib.sha256(b"w" * (3 << 20)).hexdigest()}
    assert sha256_hex(b"{}") == hashlib.sha256(b"{}").hexdigest()


def test_every_file_must_match_a_published_digest() -> None:
    published = {"a": sha256_hex(b"1"), "b": sha256_hex(b"2")}
    assert mismatches({"a": sha256_hex(b"1")}, published) == []
    assert mismatches({"a": sha256_hex(b"1")}, {"a": published["a"].upper()}) == []
    wrong = mismatches({"a": sha256_hex(b"x"), "c": sha256_hex(b"3")}, published)
    assert wrong == [f"a has sha256 {sha256_hex(b'x')}, the trainer published {published['a']}",
                     "c has no published digest"]
    check({"b": sha256_hex(b"2")}, published, "s3://m/v1")
    with pytest.raises(DigestMismatch, match=r"s3://m/v1: a has sha256"):
        check({"a": sha256_hex(b"x")}, published, "s3://m/v1")
    with pytest.raises(DigestMismatch, match="published without file digests"):
        check({"a": sha256_hex(b"1")}, {}, "s3://m/v1")
