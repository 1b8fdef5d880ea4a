"""WebGym's per-iteration rollout metrics: the fold (fold.py), the record on webgym.metrics
and its CSV (storage.py), the plot and the printed table (plots.py).


Every metric is the policy's alone: demonstrations (teacher-forced episodes, policy_version
"demonstration", webgym_common.versions) follow the task's reference actions, so their success
is the teacher's; they are counted apart, as `demonstrations` and `demonstration_success_rate`.
`episodes` counts every judged episode, demonstrations included; the policy's own are
`policy_episodes(m)` = episodes - demonstrations (derived, not stored, so records written
before demonstrations were counted apart read right: they have 0 demonstrations and counted
every episode as the policy's; the fold below republishes them with the right numbers).

Over the policy's episodes: crashed_rate over all of them, blocked_rate over the non-crashed
ones, and success_rate, avg_steps, avg_chars_per_response and goback_rate over those that
neither crashed nor were blocked. goback_rate pools the iteration: GoBack actions / steps;
avg_chars_per_response is the mean length of the trajectory entries' raw_response.
demonstration_success_rate is over the demonstrations that neither crashed nor were blocked.
An episode id counts once (first record wins). A score the judge could not give
(webgym_common.history.is_judged) is no episode here.

`MetricsFold` keeps them correct as the log grows: it folds scored episodes,
iteration closes and the published metrics, and names every closed iteration whose
numbers differ from what webgym.metrics holds: after a close, after a late score,
or after someone published other numbers (a controller that computed them from
the scores it had seen). The metrics process publishes those; `webgym rollout`
without a metrics process does the same at each close (`recompute_metrics`), so
partial numbers it published earlier are corrected too.

The record is the compacted webgym.metrics (key: iteration); the CSV (one row per
iteration) and the PNG plot beside it are rewritten from that whole table. Both the
metrics processor and `webgym rollout` (when no metrics processor runs) write them.
"""
