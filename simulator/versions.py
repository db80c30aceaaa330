"""The APIs and version ranges the simulator (a TEST DOUBLE) implements and advertises.

Invariant: every entry's range lies within kafka-python's schema range for
that API, and every API listed has a handler (checked by the dispatcher at
import time). ApiVersions advertises exactly this table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.metadata import (
    ApiVersionsRequest,
    ApiVersionsResponse,
    FindCoordinatorRequest,
    FindCoordinatorResponse,
    MetadataRequest,
    MetadataResponse,
)
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)


@dataclass(frozen=True)
class ApiSpec:
    key: int
    request: Any  # a kafka-python ApiMessage subclass
    response: Any
    min_version: int
    max_version: int

    def flexible(self, version: int) -> bool:
        return bool(self.request.flexible_version_q(version))


def _spec(request: Any, response: Any, lo: int, hi: int) -> ApiSpec:
    assert request.API_KEY == response.API_KEY
    assert 0 <= lo <= hi <= request.max_version, (request.name, lo, hi)
    return ApiSpec(request.API_KEY, request, response, lo, hi)


SUPPORTED: dict[int, ApiSpec] = {
    s.key: s
    for s in (
        _spec(ProduceRequest, ProduceResponse, 3, 12),
        _spec(FetchRequest, FetchResponse, 4, 16),
        _spec(ListOffsetsRequest, ListOffsetsResponse, 1, 9),
        _spec(MetadataRequest, MetadataResponse, 0, 12),
        _spec(OffsetCommitRequest, OffsetCommitResponse, 2, 9),
        _spec(OffsetFetchRequest, OffsetFetchResponse, 1, 9),
        _spec(FindCoordinatorRequest, FindCoordinatorResponse, 0, 5),
        _spec(JoinGroupRequest, JoinGroupResponse, 0, 9),
        _spec(HeartbeatRequest, HeartbeatResponse, 0, 4),
        _spec(LeaveGroupRequest, LeaveGroupResponse, 0, 5),
        _spec(SyncGroupRequest, SyncGroupResponse, 0, 5),
        _spec(SaslHandshakeRequest, SaslHandshakeResponse, 1, 1),  # v0: unframed tokens
        _spec(ApiVersionsRequest, ApiVersionsResponse, 0, 4),
        _spec(CreateTopicsRequest, CreateTopicsResponse, 2, 7),
        _spec(InitProducerIdRequest, InitProducerIdResponse, 0, 5),
        _spec(DescribeConfigsRequest, DescribeConfigsResponse, 1, 4),
        _spec(AlterConfigsRequest, AlterConfigsResponse, 0, 2),
        _spec(SaslAuthenticateRequest, SaslAuthenticateResponse, 0, 2),
        _spec(IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, 0, 1),
        _spec(CreatePartitionsRequest, CreatePartitionsResponse, 0, 3),
        _spec(DescribeClusterRequest, DescribeClusterResponse, 0, 1),
    )
}
