"""CreatePartitions (api key 37, v0-v3): the request decoded into one entry per topic
(new partition count, explicit assignments of the new partitions), and the response
decoded, built and encoded.

The proxy reads explicit assignments of new partitions to check that their replicas
can span the topic's min.insync.racks, answers refused topics itself and merges the
broker's answer for the others. Version differences: flexible (compact strings and
arrays, tagged fields) from v2; nothing else changes across v0-v3. Unknown tagged
fields are kept raw.

Invariants: ``encode_create_partitions_request(parse(...))`` and
``encode_create_partitions_response(parse(...))`` give back the original bytes; every
parser raises :class:`~protocol.primitives.ProtocolError` and nothing else
for bad input, trailing bytes included. No I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol._message import Reader, Writer, request_frame
from protocol._wire import check_frame, guard
from protocol.headers import RequestHeader, response_frame
from protocol.primitives import Buffer, ProtocolError

API_KEY = 37
MAX_VERSION = 3
FLEXIBLE_FROM = 2


@dataclass(frozen=True, slots=True)
class NewPartitions:
    name: str
    count: int  # the topic's partition count after the request
    # replicas of each new partition, in partition order; None: the broker assigns
    assignments: tuple[tuple[int, ...], ...] | None
    assignment_tags: tuple[bytes, ...] = ()
    tags: bytes = b""


@dataclass(frozen=True, slots=True)
class CreatePartitionsRequest:
    version: int
    topics: tuple[NewPartitions, ...]
    timeout_ms: int
    validate_only: bool
    tags: bytes = b""


@dataclass(frozen=True, slots=True)
class TopicResult:
    name: str
    error_code: int
    error_message: str | None = None
    tags: bytes = b""


@dataclass(frozen=True, slots=True)
class CreatePartitionsResponse:
    throttle_time_ms: int
    results: tuple[TopicResult, ...]
    tags: bytes = b""


def _flexible(version: int) -> bool:
    if not 0 <= version <= MAX_VERSION:
        raise ProtocolError(f"unsupported CreatePartitions version {version}")
    return version >= FLEXIBLE_FROM


@guard
def parse_create_partitions_request(frame: Buffer, header: RequestHeader
                                    ) -> CreatePartitionsRequest:
    r = Reader(frame, header.body_offset, _flexible(header.api_version))
    topics = []
    for _ in range(r.array()):
        name = r.string()
        count = r.int32()
        n = r.array(nullable=True)
        assignments: list[tuple[int, ...]] = []
        tags: list[bytes] = []
        for _ in range(max(n, 0)):
            assignments.append(tuple(r.int32() for _ in range(r.array())))
            tags.append(r.tags())
        topics.append(NewPartitions(name, count, None if n < 0 else tuple(assignments),
                                    tuple(tags), r.tags()))
    timeout = r.int32()
    validate_only = r.boolean()
    tags_end = r.tags()
    r.end()
    return CreatePartitionsRequest(header.api_version, tuple(topics), timeout, validate_only,
                                   tags_end)


def encode_create_partitions_request(frame: Buffer, header: RequestHeader,
                                     request: CreatePartitionsRequest) -> bytes:
    """``request`` as a frame behind the header of ``frame`` (the client's, unchanged)."""
    w = Writer(_flexible(request.version))
    w.array(len(request.topics))
    for t in request.topics:
        w.string(t.name)
        w.int32(t.count)
        if t.assignments is None:
            w.array(None)
        else:
            w.array(len(t.assignments))
            for i, brokers in enumerate(t.assignments):
                w.array(len(brokers))
                for b in brokers:
                    w.int32(b)
                w.tags(t.assignment_tags[i] if i < len(t.assignment_tags) else b"")
        w.tags(t.tags)
    w.int32(request.timeout_ms)
    w.boolean(request.validate_only)
    w.tags(request.tags)
    return request_frame(frame, header.body_offset, w.body())


@guard
def parse_create_partitions_response(frame: Buffer, version: int) -> CreatePartitionsResponse:
    r = Reader(frame, check_frame(frame, API_KEY, version, MAX_VERSION), _flexible(version))
    throttle = r.int32()
    results = tuple(TopicResult(r.string(), r.int16(), r.nullable_string(), r.tags())
                    for _ in range(r.array()))
    tags = r.tags()
    r.end()
    return CreatePartitionsResponse(throttle, results, tags)


def encode_create_partitions_response(version: int, correlation_id: int,
                                      response: CreatePartitionsResponse) -> bytes:
    """A complete response frame (size prefix and header included)."""
    w = Writer(_flexible(version))
    w.int32(response.throttle_time_ms)
    w.array(len(response.results))
    for t in response.results:
        w.string(t.name)
        w.int16(t.error_code)
        w.string(t.error_message)
        w.tags(t.tags)
    w.tags(response.tags)
    return response_frame(correlation_id, API_KEY, version, w.body())
