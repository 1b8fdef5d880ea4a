"""Generated sandbox task suites (GitHub issue 11): templates × the sites' own data.

Each site module (shop_gen, wiki_gen, forum_gen, travel_gen) lists its templates in
`TEMPLATES`: top-level functions that draft one task per entity (or pair, or chain) from the
data modules the server renders, so answers are computed, never typed in. `splits` decides
train / validation / test (held-out entities) / ood (held-out templates), for the
hand-written tasks too, and which generated train tasks form the rollout pool; `build`
numbers the kept drafts and writes generated_tasks.jsonl (`python -m
environments.tasks.build_tasks` rebuilds it together with the hand-written file).
"""
