"""CreateTopics (api key 19, v0-v7): the request decoded into one entry per new topic
(partitions, replication factor, explicit replica assignments, configs) and rebuilt;
the response decoded, changed and encoded again.

The proxy uses it to take configs of its own (``min.insync.racks``) out of a new
topic before the broker sees them and to report them back in the answer's
configs (v5+), and to read explicit replica assignments. Version differences:
``validate_only`` from v1, ``throttle_time_ms`` and error messages in the answer
from v1/v2, per-topic configs, partition count and replication factor in the
answer from v5 (flexible), topic ids from v7. Unknown tagged fields (and the
answer's tagged ``topic_config_error_code``) are kept raw.

Invariants: ``encode_create_topics_request(parse(...))`` and
``encode_create_topics_response(parse(...))`` give back the original bytes; every
parser raises :class:`~protocol.primitives.ProtocolError` and nothing
else for bad input, trailing bytes included. No I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from protocol._message import Reader, Writer, request_frame
from protocol._wire import check_frame, guard
from protocol.headers import RequestHeader, response_frame
from protocol.primitives import Buffer, ProtocolError

API_KEY = 19
MAX_VERSION = 7
FLEXIBLE_FROM = 5
NULL_UUID = bytes(16)


@dataclass(frozen=True, slots=True)
class Assignment:
    partition_index: int
    broker_ids: tuple[int, ...]
    tags: bytes = b""


@dataclass(frozen=True, slots=True)
class TopicConfig:
    name: str
    value: str | None
    tags: bytes = b""


@dataclass(frozen=True, slots=True)
class NewTopic:
    name: str
    num_partitions: int  # -1: the broker's default (or the assignments)
    replication_factor: int  # -1: the broker's default (or the assignments)
    assignments: tuple[Assignment, ...]
    configs: tuple[TopicConfig, ...]
    tags: bytes = b""


@dataclass(frozen=True, slots=True)
class CreateTopicsRequest:
    version: int
    topics: tuple[NewTopic, ...]
    timeout_ms: int
    validate_only: bool  # v1+
    tags: bytes = b""


@dataclass(frozen=True, slots=True)
class CreatedConfig:
    name: str
    value: str | None
    read_only: bool
    config_source: int
    is_sensitive: bool
    tags: bytes = b""


@dataclass(frozen=True, slots=True)
class TopicResult:
    name: str
    error_code: int
    error_message: str | None = None  # v1+
    topic_id: bytes = NULL_UUID  # v7+
    num_partitions: int = -1  # v5+
    replication_factor: int = -1  # v5+
    configs: tuple[CreatedConfig, ...] | None = None  # v5+
    tags: bytes = b""  # v5+, topic_config_error_code (tag 0) among them


@dataclass(frozen=True, slots=True)
class CreateTopicsResponse:
    throttle_time_ms: int  # v2+
    topics: tuple[TopicResult, ...]
    tags: bytes = b""


def _flexible(version: int) -> bool:
    if not 0 <= version <= MAX_VERSION:
        raise ProtocolError(f"unsupported CreateTopics version {version}")
    return version >= FLEXIBLE_FROM


@guard
def parse_create_topics_request(frame: Buffer, header: RequestHeader) -> CreateTopicsRequest:
    version = header.api_version
    r = Reader(frame, header.body_offset, _flexible(version))
    topics = []
    for _ in range(r.array()):
        name = r.string()
        partitions = r.int32()
        rf = r.int16()
        assignments = []
        for _ in range(r.array()):
            index = r.int32()
            brokers = tuple(r.int32() for _ in range(r.array()))
            assignments.append(Assignment(index, brokers, r.tags()))
        configs = tuple(TopicConfig(r.string(), r.nullable_string(), r.tags())
                        for _ in range(r.array()))
        topics.append(NewTopic(name, partitions, rf, tuple(assignments), configs, r.tags()))
    timeout = r.int32()
    validate_only = r.boolean() if version >= 1 else False
    tags = r.tags()
    r.end()
    return CreateTopicsRequest(version, tuple(topics), timeout, validate_only, tags)


def encode_create_topics_request(frame: Buffer, header: RequestHeader,
                                 request: CreateTopicsRequest) -> bytes:
    """``request`` as a frame behind the header of ``frame`` (the client's, unchanged)."""
    w = Writer(_flexible(request.version))
    w.array(len(request.topics))
    for t in request.topics:
        w.string(t.name)
        w.int32(t.num_partitions)
        w.int16(t.replication_factor)
        w.array(len(t.assignments))
        for a in t.assignments:
            w.int32(a.partition_index)
            w.array(len(a.broker_ids))
            for b in a.broker_ids:
                w.int32(b)
            w.tags(a.tags)
        w.array(len(t.configs))
        for c in t.configs:
            w.string(c.name)
            w.string(c.value)
            w.tags(c.tags)
        w.tags(t.tags)
    w.int32(request.timeout_ms)
    if request.version >= 1:
        w.boolean(request.validate_only)
    w.tags(request.tags)
    return request_frame(frame, header.body_offset, w.body())


@guard
def parse_create_topics_response(frame: Buffer, version: int) -> CreateTopicsResponse:
    r = Reader(frame, check_frame(frame, API_KEY, version, MAX_VERSION), _flexible(version))
    throttle = r.int32() if version >= 2 else 0
    topics = []
    for _ in range(r.array()):
        name = r.string()
        topic_id = r.uuid() if version >= 7 else NULL_UUID
        error = r.int16()
        message = r.nullable_string() if version >= 1 else None
        partitions, rf, configs = -1, -1, None
        if version >= 5:
            partitions = r.int32()
            rf = r.int16()
            n = r.array(nullable=True)
            if n >= 0:
                configs = tuple(CreatedConfig(r.string(), r.nullable_string(), r.boolean(),
                                              r.int8(), r.boolean(), r.tags())
                                for _ in range(n))
        topics.append(TopicResult(name, error, message, topic_id, partitions, rf, configs,
                                  r.tags()))
    tags = r.tags()
    r.end()
    return CreateTopicsResponse(throttle, tuple(topics), tags)


def encode_create_topics_response(version: int, correlation_id: int,
                                  response: CreateTopicsResponse) -> bytes:
    """A complete response frame (size prefix and header included)."""
    w = Writer(_flexible(version))
    if version >= 2:
        w.int32(response.throttle_time_ms)
    w.array(len(response.topics))
    for t in response.topics:
        w.string(t.name)
        if version >= 7:
            w.raw(t.topic_id)
        w.int16(t.error_code)
        if version >= 1:
            w.string(t.error_message)
        if version >= 5:
            w.int32(t.num_partitions)
            w.int16(t.replication_factor)
            w.array(None if t.configs is None else len(t.configs))
            for c in t.configs or ():
                w.string(c.name)
                w.string(c.value)
                w.boolean(c.read_only)
                w.int8(c.config_source)
                w.boolean(c.is_sensitive)
                w.tags(c.tags)
        w.tags(t.tags)
    w.tags(response.tags)
    return response_frame(correlation_id, API_KEY, version, w.body())


def merge_create_topics_responses(request: CreateTopicsRequest, correlation_id: int,
                                  upstream: CreateTopicsResponse | None,
                                  local: Mapping[str, TopicResult]) -> bytes:
    """One response frame answering every topic of ``request``, in request order: a
    topic in ``local`` from there, every other from the broker's answer (a topic
    neither answered is an internal error, ValueError)."""
    theirs = {t.name: t for t in upstream.topics} if upstream is not None else {}
    topics = []
    for t in request.topics:
        result = local.get(t.name) or theirs.get(t.name)
        if result is None:
            raise ValueError(f"no answer for topic {t.name!r}")
        topics.append(result)
    response = CreateTopicsResponse(upstream.throttle_time_ms if upstream else 0,
                                    tuple(topics), upstream.tags if upstream else b"")
    return encode_create_topics_response(request.version, correlation_id, response)
