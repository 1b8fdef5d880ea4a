"""The local vLLM (real, on the CPU) requires the key generated for the data dir on every /v1
route, runtime LoRA loading included, and the settings' clients send it."""

from __future__ import annotations

import httpx
import pytest

from webgym_common.config import Settings
from webgym_common.config.stack_secrets import read

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]


async def test_the_local_vllm_answers_only_requests_with_the_generated_key(
    vllm_base: Settings,
) -> None:
    made = read(vllm_base.infra.data_dir)
    assert made is not None
    assert vllm_base.vllm.api_key == vllm_base.policy.api_key == made.vllm_api_key
    url = vllm_base.policy.base_url
    async with httpx.AsyncClient(timeout=60) as http:
        assert (await http.get(f"{url}/models")).status_code == 401
        assert (await http.get(f"{url}/models",
                               headers={"Authorization": "Bearer EMPTY"})).status_code == 401
        load = await http.post(f"{url}/load_lora_adapter",
                               json={"lora_name": "intruder", "lora_path": "/nonexistent"})
        assert load.status_code == 401  # nobody without the key swaps the policy's weights
        ok = await http.get(f"{url}/models",
                            headers={"Authorization": f"Bearer {vllm_base.policy.api_key}"})
        assert ok.status_code == 200 and ok.json()["data"]
