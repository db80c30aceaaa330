"""The table of Kafka API keys the proxy knows, and which versions are flexible.

Invariant: this module is data only. ``FLEXIBLE_FROM`` must agree with Kafka's
JSON message schemas (a unit test checks it against the copies kafka-python
ships); an API key missing from ``API_NAMES`` is unknown to the proxy, is
removed from ApiVersions responses and is bad input if a client sends it.
"""

from __future__ import annotations

from enum import IntEnum


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    API_VERSIONS = 18
    DESCRIBE_CONFIGS = 32
    DESCRIBE_QUORUM = 55
    DESCRIBE_CLUSTER = 60
    CONSUMER_GROUP_HEARTBEAT = 68
    SHARE_FETCH = 78
    SHARE_ACKNOWLEDGE = 79


API_NAMES: dict[int, str] = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 4: "LeaderAndIsr",
    5: "StopReplica", 6: "UpdateMetadata", 7: "ControlledShutdown", 8: "OffsetCommit",
    9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat",
    13: "LeaveGroup", 14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups",
    17: "SaslHandshake", 18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics",
    21: "DeleteRecords", 22: "InitProducerId", 23: "OffsetForLeaderEpoch",
    24: "AddPartitionsToTxn", 25: "AddOffsetsToTxn", 26: "EndTxn", 27: "WriteTxnMarkers",
    28: "TxnOffsetCommit", 29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls",
    32: "DescribeConfigs", 33: "AlterConfigs", 34: "AlterReplicaLogDirs",
    35: "DescribeLogDirs", 36: "SaslAuthenticate", 37: "CreatePartitions",
    38: "CreateDelegationToken", 39: "RenewDelegationToken", 40: "ExpireDelegationToken",
    41: "DescribeDelegationToken", 42: "DeleteGroups", 43: "ElectLeaders",
    44: "IncrementalAlterConfigs", 45: "AlterPartitionReassignments",
    46: "ListPartitionReassignments", 47: "OffsetDelete", 48: "DescribeClientQuotas",
    49: "AlterClientQuotas", 50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials", 52: "Vote", 53: "BeginQuorumEpoch",
    54: "EndQuorumEpoch", 55: "DescribeQuorum", 56: "AlterPartition", 57: "UpdateFeatures",
    58: "Envelope", 59: "FetchSnapshot", 60: "DescribeCluster", 61: "DescribeProducers",
    62: "BrokerRegistration", 63: "BrokerHeartbeat", 64: "UnregisterBroker",
    65: "DescribeTransactions", 66: "ListTransactions", 67: "AllocateProducerIds",
    68: "ConsumerGroupHeartbeat", 69: "ConsumerGroupDescribe", 70: "ControllerRegistration",
    71: "GetTelemetrySubscriptions", 72: "PushTelemetry", 73: "AssignReplicasToDirs",
    74: "ListConfigResources", 75: "DescribeTopicPartitions", 76: "ShareGroupHeartbeat",
    77: "ShareGroupDescribe", 78: "ShareFetch", 79: "ShareAcknowledge", 80: "AddRaftVoter",
    81: "RemoveRaftVoter", 82: "UpdateRaftVoter", 83: "InitializeShareGroupState",
    84: "ReadShareGroupState", 85: "WriteShareGroupState", 86: "DeleteShareGroupState",
    87: "ReadShareGroupStateSummary", 88: "StreamsGroupHeartbeat", 89: "StreamsGroupDescribe",
    90: "DescribeShareGroupOffsets", 91: "AlterShareGroupOffsets",
    92: "DeleteShareGroupOffsets",
}

# First flexible version per API key (None: never flexible), from Kafka's schemas.
# Only APIs whose headers the proxy parses need an entry; others are forwarded
# opaque and only their fixed header prefix is read.
FLEXIBLE_FROM: dict[int, int | None] = {
    0: 9, 1: 12, 2: 6, 3: 9, 8: 8, 9: 6, 10: 3, 11: 6, 12: 4, 13: 4, 14: 4, 15: 5, 16: 3,
    17: None, 18: 3, 19: 5, 20: 4, 21: 2, 22: 2, 23: 4, 24: 3, 25: 3, 26: 3, 27: 1, 28: 3,
    29: 2, 30: 2, 31: 2, 32: 4, 33: 2, 34: 2, 35: 2, 36: 2, 37: 2, 42: 2, 43: 2, 44: 1,
    45: 0, 46: 0, 47: None, 48: 1, 49: 1, 50: 0, 51: 0, 55: 0, 57: 0, 60: 0, 61: 0, 65: 0,
    66: 0, 74: 0, 75: 0,
}


def api_name(api_key: int) -> str:
    return API_NAMES.get(api_key, f"Unknown({api_key})")


def is_flexible(api_key: int, api_version: int) -> bool:
    start = FLEXIBLE_FROM.get(api_key)
    return start is not None and api_version >= start
