"""Developer tools: what a contributor runs, never the pipeline (the events generator)."""
