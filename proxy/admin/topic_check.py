"""The config topic's own settings on the brokers: read (Metadata, DescribeConfigs) and
set (IncrementalAlterConfigs), with the proxy's own aiokafka clients.

aiokafka has no IncrementalAlterConfigs; its version 0 is declared here in aiokafka's
own protocol classes (a plain AlterConfigs would replace the topic's whole set).
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from typing import Any

from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.protocol.api import Request, RequestStruct, Response
from aiokafka.protocol.metadata import MetadataRequest
from aiokafka.protocol.types import Array, Boolean, Int8, Int16, Int32, Schema, String

from proxy.admin.topic_layout import PartitionLayout

SET = 0  # IncrementalAlterConfigs operation


class IncrementalAlterConfigsResponse_v0(Response):
    API_KEY = 44
    API_VERSION = 0
    SCHEMA = Schema(
        ("throttle_time_ms", Int32),
        ("responses", Array(("error_code", Int16), ("error_message", String("utf-8")),
                            ("resource_type", Int8), ("resource_name", String("utf-8")))))


class IncrementalAlterConfigsRequest_v0(RequestStruct):
    API_KEY = 44
    API_VERSION = 0
    RESPONSE_TYPE = IncrementalAlterConfigsResponse_v0
    SCHEMA = Schema(
        ("resources", Array(
            ("resource_type", Int8), ("resource_name", String("utf-8")),
            ("configs", Array(("name", String("utf-8")), ("config_operation", Int8),
                              ("value", String("utf-8")))))),
        ("validate_only", Boolean))


class IncrementalAlterConfigsRequest(Request[IncrementalAlterConfigsRequest_v0]):
    API_KEY = 44

    def __init__(self, topic: str, configs: Mapping[str, str]) -> None:
        self._resources = [(int(ConfigResourceType.TOPIC), topic,
                            [(k, SET, v) for k, v in configs.items()])]

    def build(self, request_struct_class: type[IncrementalAlterConfigsRequest_v0]
              ) -> IncrementalAlterConfigsRequest_v0:
        return request_struct_class(self._resources, False)


def layout_from_metadata(topic: str, metadata: Any, min_isr: int | None
                         ) -> PartitionLayout | None:
    """Partition 0 of ``topic`` in an aiokafka Metadata response (None: not in it)."""
    for entry in metadata.to_object()["topics"]:
        if entry["topic"] != topic or entry["error_code"] != 0:
            continue
        for p in entry["partitions"]:
            if p["partition"] == 0:
                return PartitionLayout(p["leader"], tuple(p["replicas"]), tuple(p["isr"]),
                                       min_isr)
    return None


async def read_layout(admin: AIOKafkaAdminClient, topic: str) -> PartitionLayout | None:
    """The topic's partition 0 and its min.insync.replicas; None: no such topic."""
    metadata = await admin._get_cluster_metadata([topic])  # noqa: SLF001 - Metadata, one topic
    answers = await admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic, {"min.insync.replicas": None})])
    min_isr = None
    for answer in answers:
        for resource in answer.resources:
            if resource[0] != 0:
                continue
            for entry in resource[4]:
                if entry[0] == "min.insync.replicas" and entry[1] is not None:
                    min_isr = int(entry[1])
    return layout_from_metadata(topic, metadata, min_isr)


async def set_configs(admin: AIOKafkaAdminClient, topic: str, configs: Mapping[str, str]
                      ) -> str | None:
    """Set ``configs`` on ``topic`` (IncrementalAlterConfigs); the broker's refusal, or
    None when done."""
    response = await admin._send_request(  # noqa: SLF001 - aiokafka's own request path
        IncrementalAlterConfigsRequest(topic, configs))
    for code, message, *_ in response.responses:
        if code != 0:
            return f"error {code}: {message or 'refused'}"
    return None


async def ask_layout(client: Any, topic: str, timeout_s: float,
                     min_isr: int | None) -> PartitionLayout | None:
    """The partition as the first broker that answers within ``timeout_s`` describes it
    (``client``: a started aiokafka client, e.g. the producer's); None: none answered."""
    nodes = [b.nodeId for b in client.cluster.brokers()]
    random.shuffle(nodes)
    try:
        async with asyncio.timeout(timeout_s):
            for node in nodes:
                try:
                    async with asyncio.timeout(max(timeout_s / 3, 0.2)):
                        answer = await client.send(node, MetadataRequest([topic], False))
                except Exception:  # noqa: BLE001 - the next broker, then give up
                    continue
                return layout_from_metadata(topic, answer, min_isr)
    except TimeoutError:
        pass
    return None
