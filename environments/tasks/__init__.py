"""Task set for the sandbox web; regenerate the JSONL with
``python -m environments.tasks.build_tasks``."""
