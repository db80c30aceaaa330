"""The min.insync.racks values set through the Admin API, read from the config topic
(``__rackguard_configs``, :mod:`proxy.admin.store`) once, for the placement command: so
that, pointed at a cluster, it audits and plans with the values the proxies enforce.

Invariant: read-only and once: every partition of the topic from its start to the end
offsets it had when the read began, through kafka-python, never creating the topic (a
topic that does not exist means nothing was ever set); records decoded and applied in
offset order exactly as the proxies do (:mod:`proxy.admin.state`); a record rackguard
cannot read is skipped and counted. The serving path never imports this module.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from proxy.admin.state import CLIENT_HEADER, DynamicConfigs, RecordError, decode_record
from proxy.placement.sources import SourceError

Record = tuple[bytes | None, bytes | None, bytes]  # key, value, the client header


@dataclass(frozen=True, slots=True)
class StoredConfigs:
    """What the config topic holds: the values, and how many records were read/skipped."""

    topic: str
    configs: DynamicConfigs = field(default_factory=DynamicConfigs)
    records: int = 0
    skipped: int = 0
    exists: bool = True

    def count(self) -> int:
        """Values in force (topic values, the cluster default, per-dimension values)."""
        c = self.configs
        return (len(c.topics) + (c.cluster_default is not None) + len(c.dimensions))


def apply_records(topic: str, records: Iterable[Record]) -> StoredConfigs:
    """The values the records leave, applied in the order given (offset order)."""
    configs = DynamicConfigs()
    read = skipped = 0
    for key, value, client in records:
        read += 1
        try:
            configs = configs.apply(decode_record(key, value, client))
        except RecordError:
            skipped += 1
    return StoredConfigs(topic, configs, read, skipped)


def read_config_topic(bootstrap: str, topic: str, timeout_s: float = 10.0) -> StoredConfigs:
    """Reads ``topic`` to its end; SourceError when it cannot within ``timeout_s``."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError

    hint = "(--ignore-config-topic audits with the file and flags only)"
    try:
        consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None,
                                 enable_auto_commit=False, allow_auto_create_topics=False,
                                 client_id="rackguard-placement",
                                 request_timeout_ms=int(timeout_s * 1000) + 5000)
    except KafkaError as exc:
        raise SourceError(f"--bootstrap {bootstrap}: cannot reach the cluster: {exc}") from None
    try:
        found = consumer.partitions_for_topic(topic)
        if not found:
            return StoredConfigs(topic, exists=False)
        parts = [TopicPartition(topic, p) for p in sorted(found)]
        consumer.assign(parts)
        consumer.seek_to_beginning(*parts)
        end = consumer.end_offsets(parts)
        records: list[Record] = []
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < end[tp] for tp in parts):
            if time.monotonic() > deadline:
                raise SourceError(f"config topic {topic}: not read to its end within "
                                  f"{timeout_s:.0f} s {hint}")
            for batch in consumer.poll(timeout_ms=500).values():
                for r in batch:
                    if r.offset < end[TopicPartition(r.topic, r.partition)]:
                        client = dict(r.headers or ()).get(CLIENT_HEADER) or b""
                        records.append((r.key, r.value, client))
    except KafkaError as exc:
        raise SourceError(f"config topic {topic}: {exc} {hint}") from None
    finally:
        consumer.close()
    return apply_records(topic, records)
