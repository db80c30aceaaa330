"""The drain as a process, in front of Tansu: SIGTERM makes ``rackguard serve`` stop
accepting, answer what is in flight and exit by itself (status 0, drain ``clean``),
and a new process on the same ports serves the same producer, which sees every record
acknowledged and no error. (That no acknowledged record is lost or doubled is proven on
real Kafka: tests/system/test_drain_real_kafka.py.)"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from .harness.procs import RackguardProxy, TansuBroker, proxy_unavailable_reason
from .harness.restart import restart

RESTARTS = 3
DRAIN_S = 5.0


def test_sigterm_drains_and_a_new_process_takes_over(
    tansu_upstream: TansuBroker, tmp_path: Path, unique: str
) -> None:
    from confluent_kafka import Producer

    reason = proxy_unavailable_reason()
    if reason:
        pytest.skip(reason)
    proxy = RackguardProxy(tansu_upstream.bootstrap, tmp_path, (tansu_upstream.node_id,),
                           ("--drain-timeout-ms", str(int(DRAIN_S * 1000))))
    proxy.log_path = tmp_path / "rackguard-0.log"
    proxy.start()
    try:
        producer = Producer({"bootstrap.servers": proxy.bootstrap, "acks": "all",
                             "enable.idempotence": True, "linger.ms": 5,
                             "message.timeout.ms": 60000})
        acked: list[str] = []
        errors: list[str] = []
        stop = threading.Event()

        def produce() -> None:
            n = 0
            while not stop.is_set():
                producer.produce(f"drain-{unique}", value=f"v{n}".encode(),
                                 on_delivery=lambda err, msg: errors.append(str(err)) if err
                                 else acked.append(msg.value().decode()))
                producer.poll(0)
                n += 1
                time.sleep(0.005)
            assert producer.flush(60) == 0

        thread = threading.Thread(target=produce)
        thread.start()
        exits = []
        try:
            for n in range(1, RESTARTS + 1):
                time.sleep(1.5)
                exits.append(restart(proxy, tmp_path / f"rackguard-{n}.log", DRAIN_S))
            time.sleep(1.5)
        finally:
            stop.set()
            thread.join(90)
        assert [result for _, _, result in exits] == ["clean"] * RESTARTS
        assert all(took < DRAIN_S for took, _, _ in exits), exits
        assert errors == [] and len(acked) > 100
        assert len(set(acked)) == len(acked)
    finally:
        proxy.stop()
