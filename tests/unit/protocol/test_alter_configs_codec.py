"""protocol.alter_configs against kafka-python's generic codec (Kafka's schemas).

Invariants under test: a request kafka-python encodes (both APIs, every version,
several resources, null values, multi-byte lengths) parses into exactly its
entries and re-encodes to the same bytes; a rebuilt request without some entries is
what kafka-python encodes for the smaller request; a response built here is what
kafka-python decodes, and one kafka-python encodes parses back; the merge answers
every resource in request order, the broker's refusal winning; malformed frames
raise ProtocolError and nothing else.
"""

from __future__ import annotations

from typing import Any

import pytest
from kafka.protocol.admin import (
    AlterConfigsRequest as KAlter,
)
from kafka.protocol.admin import (
    AlterConfigsResponse as KAlterResponse,
)
from kafka.protocol.admin import (
    IncrementalAlterConfigsRequest as KIncremental,
)
from kafka.protocol.admin import (
    IncrementalAlterConfigsResponse as KIncrementalResponse,
)

from protocol.alter_configs import (
    ALTER_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS,
    AlterConfigsResponse,
    ResourceResult,
    build_alter_configs_request,
    build_alter_configs_response,
    encode_alter_configs_request,
    merge_alter_configs_responses,
    parse_alter_configs_request,
    parse_alter_configs_response,
)
from protocol.headers import parse_request_header
from protocol.primitives import ProtocolError
from tests.unit.protocol._codec_checks import check_corruptions, check_truncations

CASES = [(ALTER_CONFIGS, v) for v in range(3)] + [(INCREMENTAL_ALTER_CONFIGS, v)
                                                   for v in range(2)]
LONG = "t" * 200
RESOURCES: list[tuple[int, str, list[tuple[str, int, str | None]]]] = [
    (2, "orders", [("min.insync.racks", 0, "2"), ("retention.ms", 0, "1000")]),
    (4, "", [("min.insync.racks", 1, None)]),
    (2, LONG, [("é" * 80, 0, "x" * 300)]),
    (2, "empty", []),
]


def kafka_request(api_key: int, version: int, resources: list[Any], validate: bool) -> bytes:
    cls = KAlter if api_key == ALTER_CONFIGS else KIncremental
    res_cls = cls.AlterConfigsResource
    cfg_cls = res_cls.AlterableConfig
    out = []
    for rtype, rname, configs in resources:
        entries = []
        for name, op, value in configs:
            fields: dict[str, Any] = {"name": name, "value": value}
            if api_key == INCREMENTAL_ALTER_CONFIGS:
                fields["config_operation"] = op
            entries.append(cfg_cls(**fields))
        out.append(res_cls(resource_type=rtype, resource_name=rname, configs=entries))
    request = cls(version=version, resources=out, validate_only=validate)
    request.with_header(correlation_id=41, client_id="admin-1")
    return bytes(request.encode(header=True, framed=True))


@pytest.mark.parametrize(("api_key", "version"), CASES)
@pytest.mark.parametrize("validate", [False, True])
def test_request_round_trip(api_key: int, version: int, validate: bool) -> None:
    frame = kafka_request(api_key, version, RESOURCES, validate)
    header = parse_request_header(frame)
    request = parse_alter_configs_request(frame, header)
    assert request.validate_only is validate
    assert [(r.resource_type, r.resource_name) for r in request.resources] == [
        (t, n) for t, n, _ in RESOURCES]
    expected_ops = api_key == INCREMENTAL_ALTER_CONFIGS
    assert [[(c.name, c.operation if expected_ops else 0, c.value) for c in r.configs]
            for r in request.resources] == [
        [(n, op if expected_ops else 0, v) for n, op, v in cfgs] for _, _, cfgs in RESOURCES]
    assert encode_alter_configs_request(frame, header, request) == frame
    assert parse_alter_configs_request(memoryview(frame), header) == request


@pytest.mark.parametrize(("api_key", "version"), CASES)
def test_rebuilt_request_is_what_kafka_python_encodes(api_key: int, version: int) -> None:
    from dataclasses import replace
    frame = kafka_request(api_key, version, RESOURCES, False)
    header = parse_request_header(frame)
    request = parse_alter_configs_request(frame, header)
    kept = tuple(replace(r, configs=tuple(c for c in r.configs if c.name != "min.insync.racks"))
                 for r in request.resources if r.resource_type == 2)
    smaller = [(t, n, [c for c in cfgs if c[0] != "min.insync.racks"])
               for t, n, cfgs in RESOURCES if t == 2]
    assert encode_alter_configs_request(frame, header, replace(request, resources=kept)) == (
        kafka_request(api_key, version, smaller, False))


