"""Writes docs/configuration.md, every setting with its variable, default and meaning, from
the settings classes (webgym_common/config/).

A setting's meaning is its `Field(description=...)` and the comments written with it in the
class: the block of comment lines right above the field and the comment at the end of its
line. Secrets (passwords, keys) show no default. Run `python -m devtools.settings_doc`
after changing a setting and commit both; `--check` exits 1 when the committed page differs
from what the classes give (a unit test runs the same comparison).
"""

from __future__ import annotations

import ast
import inspect
import io
import json
import re
import sys
import textwrap
import tokenize
from enum import Enum
from pathlib import Path
from typing import Any, get_args

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from devtools.docs_check import OTHER_VARIABLES
from devtools.generated import write_or_check
from webgym_common.config import PROJECT_ROOT, Settings, setting_variable

TARGET = PROJECT_ROOT / "docs" / "configuration.md"
SECRET = re.compile(r"password|secret|api_key|access_key")
# Defaults that depend on the machine, written as what they are.
DEFAULT_TEXT = {
    ("infra", "home"): "`$WEBGYM_HOME`, else `~/.cache/webgym`",
    ("infra", "data_dir"): "`<home>/data`",
}

INTRO = """\
# Configuration

Every setting, its environment variable, its default and what it does. This page is
generated from the settings classes (`webgym_common/config/`) by
`python -m devtools.settings_doc`; a unit test fails when it is stale.

## How settings are read

- **Environment variables:** `WEBGYM_<SECTION>__<FIELD>`, e.g.
  `WEBGYM_KAFKA__BOOTSTRAP_SERVERS=broker:9092`. Lists, tuples and maps are JSON:
  `WEBGYM_BROWSER__URL_ALLOWLIST='["*.example.org"]'`. Booleans: `true` / `false`.
- **A YAML file** named by `WEBGYM_CONFIG`, one top-level key per section
  (`kafka:`, `policy:`, ...); environment variables win over it, and a command's own
  options (`webgym worker browser --contexts 8`) over both.
- **Unset addresses and credentials** of the embedded stack are derived: Kafka, MinIO and
  the policy's model server from `infra.host` and the ports below, MinIO's user and
  password and the local vLLM's key from `<data_dir>/secrets.json`, generated once per data
  dir (mode 0600).
- A bad value stops the process with one line naming the variable and what it allows.

## Where things are

- **The home** (`WEBGYM_INFRA__HOME`, default `$WEBGYM_HOME`, else `~/.cache/webgym`): what
  `infra/bootstrap.sh` and `webgym infra prepare` fetch and build: Kafka's jars, MinIO's
  binary, vLLM's and LLaMA-Factory's venvs, the model.
- **The data dir** (`WEBGYM_INFRA__DATA_DIR`, default `<home>/data`): everything a run
  writes. A new data dir is a new, empty log: `WEBGYM_INFRA__DATA_DIR=/tmp/curve webgym
  curve` runs on a stack of its own.

| under the data dir | what it holds |
|---|---|
| `secrets.json` | the embedded stack's generated credentials (MinIO, vLLM's key), mode 0600 |
| `kafka/` (`kafka-1/`, ... with several brokers) | the Kafka log: every event |
| `minio/` | the object store: screenshots, prompts, adapters |
| `faust/` | the faust apps' local state (rebuilt from their changelogs) |
| `logs/<name>.log`, `run/<name>.pid` | each process the stack and the pipeline started |
| `evaluations/` | the held-out report: curve.csv, per_task.csv, per_group.csv, curve.png |
| `metrics/metrics.csv` | one row per closed iteration, and its plot beside it |
| `trajectories/` | exported iterations (`webgym export`, `webgym reprocess export`) |
| `training/<run id>/` | each LoRA run: its dataset, LLaMA-Factory's output and log |
| `adapters/` | the adapters the model loader fetched for vLLM |
| `replay/` | `webgym reprocess rescore`'s agreement reports |
| `tensorboard/`, `wandb/` | the monitor's scalars for TensorBoard and Weights & Biases |
"""


def comments_of(cls: type) -> dict[str, str]:
    """{field (or enum member): the comment text written with it} from the class's source."""
    source = textwrap.dedent(inspect.getsource(cls))
    comments: dict[int, tuple[str, bool]] = {}  # line -> (text, alone on its line)
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            alone = not token.line[:token.start[1]].strip()
            comments[token.start[0]] = (token.string.lstrip("#").strip(), alone)
    found = {}
    [body] = ast.parse(source).body
    assert isinstance(body, ast.ClassDef)
    for node in body.body:
        targets = node.targets if isinstance(node, ast.Assign) else [
            node.target] if isinstance(node, ast.AnnAssign) else []
        if len(targets) != 1 or not isinstance(targets[0], ast.Name):
            continue
        above: list[str] = []
        line = node.lineno - 1
        while line in comments and comments[line][1]:
            above.insert(0, comments[line][0])
            line -= 1
        end = [comments[n][0] for n in range(node.lineno, (node.end_lineno or node.lineno) + 1)
               if n in comments and not comments[n][1]]
        found[targets[0].id] = " ".join([*above, *end])
    return found


