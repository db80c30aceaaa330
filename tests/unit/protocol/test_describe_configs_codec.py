"""protocol.describe_configs, against kafka-python's generic codec.

Invariant under test: the request is byte for byte what kafka-python encodes
(v0-4, a key list or all keys, names needing multi-byte lengths); the reader
returns exactly the min.insync.replicas of every topic kafka-python decodes
without an error (synonyms, documentation, null values and tagged fields
skipped), from bytes or a memoryview, paused once per result; malformed
frames raise ProtocolError and nothing else.
"""

from __future__ import annotations

import pytest
from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse

from protocol.describe_configs import (
    CLIENT_ID,
    MIN_INSYNC_REPLICAS,
    encode_describe_configs,
    read_min_insync_replicas,
)
from protocol.primitives import ProtocolError

_R = DescribeConfigsResponse
_Result = _R.DescribeConfigsResult
_Entry = _Result.DescribeConfigsResourceResult
_Synonym = _Entry.DescribeConfigsSynonym
NAMES = ["a", "é" * 70, "x" * 200, "orders"]
BAD_VALUE_TOPIC = "n" * 300


@pytest.mark.parametrize("version", range(5))
@pytest.mark.parametrize("keys", [(MIN_INSYNC_REPLICAS,), None, ()])
def test_request_is_what_kafka_python_encodes(version: int, keys: tuple[str, ...] | None
                                              ) -> None:
    res = DescribeConfigsRequest.DescribeConfigsResource
    request = DescribeConfigsRequest(
        version=version,
        resources=[res(resource_type=2, resource_name=n,
                       configuration_keys=None if keys is None else list(keys))
                   for n in NAMES],
        include_synonyms=False, include_documentation=False)
    request.with_header(correlation_id=77, client_id=CLIENT_ID)
    pauses: list[int] = []
    ours = encode_describe_configs(NAMES * 100, version, 77, keys, lambda: pauses.append(1))
    assert encode_describe_configs(NAMES, version, 77, keys) == bytes(
        request.encode(header=True, framed=True))
    assert len(pauses) == 1  # every 256 topics
    assert len(ours) > 0


def entry(name: str, value: str | None, synonyms: int = 0, doc: str | None = None) -> object:
    return _Entry(name=name, value=value, read_only=False, config_source=1, is_default=False,
                  is_sensitive=value is None, config_type=3, documentation=doc,
                  synonyms=[_Synonym(name=f"s{i}", value=None if i else "v", source=4)
                            for i in range(synonyms)])


def response(version: int) -> bytes:
    results = [
        _Result(error_code=0, error_message=None, resource_type=2, resource_name="t1", configs=[
            entry("cleanup.policy", "delete", synonyms=2, doc="d" * 300),
            entry(MIN_INSYNC_REPLICAS, "3", synonyms=1),
            entry("secret", None)]),
        _Result(error_code=3, error_message="unknown " * 40, resource_type=2,
                resource_name="gone", configs=[entry(MIN_INSYNC_REPLICAS, "2")]),
        _Result(error_code=0, error_message=None, resource_type=2, resource_name=BAD_VALUE_TOPIC,
                configs=[entry(MIN_INSYNC_REPLICAS, "many")]),
        _Result(error_code=0, error_message=None, resource_type=2, resource_name="nulled",
                configs=[entry(MIN_INSYNC_REPLICAS, None)]),
        _Result(error_code=0, error_message=None, resource_type=2, resource_name="é",
                configs=[entry("min.insync.replicaz", "9"), entry(MIN_INSYNC_REPLICAS, "2")]),
        _Result(error_code=0, error_message=None, resource_type=2, resource_name="none",
                configs=[]),
    ]
    resp = _R(version=version, throttle_time_ms=5, results=results)
    resp.with_header(correlation_id=3)
    return bytes(resp.encode(header=True, framed=True))


@pytest.mark.parametrize("version", range(5))
def test_reader_finds_each_topics_value(version: int) -> None:
    data = response(version)
    pauses: list[int] = []
    expected = {"t1": 3, "é": 2, BAD_VALUE_TOPIC: "many"}  # not a number: kept as it is
    assert read_min_insync_replicas(data, version) == expected
    assert read_min_insync_replicas(memoryview(bytearray(data)), version,
                                    lambda: pauses.append(1)) == expected
    assert len(pauses) == 6


@pytest.mark.parametrize("version", range(5))
def test_reader_rejects_malformed_frames(version: int) -> None:
    data = response(version)
    body = data[4:]
    for bad in (data[:-1], data + b"\x00", (len(body) + 1).to_bytes(4, "big") + body + b"\x00",
                data[:20], b"\x00\x00\x00\x01\x00"):
        if bad[:4] != (len(bad) - 4).to_bytes(4, "big"):
            bad = (len(bad) - 4).to_bytes(4, "big") + bad[4:]
        with pytest.raises(ProtocolError):
            read_min_insync_replicas(bad, version)
    with pytest.raises(ProtocolError):
        read_min_insync_replicas(data[:-1], version)  # the size prefix no longer matches
    with pytest.raises(ProtocolError):
        read_min_insync_replicas(data, 5)
