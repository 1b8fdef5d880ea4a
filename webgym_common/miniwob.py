"""MiniWoB++'s page protocol, shared by the browser worker and the reference builder.

The protocol is MiniWoB's own (the `miniwob` package's Selenium instance does the same):
after the page's `onload` drew the START overlay (READY_JS), seed the page's random
generator (`Math.seedrandom`), set the data mode, call `core.startEpisodeReal()` (START_JS;
it draws the problem) and wait for TASK_READY_JS; UTTERANCE_JS reads the instruction the
page wrote, STATE_JS whether the page has ended its episode and its raw reward.
"""

from __future__ import annotations

MINIWOB = "miniwob"
# MiniWoB's problem distribution ("train" is the package's default; a few transfer tasks
# draw differently in "test"). Our splits are by seed, so every episode uses one mode.
DATA_MODE = "train"

# The page's onload has run (it draws the START overlay; starting before would fail).
READY_JS = "() => window.core && core.cover_div"
# Arguments: [seed, data mode, the page's episode time limit in ms].
START_JS = """([seed, mode, maxMs]) => {
  Math.seedrandom(seed);
  core.setDataMode(mode);
  core.EPISODE_MAX_TIME = maxMs;
  core.startEpisodeReal();
}"""
TASK_READY_JS = "() => WOB_TASK_READY"
UTTERANCE_JS = """() => {
  const u = core.getUtterance();
  return typeof u === 'string' ? u : (u && u.utterance) || '';
}"""
STATE_JS = """() => ({done: Boolean(WOB_DONE_GLOBAL), raw: Number(WOB_RAW_REWARD_GLOBAL),
  reason: WOB_REWARD_REASON == null ? null : String(WOB_REWARD_REASON)})"""
