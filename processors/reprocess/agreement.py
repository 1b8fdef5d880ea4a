"""How far two scorings of the same episodes agree: counts, Cohen's kappa, the flips (pure).

Old and new are compared episode by episode, success (reward 1) against failure. A judge
failure (webgym_common.history.is_judged false) is neither: it is listed apart on either
side, as is an episode the old history never scored, so a judge that cannot answer never
reads as agreement or as a flip.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Literal

from webgym_common.events import EpisodeScored
from webgym_common.history import is_judged, is_success

Outcome = Literal["success", "failure", "unjudged", "none"]


@dataclass(frozen=True)
class Provenance:
    """Who gave the new rewards: carried by every re-scored event and named in the report."""

    judge_kind: str  # rules | llm (page when the page scored itself)
    evaluator_version: str
    judge_model: str | None
    prompt_version: str | None
    run: str  # the target topic: one run writes one topic


def outcome(scored: EpisodeScored | None) -> Outcome:
    if scored is None:
        return "none"
    if not is_judged(scored):
        return "unjudged"
    return "success" if is_success(scored.reward) else "failure"


def cohen_kappa(both_success: int, old_only: int, new_only: int, both_failure: int) -> float:
    """Cohen's kappa of two raters on a yes/no question: (p_o - p_e) / (1 - p_e).

    `old_only`: the old said success, the new failure; `new_only` the other way. Raters that
    agree on everything and never vary (p_e = 1) agree perfectly: 1.0; no pairs: nan."""
    n = both_success + old_only + new_only + both_failure
    if n == 0:
        return float("nan")
    observed = (both_success + both_failure) / n
    old_yes, new_yes = (both_success + old_only) / n, (both_success + new_only) / n
    expected = old_yes * new_yes + (1 - old_yes) * (1 - new_yes)
    if expected >= 1.0:
        return 1.0
    return (observed - expected) / (1 - expected)


@dataclass(frozen=True)
class Flip:
    episode_id: str
    task_id: str
    old_reward: float
    new_reward: float
    old_evaluator: str
    new_evaluator: str
    why: str  # the new evaluation's last line


@dataclass
class Agreement:
    episodes: int = 0
    both_success: int = 0
    both_failure: int = 0
    old_success_new_failure: int = 0
    old_failure_new_success: int = 0
    unjudged_old: list[str] = field(default_factory=list)  # judge failures, either side
    unjudged_new: list[str] = field(default_factory=list)
    no_old_score: list[str] = field(default_factory=list)
    # The blocking verdict changed (a blocked site is no failure of the agent's: it changes
    # what history and replay make of the episode even when the reward stays).
    blocked_changed: list[str] = field(default_factory=list)
    kappa: float = float("nan")
    flipped: list[Flip] = field(default_factory=list)

    @property
    def compared(self) -> int:
        return (self.both_success + self.both_failure + self.old_success_new_failure
                + self.old_failure_new_success)


def agreement(pairs: Iterable[tuple[EpisodeScored | None, EpisodeScored]]) -> Agreement:
    """Old against new, episode by episode; judge failures and missing old scores are counted
    apart (neither a success nor a failure)."""
    a = Agreement()
    for old, new in pairs:
        a.episodes += 1
        o, n = outcome(old), outcome(new)
        if o == "none":
            a.no_old_score.append(new.episode_id)
        elif o == "unjudged":
            a.unjudged_old.append(new.episode_id)
        if n == "unjudged":
            a.unjudged_new.append(new.episode_id)
        if old is not None and old.is_blocked != new.is_blocked:
            a.blocked_changed.append(new.episode_id)
        if o not in ("success", "failure") or n not in ("success", "failure"):
            continue
        if o == n == "success":
            a.both_success += 1
        elif o == n == "failure":
            a.both_failure += 1
        else:
            assert old is not None
            if o == "success":
                a.old_success_new_failure += 1
            else:
                a.old_failure_new_success += 1
            a.flipped.append(Flip(new.episode_id, new.task_id, old.reward, new.reward,
                                  old.evaluator_version, new.evaluator_version,
                                  (new.evaluation.strip().splitlines() or [""])[-1]))
    a.kappa = cohen_kappa(a.both_success, a.old_success_new_failure,
                          a.old_failure_new_success, a.both_failure)
    return a


def report_dict(a: Agreement, target: str, prov: Provenance) -> dict[str, object]:
    out = asdict(a)
    out["kappa"] = None if a.kappa != a.kappa else round(a.kappa, 4)  # nan is not JSON
    out["compared"] = a.compared
    out["target"] = target
    out["provenance"] = asdict(prov)
    return out


def report_markdown(a: Agreement, target: str, prov: Provenance) -> str:
    kappa = "n/a" if a.kappa != a.kappa else f"{a.kappa:.3f}"
    lines = [
        f"# Re-scoring agreement: {target}", "",
        f"judge {prov.judge_kind} ({prov.evaluator_version}"
        + (f", model {prov.judge_model}, prompts {prov.prompt_version}" if prov.judge_model
           else "") + ")", "",
        "| | new success | new failure |", "|---|---|---|",
        f"| **old success** | {a.both_success} | {a.old_success_new_failure} |",
        f"| **old failure** | {a.old_failure_new_success} | {a.both_failure} |", "",
        f"episodes {a.episodes}, compared {a.compared}, Cohen's kappa {kappa}; judge failures: "
        f"old {len(a.unjudged_old)}, new {len(a.unjudged_new)}; no old score "
        f"{len(a.no_old_score)}; blocking verdict changed {len(a.blocked_changed)}", "",
    ]
    if a.flipped:
        lines += ["## Flipped", "", "| episode | task | old | new | why (new) |",
                  "|---|---|---|---|---|"]
        lines += [f"| {f.episode_id} | {f.task_id} | {f.old_reward:g} | {f.new_reward:g} | "
                  f"{f.why.replace('|', '/')} |" for f in a.flipped]
    for title, episodes in (("Blocking verdict changed", a.blocked_changed),
                            ("Judge failures (new)", a.unjudged_new)):
        if episodes:
            lines += [*([""] if lines[-1] else []), f"## {title}", "",
                      *(f"- {e}" for e in episodes)]
    return "\n".join(lines) + "\n"
