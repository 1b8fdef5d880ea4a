"""Model versions: the tags actions carry and the names vLLM serves them under.

Version 0 is the base model (tag "base"); the trainer's N-th run is version N (tag "vN"),
served under the immutable name "<model>-vN" (a name is never reused: vLLM has served stale
adapters under a reused one). Tags that name no version ("demonstration",
"teacher-forcing") mark episodes no trained version produced; "demonstration" marks a
teacher-forced episode the controller requested, which is never the policy's success.

The bank-only control (`webgym curve`'s matched control) is a model line of its own,
`<model>-control`: its version N is served as `<model>-control-vN` and requested on the tag
"control-vN"; evaluations number it CONTROL_EVAL_OFFSET + N, above every version of the
policy's own line (as the scripted baseline is -1, below them).

A model name becomes object-store keys and, on the model loader's machine, a directory it
creates and removes: every name matches MODEL_NAME (letters, digits, `.`, `_`, `-`, not
starting with a dot or dash, at most 100 characters: one path component, never `..`), checked
here before any path is built from it.
"""

from __future__ import annotations

import re

BASE_VERSION = "base"
BASELINE_VERSION = "baseline"  # the scripted baseline's episodes: no model, no version
DEMONSTRATION_VERSION = "demonstration"  # the policy_version of a teacher-forced episode
_TAG = re.compile(r"v(\d+)")
CONTROL_LINE = "control"
CONTROL_EVAL_OFFSET = 1000
_CONTROL_TAG = re.compile(CONTROL_LINE + r"-v(\d+)")
MODEL_NAME = r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,99}$"
_MODEL_NAME = re.compile(MODEL_NAME)


class BadModelName(ValueError):
    """A model name that could leave its directory or key prefix."""


def checked_model_name(name: str) -> str:
    """`name`, if it is a model name (MODEL_NAME); BadModelName otherwise."""
    if not _MODEL_NAME.fullmatch(name):
        raise BadModelName(f"not a model name (letters, digits, '.', '_', '-', at most 100, "
                           f"not starting with '.' or '-'): {name[:120]!r}")
    return name


def version_tag(version: int) -> str:
    return f"v{version}" if version else BASE_VERSION


def version_number(tag: str) -> int | None:
    """"base" -> 0, "vN" -> N; None for a tag that names no trained version."""
    if tag == BASE_VERSION:
        return 0
    m = _TAG.fullmatch(tag)
    return int(m.group(1)) if m else None


def served_name(model_name: str, version: int) -> str:
    """The immutable name version `version` of `model_name` is served under (BadModelName
    for a name that is none)."""
    return f"{checked_model_name(model_name)}-v{version}"


def is_demonstration_version(tag: str) -> bool:
    """Whether an episode's policy_version marks a demonstration (teacher-forced, not the
    policy's own: metrics count it apart)."""
    return tag == DEMONSTRATION_VERSION


def control_model(model_name: str) -> str:
    """The bank-only control's model line beside `model_name`'s."""
    return f"{model_name}-{CONTROL_LINE}"


def control_tag(version: int) -> str:
    return f"{CONTROL_LINE}-v{version}"


def control_number(tag: str) -> int | None:
    """"control-vN" -> N; None for any other tag."""
    m = _CONTROL_TAG.fullmatch(tag)
    return int(m.group(1)) if m else None


def is_control_eval(version: int) -> bool:
    """An evaluation's version number that names the control's version (CONTROL_EVAL_OFFSET+N)."""
    return version > CONTROL_EVAL_OFFSET
