"""The bus's pure parts (bus.py): the one dead-letter builder."""

from __future__ import annotations

from aiokafka import ConsumerRecord

from webgym_common.bus import dead_letter


def test_a_dead_letter_keeps_the_bytes_and_where_they_came_from() -> None:
    record = ConsumerRecord(topic="p.actions", partition=3, offset=17, timestamp=0,
                            timestamp_type=0, key=b"ep-1", value=b"\x00junk", checksum=None,
                            serialized_key_size=4, serialized_value_size=5, headers=())
    letter = dead_letter(record, "not an Avro event", "p-history")
    assert (letter.source_topic, letter.source_partition, letter.source_offset) == (
        "p.actions", 3, 17)
    assert (letter.source_key, letter.raw_value) == (b"ep-1", b"\x00junk")
    assert (letter.error, letter.consumer_group) == ("not an Avro event", "p-history")


def test_a_tombstone_is_dead_lettered_as_empty_bytes_and_a_group_is_optional() -> None:
    record = ConsumerRecord(topic="p.tasks", partition=0, offset=0, timestamp=0,
                            timestamp_type=0, key=None, value=None, checksum=None,
                            serialized_key_size=0, serialized_value_size=0, headers=())
    letter = dead_letter(record, "empty message (tombstone or null value)", None)
    assert letter.raw_value == b"" and letter.source_key is None
    assert letter.consumer_group is None
