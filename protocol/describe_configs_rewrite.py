"""DescribeConfigs (api key 32, v0-v4) as a client sends it and as the proxy answers it:
the request decoded into resources, the response decoded whole, entries added to
it, and encoded again.

:mod:`protocol.describe_configs` is the poller's fast path (one config of
thousands of topics, nothing else decoded); this module serves the rarer client
request, where the proxy adds configs of its own (``min.insync.racks``) to the
broker's answer for some resources. Version differences: v0 has ``is_default``
where v1+ has ``config_source`` and synonyms; v3+ adds ``config_type`` and
``documentation``; v4 is flexible (tagged fields kept raw).

Invariants: ``encode_describe_configs_response(parse(...))`` gives back the
response's bytes; every parser raises
:class:`~protocol.primitives.ProtocolError` and nothing else for bad
input, trailing bytes included. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol._message import Reader, Writer
from protocol._wire import check_frame, guard
from protocol.headers import RequestHeader, response_frame
from protocol.primitives import Buffer, ProtocolError

API_KEY = 32
MAX_VERSION = 4
FLEXIBLE_FROM = 4

# ConfigSource values (org.apache.kafka.common.requests.DescribeConfigsResponse)
UNKNOWN_SOURCE = 0
DYNAMIC_TOPIC_CONFIG = 1
DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
# ConfigType values
INT_TYPE = 3


@dataclass(frozen=True, slots=True)
class DescribeResource:
    resource_type: int
    resource_name: str
    keys: tuple[str, ...] | None  # None: every key
    tags: bytes = b""

    def wants(self, key: str) -> bool:
        return self.keys is None or key in self.keys


@dataclass(frozen=True, slots=True)
class DescribeConfigsRequest:
    version: int
    resources: tuple[DescribeResource, ...]
    include_synonyms: bool
    include_documentation: bool
    tags: bytes = b""


@dataclass(frozen=True, slots=True)
class Synonym:
    name: str
    value: str | None
    source: int
    tags: bytes = b""


@dataclass(frozen=True, slots=True)
class ConfigEntry:
    name: str
    value: str | None
    read_only: bool
    source: int  # v1+; UNKNOWN_SOURCE when read from v0
    is_default: bool  # v0 carries it; v1+ derive it from the source
    is_sensitive: bool
    synonyms: tuple[Synonym, ...] = ()  # v1+
    config_type: int = 0  # v3+
    documentation: str | None = None  # v3+
    tags: bytes = b""


@dataclass(frozen=True, slots=True)
class DescribeResult:
    error_code: int
    error_message: str | None
    resource_type: int
    resource_name: str
    configs: tuple[ConfigEntry, ...]
    tags: bytes = b""


@dataclass(frozen=True, slots=True)
class DescribeConfigsResponse:
    throttle_time_ms: int
    results: tuple[DescribeResult, ...]
    tags: bytes = b""


def _flexible(version: int) -> bool:
    if not 0 <= version <= MAX_VERSION:
        raise ProtocolError(f"unsupported DescribeConfigs version {version}")
    return version >= FLEXIBLE_FROM


@guard
def parse_describe_configs_request(frame: Buffer, header: RequestHeader
                                   ) -> DescribeConfigsRequest:
    version = header.api_version
    r = Reader(frame, header.body_offset, _flexible(version))
    resources = []
    for _ in range(r.array()):
        rtype = r.int8()
        rname = r.string()
        n = r.array(nullable=True)
        keys = None if n < 0 else tuple(r.string() for _ in range(n))
        resources.append(DescribeResource(rtype, rname, keys, r.tags()))
    synonyms = r.boolean() if version >= 1 else False
    documentation = r.boolean() if version >= 3 else False
    tags = r.tags()
    r.end()
    return DescribeConfigsRequest(version, tuple(resources), synonyms, documentation, tags)


@guard
def parse_describe_configs_response(frame: Buffer, version: int) -> DescribeConfigsResponse:
    r = Reader(frame, check_frame(frame, API_KEY, version, MAX_VERSION), _flexible(version))
    throttle = r.int32()
    results = []
    for _ in range(r.array()):
        error = r.int16()
        message = r.nullable_string()
        rtype = r.int8()
        rname = r.string()
        configs = tuple(_read_entry(r, version) for _ in range(r.array()))
        results.append(DescribeResult(error, message, rtype, rname, configs, r.tags()))
    tags = r.tags()
    r.end()
    return DescribeConfigsResponse(throttle, tuple(results), tags)


def _read_entry(r: Reader, version: int) -> ConfigEntry:
    name = r.string()
    value = r.nullable_string()
    read_only = r.boolean()
    if version == 0:
        source, is_default = UNKNOWN_SOURCE, r.boolean()
    else:
        source = r.int8()
        is_default = source == DEFAULT_CONFIG
    sensitive = r.boolean()
    synonyms: tuple[Synonym, ...] = ()
    if version >= 1:
        synonyms = tuple(Synonym(r.string(), r.nullable_string(), r.int8(), r.tags())
                         for _ in range(r.array()))
    config_type, doc = 0, None
    if version >= 3:
        config_type = r.int8()
        doc = r.nullable_string()
    return ConfigEntry(name, value, read_only, source, is_default, sensitive, synonyms,
                       config_type, doc, r.tags())


def encode_describe_configs_response(version: int, correlation_id: int,
                                     response: DescribeConfigsResponse) -> bytes:
    """A complete response frame (size prefix and header included)."""
    w = Writer(_flexible(version))
    w.int32(response.throttle_time_ms)
    w.array(len(response.results))
    for res in response.results:
        w.int16(res.error_code)
        w.string(res.error_message)
        w.int8(res.resource_type)
        w.string(res.resource_name)
        w.array(len(res.configs))
        for entry in res.configs:
            _write_entry(w, version, entry)
        w.tags(res.tags)
    w.tags(response.tags)
    return response_frame(correlation_id, API_KEY, version, w.body())


def _write_entry(w: Writer, version: int, entry: ConfigEntry) -> None:
    w.string(entry.name)
    w.string(entry.value)
    w.boolean(entry.read_only)
    if version == 0:
        w.boolean(entry.is_default)
    else:
        w.int8(entry.source)
    w.boolean(entry.is_sensitive)
    if version >= 1:
        w.array(len(entry.synonyms))
        for s in entry.synonyms:
            w.string(s.name)
            w.string(s.value)
            w.int8(s.source)
            w.tags(s.tags)
    if version >= 3:
        w.int8(entry.config_type)
        w.string(entry.documentation)
    w.tags(entry.tags)
