"""Offline "sandbox web": small deterministic sites (shop, wiki, forum, travel) plus hostile
pages, served by one aiohttp app so rollouts and tests need no internet.

Entry points live in :mod:`environments.app` (``create_app``, ``start_sandbox``, ``main``);
tasks with known answers are in ``environments/tasks/sandbox_tasks.jsonl``.
"""
