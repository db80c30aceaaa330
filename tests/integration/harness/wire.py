"""A tiny blocking Kafka wire client for probes and raw-response checks.

It uses kafka-python's generated message classes for encoding and decoding
and returns the raw response bytes alongside, so tests can run byte-level
checks (see :mod:`leak`) on exactly what a client would receive.
"""

from __future__ import annotations

import socket
import struct
import time
from typing import Any

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse


def wait_for_port(host: str, port: int, timeout: float, proc: Any = None) -> None:
    """Block until host:port accepts a TCP connection.

    ``proc`` (a Popen) is polled so a crashed server fails fast.
    """
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before {host}:{port} opened")
        try:
            with socket.create_connection((host, port), timeout=0.5):
                return
        except OSError as e:
            last = e
            time.sleep(0.05)
    raise TimeoutError(f"{host}:{port} did not accept within {timeout}s (last error: {last})")


class RawKafkaConnection:
    """One blocking connection; request/response in lock-step."""

    def __init__(self, host: str, port: int, timeout: float = 5.0, client_id: str = "rg-probe"):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.settimeout(timeout)
        self.client_id = client_id
        self._cid = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawKafkaConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(buf)}/{n} bytes")
            buf += chunk
        return bytes(buf)

    def send_raw(self, frame: bytes) -> bytes:
        """Send one size-prefixed request frame, return the response body (no size)."""
        self.sock.sendall(frame)
        (size,) = struct.unpack(">i", self._recv_exact(4))
        return self._recv_exact(size)

    def request(self, req: Any, response_cls: Any, version: int) -> tuple[bytes, Any]:
        """Send ``req`` at ``version``; return (raw response body, decoded response)."""
        self._cid += 1
        req.with_header(correlation_id=self._cid, client_id=self.client_id)
        raw = self.send_raw(req.encode(version=version, header=True, framed=True))
        (cid,) = struct.unpack(">i", raw[:4])
        if cid != self._cid:
            raise AssertionError(f"correlation id {cid} != {self._cid}")
        return raw, response_cls.decode(raw, version=version, header=True)


def api_versions(host: str, port: int, version: int = 3, timeout: float = 5.0) -> dict:
    """ApiVersions probe: {api_key: (min, max)} (raises on a non-zero error code)."""
    with RawKafkaConnection(host, port, timeout=timeout) as conn:
        req = ApiVersionsRequest(
            client_software_name="rackguard-it", client_software_version="0", version=version
        )
        _, resp = conn.request(req, ApiVersionsResponse, version)
    if resp.error_code != 0:
        raise RuntimeError(f"ApiVersions v{version} error_code={resp.error_code}")
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


def acks0_produce_frame(
    topic: str, correlation_id: int = 1, version: int = 9, client_id: str = "rg-probe"
) -> bytes:
    """A framed Produce request with acks=0 and one record for partition 0."""
    from kafka.protocol.producer import ProduceRequest
    from kafka.record.memory_records import MemoryRecordsBuilder

    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 16)
    builder.append(timestamp=int(time.time() * 1000), key=None, value=b"probe")
    builder.close()
    topic_data = ProduceRequest.TopicProduceData
    part_data = topic_data.PartitionProduceData
    req = ProduceRequest(
        transactional_id=None,
        acks=0,
        timeout_ms=1000,
        topic_data=[
            topic_data(name=topic, partition_data=[part_data(index=0, records=builder.buffer())])
        ],
        version=version,
    )
    req.with_header(correlation_id=correlation_id, client_id=client_id)
    return req.encode(version=version, header=True, framed=True)


def acks0_produce_gets_response(
    host: str, port: int, topic: str = "rg-probe-acks0", version: int = 9, wait: float = 1.0
) -> bool:
    """True if the broker (wrongly) answers an acks=0 Produce request.

    Kafka never responds to acks=0; Tansu 0.6.0 does, which makes
    kafka-python 3 and aiokafka drop the connection and lose records.
    """
    with RawKafkaConnection(host, port, timeout=wait) as conn:
        conn.sock.sendall(acks0_produce_frame(topic, version=version))
        try:
            return bool(conn.sock.recv(4))
        except TimeoutError:
            return False
