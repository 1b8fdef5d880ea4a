"""What `webgym infra up` refuses to start: the embedded stack reachable from other machines
with credentials nobody chose, and an embedded Kafka asked for a security it cannot speak.

Every component binds `infra.host`. On loopback (the default) only this machine reaches it,
and the credentials generated for the data dir (webgym_common.config.stack_secrets) guard
MinIO and vLLM against its other users. Any other host publishes them to the network, and
that must be a deliberate step: MinIO's user and password and vLLM's key set explicitly
(WEBGYM_S3__ACCESS_KEY, WEBGYM_S3__SECRET_KEY, WEBGYM_VLLM__API_KEY), so the operator knows
them and hands them to the remote workers, and neither secret one of the well-known
defaults nor short. The embedded Kafka and the sandbox web have no authentication at all;
the refusal says so, because no setting here can fix that. The decisions are pure
functions of the settings; infra.stack raises them as one InfraError before anything starts.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from webgym_common.choices import KafkaSecurityProtocol
from webgym_common.config import Settings
from webgym_common.config.stack_secrets import StackSecrets

# Fixed defaults of earlier versions, MinIO's own and the OpenAI client's placeholder:
# anybody can guess them.
WELL_KNOWN = frozenset({"webgym", "webgym-secret", "minioadmin", "EMPTY", "changeme",
                        "password", "secret"})
MIN_SECRET_CHARS = 16


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps a port to this machine (127.0.0.0/8, ::1, localhost)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name other than localhost may resolve to anything


def weak(secret: str) -> bool:
    return secret in WELL_KNOWN or len(secret) < MIN_SECRET_CHARS


def credential_problems(settings: Settings, generated: StackSecrets | None,
                        components: Iterable[str]) -> list[str]:
    """Why the credentials of `components` may not be published on a non-loopback
    infra.host; [] when the host is loopback or they are fit for it."""
    if is_loopback(settings.infra.host):
        return []
    names = set(components)
    made = generated.model_dump() if generated else {}
    checks: list[tuple[str, str, bool, str | None]] = []
    if "minio" in names:
        checks += [("WEBGYM_S3__ACCESS_KEY", settings.s3.access_key, False,
                    made.get("minio_access_key")),
                   ("WEBGYM_S3__SECRET_KEY", settings.s3.secret_key, True,
                    made.get("minio_secret_key"))]
    if "vllm" in names:
        checks.append(("WEBGYM_VLLM__API_KEY", settings.vllm.api_key or "", True,
                       made.get("vllm_api_key")))
    return [problem for check in checks if (problem := _problem(*check))]


def _problem(name: str, value: str, secret: bool, generated: str | None) -> str:
    if not value or value == generated:
        return f"{name} is not set explicitly"
    if secret and weak(value):
        return (f"{name} is a well-known default or shorter than {MIN_SECRET_CHARS} "
                "characters")
    return ""


def refusal(settings: Settings, problems: list[str]) -> str:
    """The one error line for a refused non-loopback host."""
    return (
        f"WEBGYM_INFRA__HOST={settings.infra.host} would publish the embedded stack to the "
        f"network, but {'; '.join(problems)}. Set WEBGYM_S3__ACCESS_KEY, "
        f"WEBGYM_S3__SECRET_KEY and WEBGYM_VLLM__API_KEY (secrets of {MIN_SECRET_CHARS}+ "
        "random characters, e.g. `openssl rand -hex 16`) and give them to the remote "
        "workers, or keep WEBGYM_INFRA__HOST=127.0.0.1. The embedded Kafka and the sandbox "
        "web have no authentication at all: expose them only to a private network "
        "(docs/operations.md)")


def kafka_protocol_problem(settings: Settings, components: Iterable[str]) -> str | None:
    """The embedded Kafka speaks PLAINTEXT only: clients set for another protocol would
    never reach it."""
    k = settings.kafka
    starts_kafka = any(name.startswith("kafka") for name in components)
    if not starts_kafka or k.security_protocol == KafkaSecurityProtocol.PLAINTEXT:
        return None
    if k.bootstrap_servers != settings.infra.kafka_bootstrap:
        return None  # the clients use another cluster; the embedded one is beside the point
    return (f"WEBGYM_KAFKA__SECURITY_PROTOCOL={k.security_protocol}: the embedded Kafka "
            "speaks PLAINTEXT only (on loopback); TLS and SASL are for an external cluster "
            "(WEBGYM_KAFKA__BOOTSTRAP_SERVERS)")
