"""Task set for the sandbox web; regenerate the JSONL with
``python -m infra.sandbox.tasks.build_tasks``."""
