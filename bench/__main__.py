"""`make bench`: the benchmark set, one after another, written up as docs/benchmarks.md.

  .venv/bin/python -m bench [--out docs/benchmarks.md] [--only rollout,replay]

Each bench runs in a process of its own (they start and stop pipelines of their own on the
embedded stack, which is started if it is not up) with `--markdown` pointing at a scratch
file; when all have run, the page is the introduction below plus every table, each with
its command, date and machine line. A bench that fails is reported on the page and the
set goes on. The page says when the run began and ended and how long each bench took.
Takes about 23 minutes on 2 cores (the estimate is beside BENCHES).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from harness.machine import describe_machine
from harness.report import run_line
from harness.scratch import scratch_topics_left
from infra import stack
from webgym_common.config import get_settings
from webgym_common.stream.admin import topic_names

console = Console()

# name -> the bench's module and arguments (its --markdown is added). Every rollout and
# serving figure is the median of 3 runs with [min, max] (--repeat 3); the sizes keep the
# set near 23 minutes on 2 cores (estimated per bench from its single-run time, docs/
# benchmarks.md's own tables and timestamps, times three for what is repeated):
#   bus ~3.2 min: per level, processes and a 4-step warm-up once (~11 s), 3 runs of 16 steps
#     x 0.8 s (~15 s each with the scoring); 3 levels, and the broker's warm-up level;
#   scale ~3.0: per level ~10 s of processes, 3 runs until all scored (4, 13, 25 s), the
#     topics read back once (~1-4 s);
#   rollout ~7.5: a warm-up iteration of 48 tasks (~55 s), 3 rounds of an iteration of 96
#     tasks at 16 contexts (64 s + ~20 s up and down), the naive loop and the ceiling (20 s
#     each);
#   settle ~2, replay ~1.5 (as before; replay was already 3 runs);
#   decisions ~4.3: two vLLM starts (~35 s each), 3 rounds x 3 levels x (6 s + the last
#     replies, up to a p99: ~10 s at 16 in flight without caching);
#   lora ~3: two vLLM starts, 3 runs of one round of 4 decisions per model (3.1 + 18.9 s
#     with vLLM's operators, 3.6 + 4.8 s with the plugin).
BENCHES: dict[str, list[str]] = {
    "bus": ["bench.bus_scale", "--episodes", "1,8,16", "--policy-latency-ms", "500",
            "--browser-step-ms", "300", "--steps", "16", "--repeat", "3"],
    "scale": ["bench.bus_scale", "--episodes", "64,256,512", "--repeat", "3"],
    "rollout": ["bench.rollout_iteration", "--contexts", "16", "--latency", "0.5",
                "--tasks", "96", "--window-s", "20", "--repeat", "3"],
    "settle": ["bench.settle_outcomes", "--tasks", "32"],
    "replay": ["bench.replay_rate", "--episodes", "1000", "--marks", "60",
               "--distinct-prompts", "--repeat", "3"],
    "decisions": ["bench.decision_latency", "--seconds", "6", "--repeat", "3"],
    "lora": ["bench.lora_serving", "--rounds", "1", "--repeat", "3"],
}

INTRO = """# Benchmarks

Written by `make bench` (`python -m bench`), which runs the set below one bench after
another on the embedded stack, about 23 minutes on 2 cores; every table on this page comes
from the one run named at its end. Every table says the command that made it, when and on
what machine; every ratio is against a baseline measured in the same run. Every figure of
the bus, scale, rollout, decisions and LoRA serving tables is the median of 3 runs with
[min, max] after it (`--repeat 3`: two single runs of the same code put the rollout at
0.63 and 0.76 of its limit), its baseline repeated too: a ratio is the median over the
baseline's median, its range the runs' min and max over that median. Each bench's topics
are deleted when it ends: left behind, thousands of them kept the embedded broker busy
enough to add a third to every figure of CPU per step. Run one bench alone with its
command; each module's docstring says what it measures and how.

