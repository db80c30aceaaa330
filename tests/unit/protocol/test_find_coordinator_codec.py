"""FindCoordinator response codec, checked against kafka-python's codec for
every version 0-6 (single coordinator v0-v3, batched v4+)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata import FindCoordinatorResponse

from protocol.addresses import BrokerAddress
from protocol.find_coordinator import rewrite_find_coordinator
from protocol.primitives import ProtocolError
from tests.unit.protocol._codec_checks import (
    check_corruptions,
    check_truncations,
    mapper,
    ok_or_protocol_error,
    with_size,
)

_C = FindCoordinatorResponse.Coordinator

Entry = tuple[str, int, str, int, int, str | None]  # key, node, host, port, error, message


def encode(version: int, entries: list[Entry], throttle: int = 3, corr: int = 9) -> bytes:
    if version >= 4:
        resp = FindCoordinatorResponse(
            version=version,
            throttle_time_ms=throttle,
            coordinators=[
                _C(version=version, key=k, node_id=n, host=h, port=p, error_code=e,
                   error_message=m)
                for k, n, h, p, e, m in entries
            ],
        )
    else:
        (_, n, h, p, e, m) = entries[0]
        resp = FindCoordinatorResponse(
            version=version, throttle_time_ms=throttle, error_code=e, error_message=m,
            node_id=n, host=h, port=p,
        )
    resp.with_header(correlation_id=corr)
    return bytes(resp.encode(header=True, framed=True))


def decode(frame: bytes, version: int) -> Any:
    return FindCoordinatorResponse.decode(frame, version=version, header=True, framed=True)


def expected_after(frame: bytes, version: int) -> tuple[Any, list[BrokerAddress]]:
    resp = decode(frame, version)
    found = []
    items = resp.coordinators if version >= 4 else [resp]
    for c in items:
        if c.node_id >= 0 and c.error_code == 0:
            found.append(BrokerAddress(c.node_id, c.host, c.port))
            c.host, c.port = mapper(c.node_id, c.host, c.port)
        elif c.host:
            c.host, c.port = "", -1
    return resp, found


OK: Entry = ("group-a", 2, "kafka-2.internal", 9092, 0, None)
NOT_AVAILABLE: Entry = ("group-b", -1, "", -1, 15, "COORDINATOR_NOT_AVAILABLE")
ERROR_WITH_HOST: Entry = ("group-c", 3, "kafka-3.internal", 9093, 14, "loading")


@pytest.mark.parametrize("version", range(7))
@pytest.mark.parametrize("entries", [[OK], [NOT_AVAILABLE], [ERROR_WITH_HOST]])
def test_single_and_batched_match_oracle(version: int, entries: list[Entry]) -> None:
    if version == 0:
        entries = [(k, n, h, p, e, None) for k, n, h, p, e, _ in entries]
    frame = encode(version, entries)
    out, found = rewrite_find_coordinator(memoryview(frame), version, mapper)
    expected, expected_found = expected_after(frame, version)
    assert decode(out, version) == expected
    assert found == expected_found
    assert b"internal" not in out
    if entries == [NOT_AVAILABLE]:
        assert out == frame


@pytest.mark.parametrize("version", [4, 5, 6])
def test_batched_mixed(version: int) -> None:
    entries = [OK, NOT_AVAILABLE, ERROR_WITH_HOST, ("txn-1", 1, "kafka-1.internal", 9091, 0, "")]
    frame = encode(version, entries)
    out, found = rewrite_find_coordinator(frame, version, mapper)
    expected, expected_found = expected_after(frame, version)
    assert decode(out, version) == expected
    assert found == expected_found == [
        BrokerAddress(2, "kafka-2.internal", 9092),
        BrokerAddress(1, "kafka-1.internal", 9091),
    ]
    assert b"internal" not in out


def test_golden_v0() -> None:
    frame = bytes.fromhex("00000011" "00000005" "0000" "00000004" "000168" "00000009")
    out, found = rewrite_find_coordinator(frame, 0, lambda n, h, p: ("p", 7))
    assert found == [BrokerAddress(4, "h", 9)]
    assert out == bytes.fromhex("00000011" "00000005" "0000" "00000004" "000170" "00000007")


def test_golden_v4() -> None:
    body = bytes.fromhex(
        "00000001" "00"  # correlation id, header tagged fields
        "00000000"  # throttle
        "02"  # 1 coordinator
        "0267" "00000004" "0268" "00000009" "0000" "00" "00"  # "g", 4, "h", 9, 0, null, tags
        "00"  # tagged fields
    )
    out, found = rewrite_find_coordinator(with_size(body), 4, lambda n, h, p: ("pp", 7))
    assert found == [BrokerAddress(4, "h", 9)]
    assert out == with_size(body.replace(bytes.fromhex("026800000009"),
                                         bytes.fromhex("037070" "00000007")))


@pytest.mark.parametrize("version", range(7))
def test_malformed_raises_protocol_error(version: int) -> None:
    entries = [OK, ERROR_WITH_HOST] if version >= 4 else [OK]
    if version == 0:
        entries = [OK[:5] + (None,)]
    frame = encode(version, entries)
    check_truncations(lambda b: rewrite_find_coordinator(b, version, mapper), frame, strict=True)
    check_corruptions(lambda b: rewrite_find_coordinator(b, version, mapper), frame)
    for bad in (-1, 7):
        with pytest.raises(ProtocolError):
            rewrite_find_coordinator(frame, bad, mapper)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120), st.integers(0, 6))
def test_garbage_raises_protocol_error_only(data: bytes, version: int) -> None:
    ok_or_protocol_error(lambda b: rewrite_find_coordinator(b, version, mapper), data)
    ok_or_protocol_error(lambda b: rewrite_find_coordinator(b, version, mapper), with_size(data))


_entry = st.tuples(
    st.text(max_size=10),
    st.integers(-1, 2**31 - 1),
    st.text(max_size=10),
    st.integers(-1, 65535),
    st.sampled_from([0, 0, 0, 14, 15, 16]),
    st.none() | st.text(max_size=10),
)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 6), st.lists(_entry, min_size=1, max_size=5), st.integers(0, 2**31 - 1))
def test_roundtrip_random(version: int, entries: list[Entry], throttle: int) -> None:
    if version == 0:
        entries = [e[:5] + (None,) for e in entries]
    frame = encode(version, entries, throttle)
    out, found = rewrite_find_coordinator(frame, version, mapper)
    expected, expected_found = expected_after(frame, version)
    assert decode(out, version) == expected
    assert found == expected_found
