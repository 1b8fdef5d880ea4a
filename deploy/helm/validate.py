"""Validates rendered Kubernetes documents offline: each built-in kind against the Kubernetes
schemas that the PyPI package kubernetes-validate bundles (strict: no unknown field), each
custom resource against its CRD's own schema (deploy/helm/schemas/), and every name against
Kubernetes' naming rules. A kind with no schema is an error, never skipped.

Runs in the validator's venv (devtools/chart_validate.sh makes it from
infra/locks/chart-validate.lock), not the project's:

    python deploy/helm/validate.py --kubernetes-version 1.33.0 RENDERED.yaml...

Prints one line per file (documents and kinds) and every error; exits 1 on any error.
"""

from __future__ import annotations

import argparse
import functools
import json
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml
from kubernetes_validate.utils import SchemaNotFoundError

SCHEMAS = Path(__file__).resolve().parent / "schemas"
# (apiVersion, kind) -> schema file, for the custom resources the chart renders.
CUSTOM = {
    ("keda.sh/v1alpha1", "ScaledObject"): "scaledobject-keda-v1alpha1.json",
    ("kafka.strimzi.io/v1beta2", "KafkaTopic"): "kafkatopic-kafka-v1beta2.json",
    ("kafka.strimzi.io/v1", "KafkaTopic"): "kafkatopic-kafka-v1.json",
}
# Names: most kinds' are DNS subdomains (RFC 1123); a Service's and a StatefulSet's are DNS
# labels (RFC 1035 for a Service: it becomes a host name, and so does each stateful pod's).
SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL_1035 = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
LABEL_KINDS = {"Service": 63, "StatefulSet": 52}  # a StatefulSet's pods add "-<ordinal>"


def name_errors(doc: dict[str, Any]) -> list[str]:
    name = str((doc.get("metadata") or {}).get("name", ""))
    kind = doc.get("kind", "")
    if kind in LABEL_KINDS:
        if not LABEL_1035.fullmatch(name) or len(name) > LABEL_KINDS[kind]:
            return [f"metadata.name {name!r} is not a DNS label of at most "
                    f"{LABEL_KINDS[kind]} characters"]
    elif not SUBDOMAIN.fullmatch(name) or len(name) > 253:
        return [f"metadata.name {name!r} is not a DNS subdomain"]
    return []


def described(e: jsonschema.ValidationError) -> str:
    """A schema error as "<path in the document>: <message>"."""
    return f"{'.'.join(str(p) for p in e.absolute_path) or '(document)'}: {e.message}"


@functools.cache
def custom_validator(file: str) -> Any:
    """The validator of a CRD's schema, read once for all the documents of its kind."""
    schema = json.loads((SCHEMAS / file).read_text())
    return jsonschema.validators.validator_for(schema)(schema)


def custom_errors(doc: dict[str, Any], file: str) -> list[str]:
    errors = custom_validator(file).iter_errors(doc)
    return [described(e) for e in sorted(errors, key=lambda e: list(e.absolute_path))]


def errors_of(doc: dict[str, Any], version: str) -> list[str]:
    key = (doc.get("apiVersion", ""), doc.get("kind", ""))
    found = name_errors(doc)
    if key in CUSTOM:
        return found + custom_errors(doc, CUSTOM[key])
    try:
        kubernetes_validate.validate(doc, version, strict=True)
    except SchemaNotFoundError:
        found.append(f"no schema for {key[1]} {key[0]}: an unknown kind")
    except jsonschema.ValidationError as e:
        found.append(described(e))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubernetes-version", default="1.33.0")
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    failed = False
    for path in args.files:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
        if not docs:
            print(f"ERROR {path}: no documents")
            failed = True
            continue
        kinds: Counter[str] = Counter()
        names: Counter[tuple[str, str]] = Counter()
        for doc in docs:
            kinds[doc.get("kind", "?")] += 1
            names[(doc.get("kind", "?"), (doc.get("metadata") or {}).get("name", "?"))] += 1
            for error in errors_of(doc, args.kubernetes_version):
                failed = True
                name = (doc.get("metadata") or {}).get("name", "?")
                print(f"ERROR {path}: {doc.get('kind', '?')}/{name}: {error}")
        for (kind, name), count in names.items():
            if count > 1:
                failed = True
                print(f"ERROR {path}: {kind}/{name} is rendered {count} times")
        summary = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
        print(f"{path}: {len(docs)} documents against Kubernetes {args.kubernetes_version} "
              f"and the CRDs' schemas ({summary})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
