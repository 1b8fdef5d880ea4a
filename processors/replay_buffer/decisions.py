"""What the replay processor keeps of a scored episode, and the samples it makes of it (pure).

WebGym's rule: a step is training-eligible when its trajectory's reward is 1 and (with
`filter_same_screenshot`) the next screenshot differs from this one's: an action that
changed nothing on the page teaches nothing. The last step has no next screenshot and is
kept: it is the ANSWER (or the last action before the step budget ran out), the step the
reward was given for. Failures are kept, labelled success=False, only with
`include_failures` (KTO/DPO); a blocked site (CAPTCHA, 403) is no failure of the agent's.
Never kept: an episode of the test split (it measures the policy, it must not train it), one
the judge could not score or that crashed, a step without a stored prompt (nothing to train
on), without a reply, or whose action was invalid.

A sample's messages are the stored prompt with every image as a reference (its s3:// URI,
or the step's screenshot for an inline data: or presigned URL): never image bytes
(webgym_common.replay_prompts.chat_messages). A sample by reference carries the prompt's
content-addressed URI and the step's screenshot instead, and its reader resolves them.
"""

from __future__ import annotations

from dataclasses import dataclass

from webgym_common.config import ReplaySettings
from webgym_common.events import ChatMessage, EpisodeScored, ReplaySample, TrajectoryStep
from webgym_common.history import is_judged, is_success


@dataclass(frozen=True)
class KeptStep:
    step: int
    prompt_uri: str
    response: str
    screenshot_uri: str | None
    policy_version: str
    success: bool


def sample_id(episode_id: str, step: int) -> str:
    """Deterministic: a re-published sample has the id it had, so readers dedupe by it."""
    return f"{episode_id}:{step}"


def episode_label(scored: EpisodeScored, cfg: ReplaySettings) -> bool | None:
    """success (True) or failure (False) kept with that label, or None: nothing kept."""
    if scored.crashed or not is_judged(scored) or scored.split != "train":
        return None
    if is_success(scored.reward):
        return True
    if scored.is_blocked:
        return None
    return False if cfg.include_failures or not cfg.success_only else None


def same_screenshot(step: TrajectoryStep, after: TrajectoryStep | None) -> bool:
    """The next observation (if there is one) shows the very same screenshot."""
    return (after is not None and after.step == step.step + 1
            and step.screenshot_sha256 is not None
            and step.screenshot_sha256 == after.screenshot_sha256)


def training_steps(scored: EpisodeScored, cfg: ReplaySettings) -> list[KeptStep]:
    success = episode_label(scored, cfg)
    if success is None:
        return []
    steps = sorted(scored.trajectory, key=lambda s: s.step)
    kept = []
    for i, s in enumerate(steps):
        if not s.prompt_uri or not s.raw_response.strip() or not s.action_valid:
            continue
        after = steps[i + 1] if i + 1 < len(steps) else None
        if cfg.filter_same_screenshot and same_screenshot(s, after):
            continue
        kept.append(KeptStep(s.step, s.prompt_uri, s.raw_response, s.screenshot_uri,
                             s.policy_version or scored.policy_version, success))
    return kept


def replay_sample(scored: EpisodeScored, kept: KeptStep, messages: list[ChatMessage],
                  by_reference: bool = False) -> ReplaySample:
    """The step's sample with its prompt inline (`messages`), or `by_reference`: no messages,
    the prompt's URI and the step's screenshot (its reader resolves them:
    webgym_common.replay_prompts)."""
    return ReplaySample(
        sample_id=sample_id(scored.episode_id, kept.step), episode_id=scored.episode_id,
        task_id=scored.task_id, step=kept.step, messages=messages, response=kept.response,
        reward=scored.reward, iteration=scored.iteration, policy_version=kept.policy_version,
        success=kept.success, split=scored.split,
        prompt_uri=kept.prompt_uri if by_reference else None,
        screenshot_uri=kept.screenshot_uri if by_reference else None,
    )
