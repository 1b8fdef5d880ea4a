"""No phoning home: the environment under which every process the project launches runs, so
that no library or server reports usage to its vendor.

Delivery semantics: none (a constant and a pure function). The variables are the one place
this is written: the launchers merge them last into the environment they build
(infra/vllm_server.py, the trainer's LLaMA-Factory run, infra/minio_server.py, the embedded
Kafka), the Dockerfile's stages set them as ENV and docker-compose.yml gives them to every
service it configures (tests/unit/webgym_common/test_telemetry.py compares all of them with
this table).

What reports by default, and what stops it:
- vLLM sends a usage report (hardware, model architecture, settings) at start unless
  VLLM_NO_USAGE_STATS / VLLM_DO_NOT_TRACK / DO_NOT_TRACK is set; Ray (which vLLM may start)
  the same unless RAY_USAGE_STATS_ENABLED=0.
- huggingface_hub (transformers, datasets, peft in LLaMA-Factory) sends telemetry with its
  requests unless HF_HUB_DISABLE_TELEMETRY; Gradio (a LLaMA-Factory dependency) sends
  analytics unless GRADIO_ANALYTICS_ENABLED=False.
- Weights & Biases syncs a run online when one is started implicitly (transformers'
  `report_to`); WANDB_MODE=offline keeps such a run on disk. (The trainer also writes
  `report_to: none`; the monitor's explicit W&B sink keeps its own `wandb_mode`.)
- MinIO checks for updates unless MINIO_UPDATE=off; its call-home is off unless enabled
  (MINIO_CALLHOME_ENABLE=off says so explicitly).
- pip asks PyPI for its newest version on every run unless PIP_DISABLE_PIP_VERSION_CHECK.
- Apache Kafka, Playwright and Chromium's headless shell (whose every connection goes
  through the egress proxy) report nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

NO_TELEMETRY: Mapping[str, str] = MappingProxyType({
    "DO_NOT_TRACK": "1",  # the cross-tool convention (vLLM, Gradio and others honour it)
    "VLLM_NO_USAGE_STATS": "1",
    "VLLM_DO_NOT_TRACK": "1",
    "RAY_USAGE_STATS_ENABLED": "0",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "DISABLE_TELEMETRY": "1",  # older transformers / diffusers spelling
    "GRADIO_ANALYTICS_ENABLED": "False",
    "WANDB_MODE": "offline",
    "MINIO_UPDATE": "off",
    "MINIO_CALLHOME_ENABLE": "off",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
})


def without_telemetry(env: Mapping[str, str]) -> dict[str, str]:
    """`env` with NO_TELEMETRY on top: whatever the caller's environment said, nothing
    launched from it reports usage."""
    return {**env, **NO_TELEMETRY}