- **Bus** (`bench.bus_scale`, 1/8/16 episodes in flight): synthetic browsers (no
  Chromium), the real policy processor with a fixed-latency teacher policy and the real
  evaluator. *bus* = observation published -> its action received, less the policy's fixed
  latency; *kafka* = the same less every phase the policy measures itself (model, prompt
  store in MinIO, table write), i.e. the trips through Kafka and the policy's queue.
- **Scale** (`bench.bus_scale`, 64/256/512 episodes at once): the same at the scale many
  browser hosts would bring; lost and duplicated episodes and steps are counted from the
  topics themselves.
- **Rollout** (`bench.rollout_iteration`): one iteration of 96 sandbox tasks through the
  whole pipeline at 16 contexts (Chromium, teacher policy with 0.5 s per decision like a
  model server), against its limit, min(CPU ceiling, contexts / (browser step + latency)),
  and against a naive one-task-at-a-time loop, both measured with the worker's own code in
  the same run, the three in turn in each of the 3 rounds, after a warm-up iteration that
  is not measured (a fresh broker compiles for its first minute); then where a step's time
  went (the events' own timings, `webgym_common.timings`; the monitor's live page shows
  the same breakdown) and the CPU each process used per step. *Pipeline overhead* is the
  pipeline's own CPU per step: everything but the environment (Chromium, the sites), the
  model server and the rest of the machine.
- **Settle** (`bench.settle_outcomes`): the page-driven settle (the default) against the
  fixed 0.3 s sleep (`WEBGYM_BROWSER__SETTLE=fixed`) on the same sandbox and MiniWoB++ tasks:
  the same outcomes, less waiting.
- **Replay** (`bench.replay_rate`): `webgym reprocess rescore` and `refilter` against a raw
  fetch of the same topic range, and against a fetch that also decodes every record. Here
  a refilter writes 4.5 samples for each episode it reads (a transaction per 8,192
  samples): its ratio counts encoding and writing those too.
- **Decisions** (`bench.decision_latency`): the local CPU vLLM's decision latency at 1, 8
  and 16 in flight with prefix caching off (the baseline) and on (the default); a run is
  6 s of load at one level.
- **LoRA serving** (`bench.lora_serving`): a trained version (a rank-16 adapter on every
  linear layer, as the trainer makes them) against the base model on the same CPU vLLM, a
  full page view (~570 prompt tokens), with vLLM's own CPU LoRA operators (the baseline)
  and with our plugin's (infra/vllm/cpu_lora, the default); a run is one round of 4
  decisions in flight per model.

Where a rollout step's CPU goes after the environment and the model, largest first (the
rollout's CPU table), and what would remove each:

- **The browser worker and its Playwright driver** (Node), about 40 % of the overhead: every
  browser call crosses both processes as JSON (Python, then Node, then Chromium), and a step
  makes several (the action's, the settle's in-page script, a CDP screenshot, the aria
  snapshot, the title) besides the page's network events. One in-page script that returns
  the snapshot and the title together, and the screenshot over a CDP connection of the
  worker's own, would leave the driver out of most of a step.
- **Kafka**: each step's observation and action are read by several consumer groups, and the
  policy's and the evaluator's state changes go to changelogs as records of their own. The
  evaluator's commit interval is not it: 10 s instead of 2.8 s left Kafka's CPU per step
  where it was. Fewer records per step would: the evaluator taking what it keeps of a step
  from the observation it already reads, and the policy writing what changed in an
  episode's context, not all of it.
- **The policy and the evaluator** (faust): per-record work in faust and aiokafka (decoding,
  acks, a send per record), and under exactly-once a transactional producer per input
  partition. Handling the records of a fetch together would share it. Not the garbage
  collector: freezing each process's startup heap (gc.freeze) halved their time in it and
  left the CPU per step where it was.

The machine line lists the CPU's vector extensions because the same vLLM server runs
several times faster with AVX-512 than with AVX2 only. Three findings that set defaults,
measured by hand and not by `make bench`:

