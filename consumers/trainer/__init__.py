"""The trainer: replay samples -> LLaMA-Factory runs -> one ModelVersion per run."""
