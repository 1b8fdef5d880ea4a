"""Calls into a faust consumer that must run on its own thread.

faust's aiokafka driver keeps the Kafka consumer in a thread of its own and sends it work
through `call_thread` (a fetch, a commit, faust's own seek to the committed offsets), one
call at a time. `Consumer.seek` alone calls the consumer directly from the app's thread:
aiokafka's fetcher can then be changed while that thread drains it, a KeyError in
`fetched_records` that crashes the worker (seen in the chaos suite, a restarted evaluator
seeking back a stale batch). `seek` here runs on the consumer's thread, between two calls.
"""

from __future__ import annotations

from typing import Any


async def seek(consumer: Any, tp: Any, offset: int) -> None:
    """`consumer.seek(tp, offset)`, on the consumer's thread where it has one."""
    thread = getattr(consumer, "_thread", None)
    if thread is None or not hasattr(thread, "call_thread"):
        await consumer.seek(tp, offset)  # no thread of its own (a test's fake)
        return
    await thread.call_thread(thread.seek, tp, offset)
    consumer._read_offset[tp] = offset if offset else None  # what Consumer.seek also does
