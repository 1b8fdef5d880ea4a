"""What the tests and the benchmarks share: the harness around a real pipeline.

Launching real pipeline processes (launch), episodes fed by hand through the broker
(hand_fed), reading what a run left in its topics (topic_reads) and the verdict on it
(outcomes: lost, duplicated, wrong), counting delivered steps and episodes (delivery_counts),
the AgentGym-style client (agentgym_client), real LoRA adapters made without a trainer
(lora), the synthetic shop world (synthetic), and a run's tables with the machine they ran
on (report, machine).

tests/ and bench/ import it; it imports neither of them (pyproject.toml's import-linter
contracts, checked by `lint-imports`). Not part of the product: the image leaves it out.
"""
