"""One MinIO user per service, each with a policy that allows what that service does to the
bucket and nothing else, made with MinIO's admin API by the root user (`webgym infra
minio-users`, compose's one-shot `minio-users` service). No pipeline service holds the root
credential: a compromised browser worker can write screenshots, not read prompts, delete
checkpoints or administer the store.

What each service does (keys: webgym_common.objectstore.blob_key for content-addressed
blobs, consumers.trainer.app.checkpoint_prefix for adapters):

- browser: writes screenshots (images under sha256/);
- policy: reads screenshots (and presigns them for the model server), writes prompts (JSON);
- evaluator, replay, monitor: read blobs;
- trainer: reads blobs and checkpoints, lists and writes checkpoints (models/);
- model-loader: reads checkpoints.

Each user's password is the environment variable MINIO_<SERVICE>_PASSWORD (compose passes
the same variable to that service as WEBGYM_S3__SECRET_KEY); its access key is
webgym-<service>.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from minio import Minio
from minio.credentials import StaticProvider
from minio.minioadmin import MinioAdmin

from webgym_common.config import S3Settings
from webgym_common.objectstore import EXTENSIONS

BLOBS = "sha256/*"
# The trainer's checkpoint keys: models/<model>/v<N>/<file> (a unit test checks the prefix).
CHECKPOINTS = "models/*"
SCREENSHOTS = tuple(f"sha256/*.{ext}" for mime, ext in sorted(EXTENSIONS.items())
                    if mime.startswith("image/"))
PROMPTS = ("sha256/*.json",)


@dataclass(frozen=True)
class Access:
    reads: tuple[str, ...] = ()  # key patterns it may get (and stat)
    writes: tuple[str, ...] = ()  # key patterns it may put
    lists: tuple[str, ...] = ()  # key prefixes it may list


ACCESS: dict[str, Access] = {
    "browser": Access(writes=SCREENSHOTS),
    "policy": Access(reads=(BLOBS,), writes=PROMPTS),
    "evaluator": Access(reads=(BLOBS,)),
    "replay": Access(reads=(BLOBS,)),
    "monitor": Access(reads=(BLOBS,)),
    "trainer": Access(reads=(BLOBS, CHECKPOINTS), writes=(CHECKPOINTS,),
                      lists=(CHECKPOINTS,)),
    "model-loader": Access(reads=(CHECKPOINTS,)),
}


def access_key(service: str) -> str:
    return f"webgym-{service}"


def password_variable(service: str) -> str:
    return f"MINIO_{service.upper().replace('-', '_')}_PASSWORD"


def policy(bucket: str, access: Access) -> dict[str, Any]:
    """The IAM policy document of one service."""
    def keys(patterns: tuple[str, ...]) -> list[str]:
        return [f"arn:aws:s3:::{bucket}/{p}" for p in patterns]

    statements: list[dict[str, Any]] = []
    if access.reads:
        statements.append({"Effect": "Allow", "Action": ["s3:GetObject"],
                           "Resource": keys(access.reads)})
    if access.writes:
        statements.append({"Effect": "Allow", "Action": ["s3:PutObject"],
                           "Resource": keys(access.writes)})
    if access.lists:
        statements.append({"Effect": "Allow", "Action": ["s3:ListBucket"],
                           "Resource": [f"arn:aws:s3:::{bucket}"],
                           "Condition": {"StringLike": {"s3:prefix": list(access.lists)}}})
    return {"Version": "2012-10-17", "Statement": statements}


def passwords(environ: Mapping[str, str]) -> dict[str, str]:
    """Each service's password from the environment; a missing or short one is an error."""
    missing = [password_variable(s) for s in ACCESS
               if len(environ.get(password_variable(s), "")) < 8]
    if missing:
        raise ValueError(f"set {', '.join(missing)} (8 characters at least): each service's "
                         "MinIO password, the same the service is given")
    return {s: environ[password_variable(s)] for s in ACCESS}


def ensure(root: S3Settings, secrets: Mapping[str, str]) -> list[str]:
    """The bucket, then each service's policy and user (again: updated in place)."""
    client = Minio(root.endpoint, access_key=root.access_key, secret_key=root.secret_key,
                   secure=root.secure, region=root.region)
    if not client.bucket_exists(root.bucket):
        client.make_bucket(root.bucket)
    admin = MinioAdmin(endpoint=root.endpoint, secure=root.secure, region=root.region,
                       credentials=StaticProvider(root.access_key, root.secret_key))
    made = []
    for service, access in ACCESS.items():
        name = access_key(service)
        admin.policy_add(name, policy=policy(root.bucket, access))
        admin.user_add(name, secrets[service])
        admin.policy_set(name, user=name)  # the user's only policy
        made.append(f"{name}: {json.dumps(policy(root.bucket, access)['Statement'])}")
    return made
