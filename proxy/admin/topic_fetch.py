"""One partition's Fetch, built and read (pure: no I/O): what the config topic's follower
sends to the partition's leader and what it takes from the answer.

Fetch v4-v12 (topics by name; the broker's highest in that range), read_uncommitted, no
fetch session (a full fetch every time: one partition, so a session would save nothing),
no rack id (the leader itself answers). kafka-python's generic codec encodes the request
and decodes the answer; its record-batch reader (``MemoryRecords``) reads the records,
compressed or not.

Invariant: :func:`read_fetch` returns the records at and after the offset asked for, in
offset order, and the offset to ask next, which moves past every batch read (a batch the
log cleaner emptied too), never back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.record import MemoryRecords

from protocol.primitives import Buffer

FETCH = 1
FETCH_MIN = 4  # isolation level, the oldest version Kafka 4 takes
FETCH_MAX = 12  # the last version that names topics (v13 names topic ids)
MAX_BYTES = 1 << 20  # the config topic holds one small record per configured resource

# partition errors that mean "ask the view who leads now"
NOT_LEADER = frozenset({
    3,  # UNKNOWN_TOPIC_OR_PARTITION (a broker that lost it, or the view is old)
    5,  # LEADER_NOT_AVAILABLE
    6,  # NOT_LEADER_OR_FOLLOWER
    56,  # KAFKA_STORAGE_ERROR
    74,  # FENCED_LEADER_EPOCH
    75,  # UNKNOWN_LEADER_EPOCH
})
OFFSET_OUT_OF_RANGE = 1


class Record(NamedTuple):
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class Fetched:
    error: int  # the partition's error code (0: the records below are good)
    high_watermark: int  # -1 when the answer had none
    log_start: int  # -1 when the answer had none
    records: tuple[Record, ...]
    next_offset: int  # where the next fetch starts


def fetch_request(topic: str, partition: int, offset: int, wait_ms: int, version: int
                  ) -> Any:
    """The Fetch of ``topic``'s ``partition`` from ``offset``, waiting up to ``wait_ms``
    for a record when there is none yet."""
    topic_cls = FetchRequest.FetchTopic
    return FetchRequest(
        version=version, replica_id=-1, max_wait_ms=wait_ms, min_bytes=1,
        max_bytes=MAX_BYTES, isolation_level=0, session_id=0, session_epoch=-1,
        topics=[topic_cls(topic=topic, partitions=[topic_cls.FetchPartition(
            partition=partition, current_leader_epoch=-1, fetch_offset=offset,
            last_fetched_epoch=-1, log_start_offset=-1, partition_max_bytes=MAX_BYTES)])],
        forgotten_topics_data=[], rack_id="")


def read_fetch(frame: Buffer, version: int, topic: str, partition: int, offset: int
               ) -> Fetched:
    """The answer to :func:`fetch_request` (``frame`` with its size prefix); raises
    ValueError for an answer that does not name the partition."""
    answer = FetchResponse.decode(bytes(frame), version=version, header=True, framed=True)
    if getattr(answer, "error_code", 0):
        return Fetched(answer.error_code, -1, -1, (), offset)
    for t in answer.responses:
        if t.topic != topic:
            continue
        for p in t.partitions:
            if p.partition_index == partition:
                return _partition(p, offset)
    raise ValueError(f"the Fetch answer does not name {topic} partition {partition}")


def _partition(p: Any, offset: int) -> Fetched:
    log_start = getattr(p, "log_start_offset", -1)
    if p.error_code != 0 or not p.records:
        return Fetched(p.error_code, p.high_watermark, log_start, (), offset)
    records: list[Record] = []
    next_offset = offset
    for batch in MemoryRecords(bytes(p.records)):
        control = getattr(batch, "is_control_batch", False)
        for record in batch:
            if record.offset >= next_offset and not control:
                records.append(Record(record.offset, record.key, record.value,
                                      tuple(record.headers or ())))
            next_offset = max(next_offset, record.offset + 1)
        # a batch the log cleaner emptied still moves the offset past it
        next_offset = max(next_offset, getattr(batch, "next_offset", next_offset))
    return Fetched(0, p.high_watermark, log_start, tuple(records), next_offset)