def meaning(name: str, field: FieldInfo, comments: dict[str, str]) -> str:
    """What the setting does: its comments and description, its choices and bounds."""
    parts = [comments.get(name, ""), field.description or ""]
    text = " ".join(p.strip() for p in parts if p.strip())
    if text and not text.endswith((".", ")", "!", "?")):
        text += "."
    if re.match(r"[a-z']+\b(?![._])", text):
        text = text[0].upper() + text[1:]
    extras = []
    choices = _choices(field.annotation)
    if choices:
        extras.append("one of " + ", ".join(choices))
    bounds = _bounds(field)
    if bounds:
        extras.append(bounds)
    if extras:
        text = (text + " " if text else "") + "(" + "; ".join(extras) + ")"
    return text


def _choices(annotation: Any) -> list[str]:
    """The values of an enum the annotation names (`X`, `X | None`, `tuple[X, ...]`), each
    with its comment."""
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, Enum):
            said = comments_of(candidate)
            return [f"`{m.value}`" + (f" ({said[m.name]})" if said.get(m.name) else "")
                    for m in candidate]
    return []


def _bounds(field: FieldInfo) -> str:
    signs = ((annotated_types.Ge, "≥", "ge"), (annotated_types.Gt, ">", "gt"),
             (annotated_types.Le, "≤", "le"), (annotated_types.Lt, "<", "lt"))
    out = []
    for item in field.metadata:
        for kind, sign, attribute in signs:
            if isinstance(item, kind):
                out.append(f"{sign} {getattr(item, attribute)}")
        pattern = getattr(item, "pattern", None)
        if pattern:
            out.append(f"matches `{pattern}`")
    return ", ".join(out)


def default_text(section: str, name: str, field: FieldInfo) -> str:
    if (section, name) in DEFAULT_TEXT:
        return DEFAULT_TEXT[(section, name)]
    if SECRET.search(name):
        return "(secret)"
    if field.is_required():
        return "(required)"
    value = field.get_default(call_default_factory=True)
    if value is None:
        return "unset"
    return f"`{_plain(value)}`" if _plain(value) != "" else '`""`'


def _plain(value: Any) -> str:
    """A default as it is written in a variable (JSON for lists, tuples and maps)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, Path):
        return str(value.relative_to(PROJECT_ROOT)) if value.is_relative_to(PROJECT_ROOT) \
            else str(value)
    if isinstance(value, list | tuple | dict):
        return json.dumps(_jsonable(value))
    return str(value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {_plain(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, Path | Enum):
        return _plain(value)
    return value


def _cell(text: str) -> str:
    """Text for a table cell: pipes escaped, and `<` outside code spans (`<data_dir>` is no
    HTML tag)."""
    parts = text.replace("|", "\\|").split("`")
    return "`".join(p if i % 2 else p.replace("<", "&lt;") for i, p in enumerate(parts))


def section_model(section: str) -> type[BaseModel]:
    model = Settings.model_fields[section].annotation
    assert isinstance(model, type) and issubclass(model, BaseModel)
    return model


def render() -> str:
    """The whole page."""
    out = [INTRO]
    out.append("## Settings\n")
    out.append("One section per part of the system; a variable is "
               "`WEBGYM_<SECTION>__<FIELD>`.\n")
    for section in Settings.model_fields:
        model = section_model(section)
        doc = " ".join(inspect.cleandoc(model.__dict__.get("__doc__") or "").split())
        out.append(f"### {section}\n")
        if doc:
            out.append(doc + "\n")
        out.append("| variable | default | meaning |\n|---|---|---|")
        comments = comments_of(model)
        for name, field in model.model_fields.items():
            variable = setting_variable(section, name)
            out.append(f"| `{variable}` | {_cell(default_text(section, name, field))} | "
                       f"{_cell(meaning(name, field, comments))} |")
        out.append("")
    out.append("## Other variables\n")
    out.append("| variable | what it is |\n|---|---|")
    for variable, what in OTHER_VARIABLES.items():
        out.append(f"| `{variable}` | {_cell(what)} |")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    return write_or_check("devtools.settings_doc", __doc__, TARGET, render, argv)


if __name__ == "__main__":
    sys.exit(main())
