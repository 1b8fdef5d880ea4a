"""Commit safety of a browser worker's offsets (offsets.py).

An offset still held by a running episode must never be committed past: whoever owns the
partition next has to re-read the episode's request and actions to resume it.
"""

from __future__ import annotations

import random

from aiokafka import TopicPartition

from webgym_common.stream.offsets import OffsetHolds

P0, P1 = TopicPartition("webgym.episodes", 0), TopicPartition("webgym.actions", 0)


def test_without_holds_everything_seen_is_committable() -> None:
    holds = OffsetHolds()
    assert holds.committable() == {}
    holds.seen(P0, 0)
    holds.seen(P0, 7)
    holds.seen(P0, 3)  # out of order: the furthest seen counts
    assert holds.committable() == {P0: 8}


def test_a_held_offset_is_never_committed_past() -> None:
    holds = OffsetHolds()
    holds.hold(P0, 5, "ep-a")
    for offset in range(6, 40):
        holds.seen(P0, offset)
    # Committing 5 means "read again from 5": the request at 5 is re-read by the next owner.
    assert holds.committable() == {P0: 5}


def test_the_lowest_hold_of_all_episodes_bounds_the_commit() -> None:
    holds = OffsetHolds()
    holds.hold(P0, 8, "ep-b")
    holds.hold(P0, 5, "ep-a")
    holds.seen(P0, 20)
    assert holds.committable() == {P0: 5}
    holds.release("ep-b")
    assert holds.committable() == {P0: 5}
    holds.release("ep-a")
    assert holds.committable() == {P0: 21}


def test_an_episode_keeps_its_earliest_offset() -> None:
    holds = OffsetHolds()
    holds.hold(P0, 5, "ep-a")  # the request
    holds.hold(P0, 9, "ep-a")  # a later action of the same episode
    holds.hold(P0, 3, "ep-a")  # an earlier offset held late still lowers it
    holds.seen(P0, 12)
    assert holds.committable() == {P0: 3}


def test_release_frees_the_episode_on_every_partition() -> None:
    holds = OffsetHolds()
    holds.hold(P0, 2, "ep-a")
    holds.hold(P1, 4, "ep-a")
    holds.seen(P0, 10)
    holds.seen(P1, 10)
    assert holds.committable() == {P0: 2, P1: 4}
    holds.release("ep-a")
    assert holds.committable() == {P0: 11, P1: 11}
    holds.release("never-held")  # harmless


def test_partitions_are_independent() -> None:
    holds = OffsetHolds()
    holds.hold(P0, 1, "ep-a")
    holds.seen(P1, 6)
    assert holds.committable() == {P0: 1, P1: 7}


def test_only_offsets_that_moved_forward_are_returned() -> None:
    holds = OffsetHolds()
    holds.hold(P0, 5, "ep-a")
    holds.seen(P0, 9)
    holds.mark_committed(holds.committable())
    assert holds.committable() == {}
    holds.seen(P0, 12)  # still held at 5: nothing new to commit
    assert holds.committable() == {}
    holds.release("ep-a")
    assert holds.committable() == {P0: 13}
    holds.mark_committed({P0: 13})
    assert holds.committable() == {}


def test_a_forgotten_partition_is_not_committed_and_starts_afresh() -> None:
    holds = OffsetHolds()
    holds.hold(P0, 5, "ep-a")
    holds.seen(P1, 3)
    holds.mark_committed(holds.committable())
    holds.forget({P0})  # revoked: its next owner commits it
    assert holds.committable() == {}
    assert P0 not in holds.holds and P0 not in holds.next_offset
    holds.seen(P0, 2)  # assigned again later: the old commit mark is gone too
    assert holds.committable() == {P0: 3}


def test_random_histories_never_commit_past_a_hold_or_go_backwards() -> None:
    rng = random.Random(8)
    for _ in range(200):
        holds = OffsetHolds()
        next_offset = {P0: 0, P1: 0}
        held: dict[str, dict[TopicPartition, int]] = {}
        committed: dict[TopicPartition, int] = {}
        for _ in range(60):
            op = rng.random()
            tp = rng.choice((P0, P1))
            if op < 0.4:
                holds.seen(tp, next_offset[tp])
                next_offset[tp] += 1
            elif op < 0.7:
                episode = f"ep-{rng.randrange(5)}"
                holds.hold(tp, next_offset[tp], episode)
                held.setdefault(episode, {}).setdefault(tp, next_offset[tp])
                next_offset[tp] += 1
            elif op < 0.9 and held:
                episode = rng.choice(sorted(held))
                holds.release(episode)
                del held[episode]
            else:
                offsets = holds.committable()
                for partition, offset in offsets.items():
                    lowest = min((h[partition] for h in held.values() if partition in h),
                                 default=next_offset[partition])
                    assert offset <= lowest, (partition, offset, lowest)
                    assert offset > committed.get(partition, -1)
                holds.mark_committed(offsets)
                committed.update(offsets)


# -- one record's own handling: begin/finish (the bus consumer, faust's in-order acks) --


def test_a_finished_record_is_not_committed_past_an_earlier_unfinished_one() -> None:
    holds = OffsetHolds()
    for offset in range(3):
        holds.begin(P0, offset)
    holds.seen(P0, 3)  # a dead letter right after them: finished at once
    assert holds.committable() == {P0: 0}
    holds.finish(P0, 2)
    holds.finish(P0, 1)
    assert holds.safe_offset(P0) == 0  # 0 is still being handled
    holds.finish(P0, 0)
    assert holds.committable() == {P0: 4}
    assert holds.safe_offset(P1) is None  # nothing read there


def test_random_interleavings_never_commit_past_an_unfinished_offset() -> None:
    rng = random.Random(9)
    for _ in range(300):
        holds = OffsetHolds()
        read = {P0: 0, P1: 0}
        unfinished: dict[TopicPartition, set[int]] = {P0: set(), P1: set()}
        committed: dict[TopicPartition, int] = {}
        for _ in range(80):
            tp, op = rng.choice((P0, P1)), rng.random()
            if op < 0.45:  # a record is read; some are dead letters (finished at once)
                if rng.random() < 0.2:
                    holds.seen(tp, read[tp])
                else:
                    holds.begin(tp, read[tp])
                    unfinished[tp].add(read[tp])
                read[tp] += 1
            elif op < 0.85 and unfinished[tp]:  # any of them finishes, in any order
                offset = rng.choice(sorted(unfinished[tp]))
                holds.finish(tp, offset)
                unfinished[tp].discard(offset)
            else:
                offsets = holds.committable()
                for partition, offset in offsets.items():
                    assert offset <= min(unfinished[partition], default=read[partition])
                    assert offset > committed.get(partition, -1)
                holds.mark_committed(offsets)
                committed.update(offsets)
        for tp in (P0, P1):  # once everything finished, everything read is committable
            for offset in sorted(unfinished[tp]):
                holds.finish(tp, offset)
            if read[tp]:
                assert holds.safe_offset(tp) == read[tp]


def test_finishing_twice_or_a_record_never_begun_is_harmless() -> None:
    holds = OffsetHolds()
    holds.begin(P0, 0)
    holds.begin(P0, 1)
    holds.finish(P0, 1)
    holds.finish(P0, 1)
    holds.finish(P0, 7)
    assert holds.safe_offset(P0) == 0
    holds.forget({P0})
    holds.finish(P0, 0)  # finished after its partition moved away: nothing comes back
    assert holds.committable() == {}
