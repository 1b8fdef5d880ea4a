"""A replay job's heap: what the process held before the job is left out of its collections.

A replay decodes thousands of events and builds thousands more in one pass, which makes
CPython's cyclic garbage collector run full collections in the middle of it; each of those
walks every object the process holds (modules, clients, a bench's own data), a tenth of a
second and more that is no work of the job's. Nothing that existed before the job becomes
its garbage, so `job_heap` freezes it (gc.freeze): collections during the job walk only the
objects the job made, and still free its cycles. Once the job is over, the frozen objects
go back to the oldest generation, unless someone else froze the heap before us (a forking
server), whose freeze is left as it was. A job's coroutine function says so with
`@in_job_heap`.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


@contextmanager
def job_heap() -> Iterator[None]:
    """Collections inside the block skip every object made before it (see the module doc)."""
    frozen_before = gc.get_freeze_count() > 0
    gc.freeze()
    try:
        yield
    finally:
        if not frozen_before:
            gc.unfreeze()


def in_job_heap(job: Callable[P, Coroutine[Any, Any, T]]
                ) -> Callable[P, Coroutine[Any, Any, T]]:
    """`job` (a coroutine function) run inside `job_heap`."""

    @functools.wraps(job)
    async def run(*args: P.args, **kwargs: P.kwargs) -> T:
        with job_heap():
            return await job(*args, **kwargs)

    return run
