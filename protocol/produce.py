"""Produce (api key 0, v3-v13): the one import point for the proxy.

Invariant: sans-IO and zero-copy for record bytes. The request side
(:mod:`protocol.produce_request`) walks frames into spans and rewrites them by
slicing, and :mod:`protocol.produce_partitions` packs a walk's record counts; the
response side (:mod:`protocol.produce_response`) builds, parses and merges responses;
:mod:`protocol.produce_endpoints` rewrites NodeEndpoints. Malformed input raises
:class:`~protocol.primitives.ProtocolError` only. This module only re-exports.
"""

from __future__ import annotations

from protocol.produce_endpoints import (
    EndpointMapper,
    produce_response_endpoints,
    rewrite_produce_response_endpoints,
    rewrite_produce_response_endpoints_seen,
)
from protocol.produce_partitions import PARTITION_ROW, partition_rows
from protocol.produce_request import (
    BATCH_HEADER_SIZE,
    BATCH_LENGTH_OVERHEAD,
    BATCH_PEEK,
    BatchInfo,
    PartitionData,
    ProduceRequest,
    Span,
    TopicData,
    TopicKey,
    drop_partitions,
    iter_batches,
    peek_acks,
    peek_produce_acks,
    producer_info,
    record_count,
    record_counts,
    walk_produce_request,
)
from protocol.produce_response import (
    LeaderIdAndEpoch,
    NodeEndpoint,
    PartitionResult,
    ProduceResponse,
    RecordError,
    TopicResult,
    build_produce_response,
    encode_produce_response_body,
    merge_produce_responses,
    parse_produce_response,
)

__all__ = [
    "BATCH_HEADER_SIZE",
    "BATCH_LENGTH_OVERHEAD",
    "BATCH_PEEK",
    "BatchInfo",
    "EndpointMapper",
    "LeaderIdAndEpoch",
    "PARTITION_ROW",
    "NodeEndpoint",
    "PartitionData",
    "PartitionResult",
    "ProduceRequest",
    "ProduceResponse",
    "RecordError",
    "Span",
    "TopicData",
    "TopicKey",
    "TopicResult",
    "build_produce_response",
    "drop_partitions",
    "encode_produce_response_body",
    "iter_batches",
    "merge_produce_responses",
    "parse_produce_response",
    "partition_rows",
    "peek_acks",
    "peek_produce_acks",
    "produce_response_endpoints",
    "producer_info",
    "record_count",
    "record_counts",
    "rewrite_produce_response_endpoints",
    "rewrite_produce_response_endpoints_seen",
    "walk_produce_request",
]
