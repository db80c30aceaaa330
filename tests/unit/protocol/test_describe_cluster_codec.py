"""DescribeCluster response codec, checked against kafka-python's codec for
every version 0-2."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import DescribeClusterResponse

from protocol.addresses import BrokerAddress
from protocol.describe_cluster import (
    describe_cluster_endpoint_type,
    rewrite_describe_cluster,
)
from protocol.primitives import ProtocolError
from tests.unit.protocol._codec_checks import (
    check_corruptions,
    check_truncations,
    mapper,
    ok_or_protocol_error,
    with_size,
)

_B = DescribeClusterResponse.DescribeClusterBroker
Broker = tuple[int, str, int, str | None, bool]

BROKERS: list[Broker] = [
    (1, "kafka-1.internal", 9092, "rack-a", False),
    (2, "kafka-2.internal", 9093, None, True),
    (7, "10.1.2.3", 19092, "rack-\u00e9", False),
]


def encode(
    version: int,
    brokers: list[Broker],
    endpoint_type: int = 1,
    error_message: str | None = None,
    ops: set[int] | None = None,
    corr: int = 5,
) -> bytes:
    resp = DescribeClusterResponse(
        version=version,
        throttle_time_ms=4,
        error_code=0,
        error_message=error_message,
        endpoint_type=endpoint_type,
        cluster_id="cluster-xyz",
        controller_id=2,
        brokers=[
            _B(version=version, broker_id=n, host=h, port=p, rack=r, is_fenced=f)
            for n, h, p, r, f in brokers
        ],
        authorized_operations=ops,
    )
    resp.with_header(correlation_id=corr)
    return bytes(resp.encode(header=True, framed=True))


def decode(frame: bytes, version: int) -> Any:
    return DescribeClusterResponse.decode(frame, version=version, header=True, framed=True)


def expected_after(frame: bytes, version: int) -> Any:
    resp = decode(frame, version)
    for b in resp.brokers:
        b.host, b.port = mapper(b.broker_id, b.host, b.port)
    return resp


@pytest.mark.parametrize("version", range(3))
@pytest.mark.parametrize("error_message", [None, "oops"])
def test_rewrite_matches_oracle(version: int, error_message: str | None) -> None:
    frame = encode(version, BROKERS, error_message=error_message, ops={2, 3})
    out, brokers = rewrite_describe_cluster(memoryview(frame), version, mapper)
    assert decode(out, version) == expected_after(frame, version)
    assert brokers == [BrokerAddress(n, h, p, r) for n, h, p, r, _ in BROKERS]
    assert b"internal" not in out and b"10.1.2.3" not in out
    assert describe_cluster_endpoint_type(out, version) == 1


@pytest.mark.parametrize("version", [1, 2])
def test_endpoint_type_controllers(version: int) -> None:
    frame = encode(version, BROKERS[:1], endpoint_type=2)
    assert describe_cluster_endpoint_type(frame, version) == 2
    out, _ = rewrite_describe_cluster(frame, version, mapper)
    assert decode(out, version).endpoint_type == 2


def test_golden_v0() -> None:
    body = bytes.fromhex(
        "00000001" "00"  # correlation id, header tagged fields
        "00000000" "0000" "00"  # throttle, error code, null error message
        "0263" "00000001"  # cluster id "c", controller id 1
        "02" "00000001" "0268" "00000009" "00" "00"  # brokers: [1, "h", 9, null rack, tags]
        "80000000" "00"  # cluster authorized operations, tagged fields
    )
    out, brokers = rewrite_describe_cluster(with_size(body), 0, lambda n, h, p: ("pp", 7))
    assert brokers == [BrokerAddress(1, "h", 9, None)]
    assert out == with_size(
        body.replace(bytes.fromhex("026800000009"), bytes.fromhex("037070" "00000007"))
    )


@pytest.mark.parametrize("version", range(3))
def test_malformed_raises_protocol_error(version: int) -> None:
    frame = encode(version, BROKERS[:2])

    def fn(b: bytes) -> object:
        return rewrite_describe_cluster(b, version, mapper)

    check_truncations(fn, frame, strict=True)
    check_truncations(lambda b: describe_cluster_endpoint_type(b, version), frame, strict=False)
    check_corruptions(fn, frame)
    for bad in (-1, 3):
        with pytest.raises(ProtocolError):
            rewrite_describe_cluster(frame, bad, mapper)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=120), st.integers(0, 2))
def test_garbage_raises_protocol_error_only(data: bytes, version: int) -> None:
    for b in (data, with_size(data)):
        ok_or_protocol_error(lambda x: rewrite_describe_cluster(x, version, mapper), b)
        ok_or_protocol_error(lambda x: describe_cluster_endpoint_type(x, version), b)


_broker = st.tuples(
    st.integers(0, 2**31 - 1),
    st.text(max_size=12),
    st.integers(0, 65535),
    st.none() | st.text(max_size=8),
    st.booleans(),
)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2), st.lists(_broker, max_size=8), st.none() | st.text(max_size=8))
def test_roundtrip_random(version: int, brokers: list[Broker], message: str | None) -> None:
    frame = encode(version, brokers, error_message=message)
    out, found = rewrite_describe_cluster(frame, version, mapper)
    assert decode(out, version) == expected_after(frame, version)
    assert found == [BrokerAddress(n, h, p, r) for n, h, p, r, _ in brokers]
