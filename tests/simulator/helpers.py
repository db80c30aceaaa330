"""Test helpers for the simulator tests: free low ports, a raw Kafka client, batches.

The raw client speaks through kafka-python's schema classes over a plain
blocking socket, so tests can check exact error codes on the wire.
"""

from __future__ import annotations

import random
import socket
import struct
import time
from typing import Any

from kafka.record.memory_records import MemoryRecordsBuilder

from simulator import SimulatorConfig, TopicSpec, racked_brokers

RACKS = ["rack-a", "rack-b", "rack-c"]
LOW, HIGH = 20000, 32000


def _free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port_base(count: int) -> int:
    """A base port below 32768 with `count` consecutive free ports."""
    for _ in range(200):
        base = random.randrange(LOW, HIGH - count)
        if all(_free(base + i) for i in range(count)):
            return base
    raise RuntimeError("no free port range below 32768")


def six_broker_config(*topics: TopicSpec, **kwargs: Any) -> SimulatorConfig:
    base = free_port_base(6)
    return SimulatorConfig(brokers=racked_brokers(6, RACKS, port_base=base), topics=list(topics),
                           **kwargs)


def batch(
    values: list[bytes],
    producer_id: int = -1,
    epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
) -> bytes:
    builder = MemoryRecordsBuilder(
        magic=2, compression_type=0, batch_size=1 << 20, transactional=transactional,
        producer_id=producer_id, producer_epoch=epoch, base_sequence=base_sequence,
    )
    now = int(time.time() * 1000)
    for v in values:
        builder.append(now, None, v)
    builder.close()
    return bytes(builder.buffer())


class RawClient:
    """One blocking connection; `call(request, version)` returns the decoded response."""

    def __init__(self, host: str, port: int, timeout: float = 5.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send_frame(self, payload: bytes) -> None:
        self.sock.sendall(struct.pack(">i", len(payload)) + payload)

    def recv_frame(self) -> bytes:
        size = struct.unpack(">i", self._read(4))[0]
        return self._read(size)

    def _read(self, n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by peer")
            buf += chunk
        return buf

    def send(self, request: Any, version: int) -> int:
        self.correlation_id += 1
        request.with_header(correlation_id=self.correlation_id, client_id="raw-test")
        self.sock.sendall(bytes(request.encode(version=version, header=True, framed=True)))
        return self.correlation_id

    def call(self, request: Any, version: int) -> Any:
        corr = self.send(request, version)
        data = self.recv_frame()
        response_cls = request.header.get_response_class()
        response = response_cls.decode(data, version=version, header=True)
        assert response.header.correlation_id == corr
        return response