def kafka_response(api_key: int, version: int, results: list[tuple[int, str | None, int, str]]
                   ) -> bytes:
    cls = KAlterResponse if api_key == ALTER_CONFIGS else KIncrementalResponse
    item = cls.AlterConfigsResourceResponse
    response = cls(version=version, throttle_time_ms=7, responses=[
        item(error_code=e, error_message=m, resource_type=t, resource_name=n)
        for e, m, t, n in results])
    response.with_header(correlation_id=41)
    return bytes(response.encode(header=True, framed=True))


RESULTS = [(0, None, 2, "orders"), (40, "bad " * 50, 4, ""), (29, "no", 2, LONG)]


@pytest.mark.parametrize(("api_key", "version"), CASES)
def test_response_both_ways(api_key: int, version: int) -> None:
    frame = kafka_response(api_key, version, RESULTS)
    parsed = parse_alter_configs_response(frame, api_key, version)
    assert parsed.throttle_time_ms == 7
    assert [(r.error_code, r.error_message, r.resource_type, r.resource_name)
            for r in parsed.results] == RESULTS
    assert build_alter_configs_response(api_key, version, 41, parsed) == frame


@pytest.mark.parametrize(("api_key", "version"), CASES)
def test_merge_in_request_order(api_key: int, version: int) -> None:
    frame = kafka_request(api_key, version, RESOURCES, False)
    request = parse_alter_configs_request(frame, parse_request_header(frame))
    # the broker saw "orders" (refused it) and LONG, "empty"; the proxy answers "" and orders
    upstream = parse_alter_configs_response(kafka_response(
        api_key, version, [(29, "denied", 2, "orders"), (0, None, 2, "empty"),
                           (0, None, 2, LONG)]), api_key, version)
    local = {(4, ""): ResourceResult(40, "not an integer", 4, ""),
             (2, "orders"): ResourceResult(0, None, 2, "orders")}
    merged = merge_alter_configs_responses(request, 41, upstream, local)
    assert merged == kafka_response(api_key, version, [
        (29, "denied", 2, "orders"), (40, "not an integer", 4, ""), (0, None, 2, LONG),
        (0, None, 2, "empty")]).replace(b"\x00\x00\x00\x07", b"\x00\x00\x00\x07", 1)
    alone = merge_alter_configs_responses(request, 41, None, {
        r.key: ResourceResult(0, None, *r.key) for r in request.resources})
    parsed = parse_alter_configs_response(alone, api_key, version)
    assert [r.key for r in parsed.results] == [r.key for r in request.resources]
    with pytest.raises(ValueError):
        merge_alter_configs_responses(request, 41, AlterConfigsResponse(0, ()), {})


@pytest.mark.parametrize(("api_key", "version"), CASES)
def test_malformed_input_raises_protocol_error(api_key: int, version: int) -> None:
    frame = kafka_request(api_key, version, RESOURCES[:2], True)
    header = parse_request_header(frame)

    def parse(data: bytes) -> object:
        return parse_alter_configs_request(data, header)

    for i in range(header.body_offset, len(frame)):
        with pytest.raises(ProtocolError):
            parse(frame[:i])
    with pytest.raises(ProtocolError):
        parse(frame + b"\x00")
    check_corruptions(parse, frame)
    response = kafka_response(api_key, version, RESULTS[:2])
    check_truncations(lambda d: parse_alter_configs_response(d, api_key, version), response,
                      strict=True)
    check_corruptions(lambda d: parse_alter_configs_response(d, api_key, version), response)
    with pytest.raises(ProtocolError):
        parse_alter_configs_response(response, api_key, 9)


@pytest.mark.parametrize(("api_key", "version"), CASES)
def test_proxy_request_is_what_kafka_python_encodes(api_key: int, version: int) -> None:
    frame = kafka_request(api_key, version, RESOURCES, True)
    request = parse_alter_configs_request(frame, parse_request_header(frame))
    assert build_alter_configs_request(request, 41, "admin-1") == frame
