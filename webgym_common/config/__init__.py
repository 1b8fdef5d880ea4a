"""The one typed settings object.

Values come from (highest first): constructor arguments, environment variables
(`WEBGYM_<SECTION>__<FIELD>`, e.g. `WEBGYM_KAFKA__BOOTSTRAP_SERVERS`), the YAML
file named by `WEBGYM_CONFIG` (sections as top-level keys), then the defaults here.
Sections merge field by field: `load_settings(policy={"kind": "teacher"})` keeps
every other WEBGYM_POLICY__* variable. Unset, the embedded stack's addresses are derived
from `infra`, and its credentials (MinIO's user and password, the local vLLM's key) are
the ones generated once for the data dir (stack_secrets: <data_dir>/secrets.json, 0600).

Settings are frozen: a change is a new object (`load_settings(**overrides)` or
`model_copy(update=...)`), never an assignment into the cached one.
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    YamlConfigSettingsSource,
)

from webgym_common.config import stack_secrets
from webgym_common.config.pipeline import (
    BrowserSettings,
    EvaluatorSettings,
    ModelLoaderSettings,
    PolicySettings,
    ReplaySettings,
    RolloutSettings,
    TrainerSettings,
)
from webgym_common.config.stack import (
    DEFAULT_HOME,
    PROJECT_ROOT,
    InfraSettings,
    KafkaSettings,
    S3Settings,
    VllmSettings,
)
from webgym_common.config.tools import EnvServerSettings, MonitorSettings

__all__ = [
    "DEFAULT_HOME", "PROJECT_ROOT", "BrowserSettings", "EnvServerSettings",
    "EvaluatorSettings", "InfraSettings", "KafkaSettings", "ModelLoaderSettings", "MonitorSettings",
    "PolicySettings", "ReplaySettings", "RolloutSettings", "S3Settings", "Settings",
    "SettingsError", "TrainerSettings", "VllmSettings", "get_settings", "load_settings",
    "setting_variable", "settings_env",
]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(
        env_prefix="WEBGYM_",
        env_nested_delimiter="__",
        extra="forbid",
        validate_default=True,
        frozen=True,
    )

    kafka: KafkaSettings = Field(default_factory=KafkaSettings)
    s3: S3Settings = Field(default_factory=S3Settings)
    infra: InfraSettings = Field(default_factory=InfraSettings)
    browser: BrowserSettings = Field(default_factory=BrowserSettings)
    policy: PolicySettings = Field(default_factory=PolicySettings)
    evaluator: EvaluatorSettings = Field(default_factory=EvaluatorSettings)
    vllm: VllmSettings = Field(default_factory=VllmSettings)
    rollout: RolloutSettings = Field(default_factory=RolloutSettings)
    replay: ReplaySettings = Field(default_factory=ReplaySettings)
    trainer: TrainerSettings = Field(default_factory=TrainerSettings)
    model_loader: ModelLoaderSettings = Field(default_factory=ModelLoaderSettings)
    monitor: MonitorSettings = Field(default_factory=MonitorSettings)
    envserver: EnvServerSettings = Field(default_factory=EnvServerSettings)

    @model_validator(mode="before")
    @classmethod
    def _default_to_embedded_stack(cls, data: Any) -> Any:
        # The embedded stack's ports are the one place these addresses are written. Filled
        # into the input, before validation, because the validated model is frozen.
        if not isinstance(data, dict):
            return data
        try:
            infra = InfraSettings.model_validate(data.get("infra") or {})
            vllm = VllmSettings.model_validate(data.get("vllm") or {})
        except ValidationError:
            return data  # validation proper reports it, with the setting's full name
        data = dict(data)
        local_s3 = f"{infra.host}:{infra.minio_port}"
        local_vllm = f"http://{infra.host}:{vllm.port}/v1"
        for section, name, value in (
            ("kafka", "bootstrap_servers", infra.kafka_bootstrap),
            ("s3", "endpoint", local_s3),
            ("policy", "base_url", local_vllm),
        ):
            data[section] = _with_default(data.get(section), name, value)
        data = _with_stack_secrets(data, infra, local_s3, local_vllm)
        # The local vLLM's key is the key its clients (policy, LLM judge, model loader) send,
        # unless they were given one of their own; never sent to another server.
        key = _get(data.get("vllm"), "api_key")
        policy_url = _get(data["policy"], "base_url")
        judge_url = _get(data.get("evaluator"), "base_url") or policy_url
        for section, url in (("policy", policy_url), ("evaluator", judge_url)):
            if key and url == local_vllm:
                data[section] = _with_key(data.get(section), key)
        # Unset: as many replicas as the embedded stack has brokers, up to 3.
        if isinstance(data.get("kafka"), dict) and "replication_factor" not in data["kafka"]:
            data["kafka"] = {**data["kafka"], "replication_factor": min(infra.brokers, 3)}
        return data

    @property
    def sandbox_url(self) -> str:
        return f"http://{self.infra.sandbox_host or self.infra.host}:{self.infra.sandbox_port}"

    def resolve_url(self, url: str) -> str:
        """Task URLs may say `{sandbox}` for wherever the sandbox web is served."""
        return url.replace("{sandbox}", self.sandbox_url)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        yaml_path = os.environ.get("WEBGYM_CONFIG")
        if yaml_path:
            sources.append(YamlConfigSettingsSource(settings_cls, yaml_file=yaml_path))
        return tuple(sources)


def _with_default(section: Any, name: str, value: str) -> Any:
    """`section` (a dict, a model or None) with `name` set to `value` where it is empty."""
    if isinstance(section, BaseModel):
        return section if getattr(section, name) else section.model_copy(update={name: value})
    if section is None:
        return {name: value}
    if isinstance(section, dict) and not section.get(name):
        return {**section, name: value}
    return section


def _get(section: Any, name: str) -> Any:
    """A field of `section` (a dict, a model or None); None where it has none."""
    if isinstance(section, BaseModel):
        return getattr(section, name, None)
    return section.get(name) if isinstance(section, dict) else None


def _with_stack_secrets(data: dict[str, Any], infra: InfraSettings, local_s3: str,
                        local_vllm: str) -> dict[str, Any]:
    """`data` with the embedded stack's generated credentials where the embedded MinIO or
    vLLM is used and its credentials are unset (stack_secrets: made at the first load)."""
    s3 = data.get("s3")
    minio = _get(s3, "endpoint") == local_s3 and not (
        _get(s3, "access_key") and _get(s3, "secret_key"))
    vllm = not _get(data.get("vllm"), "api_key") and _get(data["policy"], "base_url") == local_vllm
    if not (minio or vllm):
        return data
    made = stack_secrets.ensure(infra.data_dir)
    data = dict(data)
    if minio:
        for name, value in (("access_key", made.minio_access_key),
                            ("secret_key", made.minio_secret_key)):
            data["s3"] = _with_default(data.get("s3"), name, value)
    if vllm:
        data["vllm"] = _with_default(data.get("vllm"), "api_key", made.vllm_api_key)
    return data


def _with_key(section: Any, key: str) -> Any:
    """`section` with `api_key` set to `key` where it is left at the no-key default."""
    no_key = ("", "EMPTY", None)
    if isinstance(section, BaseModel):
        keyless = getattr(section, "api_key", None) in no_key
        return section.model_copy(update={"api_key": key}) if keyless else section
    if section is None:
        return {"api_key": key}
    if isinstance(section, dict) and section.get("api_key") in no_key:
        return {**section, "api_key": key}
    return section


def setting_variable(section: str, field: str) -> str:
    """The environment variable of a setting: WEBGYM_<SECTION>__<FIELD> (Settings' env_prefix
    and env_nested_delimiter)."""
    return f"WEBGYM_{section.upper()}__{field.upper()}"


def settings_env(settings: Settings) -> dict[str, str]:
    """The same settings as WEBGYM_* environment variables, for a child process."""
    env = {}
    for section in Settings.model_fields:
        for name, value in getattr(settings, section).model_dump(mode="json").items():
            if value is None:
                continue
            text = json.dumps(value) if isinstance(value, list | dict) else str(value)
            env[setting_variable(section, name)] = text
    return env


class SettingsError(ValueError):
    """A setting has a bad value; the message names it and what is allowed."""


def describe_validation_error(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        name = "WEBGYM_" + "__".join(str(p).upper() for p in e["loc"])
        lines.append(f"setting {name} = {e.get('input')!r}: {e['msg']}")
    return "; ".join(lines)


def load_settings(**overrides: Any) -> Settings:
    """Build settings, turning pydantic's error into one line per bad setting."""
    yaml_path = os.environ.get("WEBGYM_CONFIG")
    if yaml_path and not Path(yaml_path).is_file():
        raise SettingsError(f"setting WEBGYM_CONFIG = {yaml_path!r}: no such YAML file")
    try:
        return Settings(**overrides)
    except ValidationError as err:
        raise SettingsError(describe_validation_error(err)) from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The settings from the environment, loaded once (frozen: share it freely)."""
    return load_settings()