- vLLM computes in the model's dtype: on a CPU without native bf16 (AMD EPYC, 2 cores,
  AVX2), SmolLM2 served as float32 gave 2.4x the tokens/s of bf16 at 8 in flight, so
  `vllm.dtype=cpu` picks float32 there and the trainer trains through a float32 view.
- Binding vLLM's OpenMP threads to every allowed core (`vllm.cpu_threads_bind=all`) gave
  1.4-1.8x the tokens/s of vLLM's own choice (AMD EPYC, 2 cores, AVX2;
  `python -m bench.vllm_cpu_fit` compares them).
- The trainer in bf16 over float32 weights (`trainer.precision=auto` on a CPU with
  AVX512-BF16) ran 16 LoRA steps of SmolLM2 (batch 2, cutoff 1024) in 112 s against 166 s
  in float32, each step's loss within 5 % of float32's (AMD EPYC, 2 cores, AVX-512;
  `llamafactory-cli train` on the same run folder, `bf16: true` against `false`).

Other benches (`bench.browser_steps`, `bench.task_load`, `bench.envserver_rate`,
`bench.hot_load`, `bench.monitor_latency`, `bench.trainer_overhead`, `bench.loop_staleness`,
`bench.policy_throughput`) are run by hand; the pages they measure quote their figures with
the machine each ran on.
"""


def run_bench(name: str, argv: list[str], scratch: Path, log: Path) -> tuple[bool, float]:
    started = time.monotonic()
    with log.open("ab") as out:
        out.write(f"\n$ python -m {' '.join(argv)}\n".encode())
        out.flush()
        code = subprocess.call([sys.executable, "-m", *argv, "--markdown", str(scratch)],
                               stdout=out, stderr=subprocess.STDOUT)
    return code == 0, time.monotonic() - started


def main(out: Path = typer.Option(Path("docs/benchmarks.md"), help="The page to write."),
         only: str = typer.Option("", help="Comma-separated benches (default: all): "
                                  + ", ".join(BENCHES))) -> None:
    names = [n.strip() for n in only.split(",") if n.strip()] or list(BENCHES)
    unknown = [n for n in names if n not in BENCHES]
    if unknown:
        raise typer.BadParameter(f"no bench named {', '.join(unknown)}")
    console.print(describe_machine())
    settings = get_settings()
    asyncio.run(stack.up(settings, only=["kafka", "minio"]))
    work = Path(tempfile.mkdtemp(prefix="bench-set-"))
    scratch, log = work / "tables.md", work / "bench.log"
    console.print(f"each bench's own output: {log}")
    failed: list[str] = []
    took: dict[str, float] = {}
    began = datetime.now(UTC)
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[at]}"),
                  TimeElapsedColumn(), console=console) as progress:
        bar = progress.add_task("benchmarks", total=len(names), at="")
        for name in names:
            progress.update(bar, at=name)
            before = asyncio.run(topic_names(settings))
            ok, seconds = run_bench(name, BENCHES[name], scratch, log)
            left = asyncio.run(scratch_topics_left(settings, before))
            progress.console.print(f"{name}: deleted the {len(left)} topics it made")
            progress.console.print(f"{name}: {'done' if ok else 'FAILED'} in {seconds:.0f} s")
            took[name] = seconds
            if not ok:
                failed.append(name)
            progress.advance(bar)
    tables = scratch.read_text() if scratch.exists() else ""
    footer = "".join(f"\n**{n} failed** in the run of "
                     f"{datetime.now(UTC):%Y-%m-%d}: see `python -m {' '.join(BENCHES[n])}`.\n"
                     for n in failed)
    footer += "\n" + run_line(began, datetime.now(UTC), took, list(BENCHES)) + "\n"
    out.write_text(INTRO + "\n" + tables + footer)
    console.print(f"wrote {out}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    if failed:
        raise typer.Exit(1)


if __name__ == "__main__":
    typer.run(main)
