"""AlterConfigs (api key 33, v0-v2) and IncrementalAlterConfigs (44, v0-v1): requests
decoded into per-resource entries and rebuilt, responses built, parsed and merged.

The two APIs share one shape: a list of resources, each with a list of configs,
and ``validate_only``; IncrementalAlterConfigs adds an operation per config. Their
responses are identical: one (error, message, type, name) per resource. The proxy
takes some entries out of a request, forwards the rest, and merges the broker's
per-resource answers with its own in request order, as Produce is split and
merged (:mod:`protocol.produce_response`).

Invariants: ``encode_alter_configs_request(parse(...))`` gives back the request's
bytes (tagged fields kept raw); every parser raises
:class:`~protocol.primitives.ProtocolError` and nothing else for bad
input, trailing bytes included. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from protocol._message import NO_TAGS, Reader, Writer, request_frame
from protocol._wire import check_frame, guard
from protocol.headers import RequestHeader, response_frame
from protocol.primitives import (
    Buffer,
    ProtocolError,
    encode_string,
    pack_int16,
    pack_int32,
)

ALTER_CONFIGS = 33
INCREMENTAL_ALTER_CONFIGS = 44
MAX_VERSIONS = {ALTER_CONFIGS: 2, INCREMENTAL_ALTER_CONFIGS: 1}
FLEXIBLE_FROM = {ALTER_CONFIGS: 2, INCREMENTAL_ALTER_CONFIGS: 1}

# IncrementalAlterConfigs operations
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

ResourceKey = tuple[int, str]  # (resource type, resource name)


@dataclass(frozen=True, slots=True)
class AlterableConfig:
    name: str
    value: str | None
    operation: int = SET  # IncrementalAlterConfigs only; AlterConfigs sets every entry
    tags: bytes = b""


@dataclass(frozen=True, slots=True)
class AlterResource:
    resource_type: int
    resource_name: str
    configs: tuple[AlterableConfig, ...]
    tags: bytes = b""

    @property
    def key(self) -> ResourceKey:
        return (self.resource_type, self.resource_name)


@dataclass(frozen=True, slots=True)
class AlterConfigsRequest:
    api_key: int  # ALTER_CONFIGS or INCREMENTAL_ALTER_CONFIGS
    version: int
    resources: tuple[AlterResource, ...]
    validate_only: bool
    tags: bytes = b""


@dataclass(frozen=True, slots=True)
class ResourceResult:
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str
    tags: bytes = b""

    @property
    def key(self) -> ResourceKey:
        return (self.resource_type, self.resource_name)


@dataclass(frozen=True, slots=True)
class AlterConfigsResponse:
    throttle_time_ms: int
    results: tuple[ResourceResult, ...]
    tags: bytes = b""


def _check(api_key: int, version: int) -> bool:
    """Whether this (key, version) is flexible; raises ProtocolError if not handled."""
    highest = MAX_VERSIONS.get(api_key)
    if highest is None or not 0 <= version <= highest:
        raise ProtocolError(f"unsupported config API {api_key} v{version}")
    return version >= FLEXIBLE_FROM[api_key]


@guard
def parse_alter_configs_request(frame: Buffer, header: RequestHeader) -> AlterConfigsRequest:
    """The resources and entries of an AlterConfigs or IncrementalAlterConfigs request."""
    api_key, version = header.api_key, header.api_version
    r = Reader(frame, header.body_offset, _check(api_key, version))
    incremental = api_key == INCREMENTAL_ALTER_CONFIGS
    resources = []
    for _ in range(r.array()):
        rtype = r.int8()
        rname = r.string()
        configs = []
        for _ in range(r.array()):
            name = r.string()
            operation = r.int8() if incremental else SET
            value = r.nullable_string()
            configs.append(AlterableConfig(name, value, operation, r.tags()))
        resources.append(AlterResource(rtype, rname, tuple(configs), r.tags()))
    validate_only = r.boolean()
    tags = r.tags()
    r.end()
    return AlterConfigsRequest(api_key, version, tuple(resources), validate_only, tags)


def encode_alter_configs_request(frame: Buffer, header: RequestHeader,
                                 request: AlterConfigsRequest) -> bytes:
    """``request`` as a frame behind the header of ``frame`` (the client's, unchanged)."""
    return request_frame(frame, header.body_offset, _request_body(request))


def _request_body(request: AlterConfigsRequest) -> bytes:
    w = Writer(_check(request.api_key, request.version))
    incremental = request.api_key == INCREMENTAL_ALTER_CONFIGS
    w.array(len(request.resources))
    for res in request.resources:
        w.int8(res.resource_type)
        w.string(res.resource_name)
        w.array(len(res.configs))
        for c in res.configs:
            w.string(c.name)
            if incremental:
                w.int8(c.operation)
            w.string(c.value)
            w.tags(c.tags)
        w.tags(res.tags)
    w.boolean(request.validate_only)
    w.tags(request.tags)
    return w.body()


def encode_alter_configs_response_body(api_key: int, version: int,
                                       response: AlterConfigsResponse) -> bytes:
    w = Writer(_check(api_key, version))
    w.int32(response.throttle_time_ms)
    w.array(len(response.results))
    for res in response.results:
        w.int16(res.error_code)
        w.string(res.error_message)
        w.int8(res.resource_type)
        w.string(res.resource_name)
        w.tags(res.tags)
    w.tags(response.tags)
    return w.body()


def build_alter_configs_response(api_key: int, version: int, correlation_id: int,
                                 response: AlterConfigsResponse) -> bytes:
    """A complete response frame (size prefix and header included)."""
    body = encode_alter_configs_response_body(api_key, version, response)
    return response_frame(correlation_id, api_key, version, body)


@guard
def parse_alter_configs_response(frame: Buffer, api_key: int, version: int
                                 ) -> AlterConfigsResponse:
    flexible = _check(api_key, version)
    r = Reader(frame, check_frame(frame, api_key, version, MAX_VERSIONS[api_key]), flexible)
    throttle = r.int32()
    results = []
    for _ in range(r.array()):
        error = r.int16()
        message = r.nullable_string()
        rtype = r.int8()
        rname = r.string()
        results.append(ResourceResult(error, message, rtype, rname, r.tags()))
    tags = r.tags()
    r.end()
    return AlterConfigsResponse(throttle, tuple(results), tags)


def merge_alter_configs_responses(
    request: AlterConfigsRequest,
    correlation_id: int,
    upstream: AlterConfigsResponse | None,
    local: Mapping[ResourceKey, ResourceResult],
) -> bytes:
    """One response frame answering every resource of ``request``, in request order.

    A resource in ``local`` is answered from there unless the broker answered it with
    an error (the broker's refusal wins); every other resource takes the broker's
    answer. A resource neither side answered is an internal error (ValueError).
    """
    theirs = {res.key: res for res in upstream.results} if upstream is not None else {}
    results = []
    for res in request.resources:
        key = res.key
        broker = theirs.get(key)
        mine = local.get(key)
        if mine is not None and (broker is None or broker.error_code == 0):
            results.append(mine)
        elif broker is not None:
            results.append(broker)
        else:
            raise ValueError(f"no answer for resource {key}")
    response = AlterConfigsResponse(
        upstream.throttle_time_ms if upstream is not None else 0, tuple(results),
        upstream.tags if upstream is not None else b"")
    return build_alter_configs_response(request.api_key, request.version, correlation_id,
                                        response)


def build_alter_configs_request(request: AlterConfigsRequest, correlation_id: int,
                                client_id: str | None) -> bytes:
    """A complete request frame of the proxy's own (header v1, or v2 when flexible)."""
    flexible = _check(request.api_key, request.version)
    head = (pack_int16(request.api_key) + pack_int16(request.version)
            + pack_int32(correlation_id) + encode_string(client_id, False)
            + (NO_TAGS if flexible else b""))
    body = head + _request_body(request)
    return pack_int32(len(body)) + body
