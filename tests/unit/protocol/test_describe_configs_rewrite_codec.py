"""protocol.describe_configs_rewrite against kafka-python's generic codec.

Invariants under test: a client's request (every version, a key list, all keys)
parses into its resources and flags; a response kafka-python encodes (synonyms,
documentation, null values, errors) parses and re-encodes to the same bytes; an
entry added here is what kafka-python decodes; malformed frames raise ProtocolError.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from kafka.protocol.admin import DescribeConfigsRequest as KRequest
from kafka.protocol.admin import DescribeConfigsResponse as KResponse

from protocol.describe_configs_rewrite import (
    DYNAMIC_TOPIC_CONFIG,
    ConfigEntry,
    Synonym,
    encode_describe_configs_response,
    parse_describe_configs_request,
    parse_describe_configs_response,
)
from protocol.headers import parse_request_header
from protocol.primitives import ProtocolError

_Result = KResponse.DescribeConfigsResult
_Entry = _Result.DescribeConfigsResourceResult
_Synonym = _Entry.DescribeConfigsSynonym
LONG = "x" * 200


def kafka_request(version: int, keys: list[str] | None) -> bytes:
    res = KRequest.DescribeConfigsResource
    request = KRequest(version=version, resources=[
        res(resource_type=2, resource_name="orders", configuration_keys=keys),
        res(resource_type=4, resource_name="", configuration_keys=None),
        res(resource_type=2, resource_name=LONG, configuration_keys=["a" * 130])],
        include_synonyms=True, include_documentation=True)
    request.with_header(correlation_id=9, client_id="adm")
    return bytes(request.encode(header=True, framed=True))


@pytest.mark.parametrize("version", range(5))
@pytest.mark.parametrize("keys", [None, ["min.insync.racks", "retention.ms"], []])
def test_request(version: int, keys: list[str] | None) -> None:
    frame = kafka_request(version, keys)
    request = parse_describe_configs_request(frame, parse_request_header(frame))
    assert [(r.resource_type, r.resource_name, r.keys) for r in request.resources] == [
        (2, "orders", None if keys is None else tuple(keys)), (4, "", None),
        (2, LONG, ("a" * 130,))]
    assert request.include_synonyms is (version >= 1)
    assert request.include_documentation is (version >= 3)
    assert request.resources[1].wants("min.insync.racks")
    assert request.resources[0].wants("min.insync.racks") is (keys != [])
    for bad in (frame[:-1], frame + b"\x00"):
        with pytest.raises(ProtocolError):
            parse_describe_configs_request(bad, parse_request_header(frame))


def entry(name: str, value: str | None, synonyms: int = 0, doc: str | None = None,
          source: int = 1) -> Any:
    return _Entry(name=name, value=value, read_only=False, config_source=source,
                  is_default=source == 5, is_sensitive=value is None, config_type=3,
                  documentation=doc,
                  synonyms=[_Synonym(name=f"s{i}", value=None if i else "v", source=4)
                            for i in range(synonyms)])


def kafka_response(version: int, extra: Any = None) -> bytes:
    configs = [entry("cleanup.policy", "delete", synonyms=2, doc="d" * 300),
               entry("secret", None, source=5)]
    if extra is not None:
        configs.append(extra)
    results = [
        _Result(error_code=0, error_message=None, resource_type=2, resource_name="orders",
                configs=configs),
        _Result(error_code=3, error_message="unknown " * 40, resource_type=2,
                resource_name=LONG, configs=[]),
    ]
    response = KResponse(version=version, throttle_time_ms=5, results=results)
    response.with_header(correlation_id=9)
    return bytes(response.encode(header=True, framed=True))


@pytest.mark.parametrize("version", range(5))
def test_response_round_trip_and_added_entry(version: int) -> None:
    frame = kafka_response(version)
    parsed = parse_describe_configs_response(frame, version)
    assert encode_describe_configs_response(version, 9, parsed) == frame
    assert parse_describe_configs_response(memoryview(frame), version) == parsed
    names = [c.name for c in parsed.results[0].configs]
    assert names == ["cleanup.policy", "secret"]
    assert parsed.results[1].error_code == 3
    added = ConfigEntry("min.insync.racks", "2", False, DYNAMIC_TOPIC_CONFIG, False, False,
                        (Synonym("min.insync.racks", "2", DYNAMIC_TOPIC_CONFIG),
                         Synonym("min.insync.racks", "1", 5)), 3, "Racks an ISR must span")
    first = parsed.results[0]
    grown = replace(parsed, results=(replace(first, configs=(*first.configs, added)),
                                     *parsed.results[1:]))
    expected_entry = _Entry(
        name="min.insync.racks", value="2", read_only=False, config_source=1,
        is_default=False, is_sensitive=False, config_type=3,
        documentation="Racks an ISR must span",
        synonyms=[_Synonym(name="min.insync.racks", value="2", source=1),
                  _Synonym(name="min.insync.racks", value="1", source=5)])
    assert encode_describe_configs_response(version, 9, grown) == kafka_response(
        version, expected_entry)


@pytest.mark.parametrize("version", range(5))
def test_malformed_response(version: int) -> None:
    frame = kafka_response(version)
    for i in range(len(frame)):
        with pytest.raises(ProtocolError):
            parse_describe_configs_response(frame[:i], version)
        if i >= 8:
            with pytest.raises(ProtocolError):
                parse_describe_configs_response((i - 4).to_bytes(4, "big") + frame[4:i],
                                                version)
    with pytest.raises(ProtocolError):
        parse_describe_configs_response(frame, 5)
    for i in range(8, len(frame)):
        for value in (0x00, 0x7F, 0x80, 0xFF):
            data = bytearray(frame)
            data[i] = value
            try:
                parse_describe_configs_response(bytes(data), version)
            except ProtocolError:
                pass
