"""The longest training rows survive LLaMA-Factory's own tokenisation whole.

LLaMA-Factory cuts a row longer than `cutoff_len` and keeps its start: a prompt that did not
fit would lose the end of the page, the question and the assistant header, and train on
something vLLM never sees. Here real snapshots (the sandbox's longest pages and MiniWoB++
pages, tests/unit/fixtures/aria) become rows exactly as the policy and the teacher write
them (five steps of history, a teacher reply naming its target), the trainer's run folder is
written as for a real run, and LLaMA-Factory 0.9.5 (its own venv) tokenises it with
`tokenized_path` (it saves the tokenised set and stops before training). Every row must end
with the whole assistant reply and its end token, and fit the cutoff.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from consumers.trainer.llamafactory import CONFIG_FILE, write_run
from infra import trainer_env, vllm_server
from webgym_common.agent.marks import parse_marks
from webgym_common.agent.prompts import EpisodeContext, StepRecord, build_messages
from webgym_common.config import PolicySettings, TrainerSettings, load_settings
from webgym_common.events import ChatMessage, ReplaySample

pytestmark = [pytest.mark.integration]
FIXTURES = Path(__file__).resolve().parents[1] / "unit" / "fixtures" / "aria"
REPLY = ('Thought: type "Cobalt Pulse 311" into the searchbox "Search products"\n'
         "Action: Type [3] [Cobalt Pulse 311]\nMemory_Updated: {}")

CHECK = """
import json, sys
from datasets import load_from_disk
from transformers import AutoTokenizer
data = load_from_disk(sys.argv[1])
data = data["train"] if hasattr(data, "keys") and "train" in data else data
tok = AutoTokenizer.from_pretrained(sys.argv[2])
out = []
for row in data:
    labels = [t for t in row["labels"] if t != -100]
    out.append({"length": len(row["input_ids"]), "trained": tok.decode(labels),
                "ends": row["input_ids"][-len(labels):] == labels})
print(json.dumps(out))
"""


def rows() -> list[ReplaySample]:
    history = [StepRecord(i, "The search box is on the page, so I type the product name into it.",
                          "Type [3] [Cobalt Pulse 311]", "typed 'Cobalt Pulse 311' and "
                          "pressed Enter") for i in range(5)]
    out = []
    for fixture in sorted(FIXTURES.glob("*.txt")):
        tree = fixture.read_text()
        ctx = EpisodeContext(episode_id=fixture.stem, task_id=fixture.stem,
                             task_name="Find the Cobalt Pulse 311 and report its price.",
                             history=history, max_steps=30)
        messages = build_messages(ctx, "http://127.0.0.1:18765/shop/", parse_marks(tree, 300),
                                  max_element_chars=PolicySettings().max_element_chars,
                                  tree=tree)
        out.append(ReplaySample(
            sample_id=f"{fixture.stem}:5", episode_id=fixture.stem, task_id=fixture.stem,
            step=5, messages=[ChatMessage(role=m["role"], content=m["content"])
                              for m in messages],
            response=REPLY, reward=1.0, iteration=0, policy_version="demonstration",
            success=True))
    return out


@pytest.mark.timeout(600)
def test_the_longest_rows_end_with_the_whole_reply_after_llamafactorys_tokenisation(
        tmp_path: Path) -> None:
    settings = load_settings()
    venv = trainer_env.prepare(settings)
    model = str(vllm_server.ensure_model(settings))
    cfg = TrainerSettings()
    samples = rows()
    assert {s.task_id for s in samples} >= {"shop", "shop-category", "click-checkboxes"}
    files = write_run(tmp_path / "run", samples, cfg, model, None)
    conf = yaml.safe_load(files.config.read_text())
    conf["tokenized_path"] = str(tmp_path / "tokenized")
    (files.run_dir / CONFIG_FILE).write_text(yaml.safe_dump(conf))
    done = subprocess.run([str(trainer_env.cli_path(venv)), "train", str(files.config)],
                          capture_output=True, text=True, timeout=500,
                          env={"PATH": f"{venv}/bin:/usr/bin:/bin", "HF_HUB_OFFLINE": "1",
                               "CUDA_VISIBLE_DEVICES": "", "HOME": str(Path.home())})
    assert (tmp_path / "tokenized").exists(), done.stdout[-3000:] + done.stderr[-3000:]
    checked = subprocess.run([str(venv / "bin" / "python"), "-c", CHECK,
                              str(tmp_path / "tokenized"), model],
                             capture_output=True, text=True, timeout=300, check=True)
    found = json.loads(checked.stdout.strip().splitlines()[-1])
    assert len(found) == len(samples)
    for row in found:
        assert row["length"] <= cfg.cutoff_len, row
        assert row["ends"], row  # the trained tokens are the row's last ones
        assert row["trained"].strip().startswith(REPLY), row  # the whole reply
        assert row["trained"].rstrip().endswith("<|im_end|>"), row
    print("longest row:", max(r["length"] for r in found), "tokens of", cfg.cutoff_len)
