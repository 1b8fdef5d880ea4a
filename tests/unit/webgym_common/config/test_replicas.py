"""policy.replicas: the model servers; unset, the one server policy.base_url names."""

from __future__ import annotations

import pytest

from webgym_common.config import SettingsError, load_settings, settings_env


def test_one_replica_unless_set_the_base_url() -> None:
    s = load_settings(vllm={"port": 9003})
    assert s.policy.replicas == ()
    assert s.policy.replica_urls == (s.policy.base_url,) == ("http://127.0.0.1:9003/v1",)
    gpu = load_settings(policy={"base_url": "http://gpu-box:8000/v1"})
    assert gpu.policy.replica_urls == ("http://gpu-box:8000/v1",)


def test_replicas_set_from_the_environment_as_a_json_list(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WEBGYM_POLICY__REPLICAS", '["http://a:8000/v1/", "http://b:8000/v1"]')
    s = load_settings()
    assert s.policy.replica_urls == ("http://a:8000/v1", "http://b:8000/v1")
    # a child process gets them back the same way
    monkeypatch.setenv("WEBGYM_POLICY__REPLICAS", settings_env(s)["WEBGYM_POLICY__REPLICAS"])
    assert load_settings().policy.replica_urls == s.policy.replica_urls


@pytest.mark.parametrize("urls", [["http://a/v1", "http://a/v1/"], ["http://a/v1", " "]])
def test_replicas_are_distinct_and_not_empty(urls: list[str]) -> None:
    with pytest.raises(SettingsError, match="WEBGYM_POLICY__REPLICAS"):
        load_settings(policy={"replicas": urls})
