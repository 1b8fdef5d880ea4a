import gc

from processors.reprocess.heap import in_job_heap, job_heap


class Node:
    def __init__(self) -> None:
        self.me = self  # a cycle: only the cyclic collector frees it


def test_the_heap_before_the_job_is_frozen_in_it_and_back_after() -> None:
    assert gc.get_freeze_count() == 0
    before = Node()
    with job_heap():
        assert gc.get_freeze_count() > 0
        assert not walked(before)  # frozen: no collection walks it
        made = Node()
        gc.collect()
        assert walked(made) and not walked(before)
    assert gc.get_freeze_count() == 0
    assert walked(before)


def walked(obj: object) -> bool:
    """Whether the collector's generations (not the frozen heap) hold `obj`."""
    return any(o is obj for o in gc.get_objects())


def test_a_cycle_the_job_makes_is_still_collected() -> None:
    with job_heap():
        Node()
        assert gc.collect() >= 1


def test_someone_elses_freeze_is_left_as_it_was() -> None:
    gc.freeze()
    try:
        with job_heap():
            pass
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


async def test_a_job_decorated_runs_inside_the_frozen_heap() -> None:
    @in_job_heap
    async def job(before: object) -> bool:
        return gc.get_freeze_count() > 0 and not walked(before)

    before = Node()
    assert await job(before)
    assert gc.get_freeze_count() == 0 and walked(before)
