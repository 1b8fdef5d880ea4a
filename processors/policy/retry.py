"""Trying a step of a decision again while the episode can still use an action.

The model server or MinIO down, Kafka not taking the action: tried again with
exponential backoff until the episode's deadline (or until it ends). The model
server refusing the request (HTTP 4xx) is not tried again: the caller turns it into
an explicit Invalid action. Anything else is a bug and is raised.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

from processors.policy.policies import Failure, failure_kind
from webgym_common.stream.handlers import retried_while

log = logging.getLogger(__name__)
T = TypeVar("T")


async def retried(call: Callable[[], Awaitable[T]], what: str,
                  still_useful: Callable[[float], bool], max_backoff_s: float,
                  on_refusal: Callable[[BaseException], T] | None = None) -> T | None:
    """`call()`, tried again while its failure passes and `still_useful(next_try_in_s)`.

    None: no longer useful (the episode ended or times out before the next try).
    `on_refusal`: what a refusal of the model server gives; without it, a bug.
    """
    async def attempt() -> T:
        try:
            return await call()
        except Exception as err:
            if on_refusal is not None and failure_kind(err) is Failure.REFUSED:
                log.warning("%s: the model server refused: %s", what, err)
                return on_refusal(err)
            raise

    return await retried_while(attempt, what, still_useful, max_backoff_s,
                               lambda err: failure_kind(err) is Failure.TRANSIENT)
