"""Converts one version of a CustomResourceDefinition's openAPIV3Schema into a JSON schema
that a validator can check rendered documents against (deploy/helm/schemas/, read by
deploy/helm/validate.py).

As kubeconform's openapi2jsonschema does in strict mode: an object that lists its properties
and neither says what else it allows nor preserves unknown fields gets
`additionalProperties: false` (the API server would prune an unknown field silently, which
is how a misspelt field goes unnoticed), `nullable` becomes a null type, and
`x-kubernetes-int-or-string` an integer or a string. apiVersion and kind are fixed to the
CRD's group/version and kind. The result is draft 4 (OpenAPI 3.0's boolean
exclusiveMinimum).

    python -m devtools.crd_schema CRD.yaml VERSION [--source TEXT] > out.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import yaml


def strict(node: Any) -> Any:
    """The schema `node` with the openAPIV3Schema rules above applied throughout (to its
    subschemas, never to the names of its properties)."""
    if not isinstance(node, dict):
        return node  # additionalProperties: true / false
    out = dict(node)
    for key in ("properties", "patternProperties"):
        if key in out:
            out[key] = {name: strict(sub) for name, sub in out[key].items()}
    for key in ("items", "additionalProperties", "not"):
        if key in out:
            out[key] = ([strict(sub) for sub in out[key]] if isinstance(out[key], list)
                        else strict(out[key]))
    for key in ("allOf", "anyOf", "oneOf"):
        if key in out:
            out[key] = [strict(sub) for sub in out[key]]
    if out.pop("nullable", False) and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    if out.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if ("properties" in out and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


def convert(crd: dict[str, Any], version: str, source: str = "") -> dict[str, Any]:
    spec = crd["spec"]
    [served] = [v for v in spec["versions"] if v["name"] == version]
    schema = strict(served["schema"]["openAPIV3Schema"])
    api_version = f"{spec['group']}/{version}"
    schema["properties"]["apiVersion"] = {"type": "string", "enum": [api_version]}
    schema["properties"]["kind"] = {"type": "string", "enum": [spec["names"]["kind"]]}
    schema["required"] = sorted({*schema.get("required", ()), "apiVersion", "kind",
                                 "metadata"})
    head = {"$schema": "http://json-schema.org/draft-04/schema#",
            "title": f"{spec['names']['kind']} {api_version}"}
    if source:
        head["description"] = source
    return {**head, **schema}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.crd_schema", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("crd", type=Path, help="the CustomResourceDefinition (YAML)")
    parser.add_argument("version", help="the version to convert, e.g. v1beta2")
    parser.add_argument("--source", default="", help="where the CRD came from (description)")
    args = parser.parse_args(argv)
    [crd] = [d for d in yaml.safe_load_all(args.crd.read_text()) if d]
    json.dump(convert(crd, args.version, args.source), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
