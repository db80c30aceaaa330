"""A continuous idempotent producer (librdkafka), for the loss audits and fault scenarios.

Invariant: a value is recorded as acknowledged only from its delivery report, with the
partition and offset the broker gave; the producer is flushed before returning.
"""

from __future__ import annotations

import time
from typing import Any


def rdkafka_stream(bootstrap: str, topic: str, seconds: float, rate: float,
                   acked: dict[str, tuple[int, int]], errors: list[str],
                   **config: Any) -> None:
    """An idempotent acks=all librdkafka producer writing ``rate`` records/s for
    ``seconds``; each acknowledged value's (partition, offset) goes into ``acked``."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5,
                         "message.timeout.ms": 120000, "client.id": "rg-stream-rdkafka",
                         **config})

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(str(err))
        else:
            acked[msg.value().decode()] = (msg.partition(), msg.offset())

    began, sent = time.monotonic(), 0
    while time.monotonic() - began < seconds:
        time.sleep(max(0.0, began + sent / rate - time.monotonic()))
        value = f"rdkafka-{sent}"
        producer.produce(topic, value=value, key=value, on_delivery=delivered)
        producer.poll(0)
        sent += 1
    assert producer.flush(150) == 0, "librdkafka kept records it never delivered"
