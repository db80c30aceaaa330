"""Fuzz targets for the config and topic-creation APIs (benchmarks/fuzz.py runs them).

Every decoding entry point of protocol/describe_configs_rewrite.py (DescribeConfigs
v0-4), protocol/alter_configs.py (AlterConfigs v0-2, IncrementalAlterConfigs v0-1),
protocol/create_topics.py (v0-7) and protocol/create_partitions.py (v0-3), each called
the way the proxy calls it (proxy/admin/interceptor.py, proxy/placement/creation_hook.py):
a request is parsed behind its header and encoded again; a response is parsed and, where
the proxy rewrites it, encoded again. Seeds: kafka-python's requests for every version,
and for responses the simulator's answers (``ask``) where it serves the version, plus
kafka-python-encoded responses for every version.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from protocol.alter_configs import (
    ALTER_CONFIGS,
    INCREMENTAL_ALTER_CONFIGS,
    encode_alter_configs_request,
    encode_alter_configs_response_body,
    parse_alter_configs_request,
    parse_alter_configs_response,
)
from protocol.create_partitions import (
    encode_create_partitions_request,
    encode_create_partitions_response,
    parse_create_partitions_request,
    parse_create_partitions_response,
)
from protocol.create_topics import (
    encode_create_topics_request,
    encode_create_topics_response,
    parse_create_topics_request,
    parse_create_topics_response,
)
from protocol.describe_configs_rewrite import (
    encode_describe_configs_response,
    parse_describe_configs_request,
    parse_describe_configs_response,
)
from protocol.headers import parse_request_header

Ask = Callable[[Any, int], bytes]  # a kafka-python request, version -> the simulator's answer
Spec = tuple[str, Callable[[bytes], object], list[bytes]]  # name, decoder, seeds


def framed(message: Any, correlation_id: int = 9) -> bytes:
    """A kafka-python request or response as a complete frame (size prefix, header)."""
    if hasattr(message, "with_header"):
        try:
            message.with_header(correlation_id=correlation_id, client_id="fuzz")
        except TypeError:  # a response header has no client id
            message.with_header(correlation_id=correlation_id)
    return bytes(message.encode(header=True, framed=True))


# ----- the decoders, as the proxy calls them

def _describe_request(data: bytes) -> object:
    return parse_describe_configs_request(data, parse_request_header(data))


def _describe_response(version: int) -> Callable[[bytes], object]:
    def run(data: bytes) -> object:
        return encode_describe_configs_response(
            version, 9, parse_describe_configs_response(data, version))
    return run


def _alter_request(data: bytes) -> object:
    header = parse_request_header(data)
    return encode_alter_configs_request(data, header, parse_alter_configs_request(data, header))


def _alter_response(api_key: int, version: int) -> Callable[[bytes], object]:
    def run(data: bytes) -> object:
        return encode_alter_configs_response_body(
            api_key, version, parse_alter_configs_response(data, api_key, version))
    return run


def _create_topics_request(data: bytes) -> object:
    header = parse_request_header(data)
    return encode_create_topics_request(data, header, parse_create_topics_request(data, header))


def _create_topics_response(version: int) -> Callable[[bytes], object]:
    def run(data: bytes) -> object:
        return encode_create_topics_response(version, 9,
                                             parse_create_topics_response(data, version))
    return run


def _create_partitions_request(data: bytes) -> object:
    header = parse_request_header(data)
    return encode_create_partitions_request(data, header,
                                            parse_create_partitions_request(data, header))


def _create_partitions_response(version: int) -> Callable[[bytes], object]:
    def run(data: bytes) -> object:
        return encode_create_partitions_response(
            version, 9, parse_create_partitions_response(data, version))
    return run


# ----- seeds

def _describe(ask: Ask) -> list[Spec]:
    from kafka.protocol.admin import DescribeConfigsRequest as Req
    from kafka.protocol.admin import DescribeConfigsResponse as Resp

    res = Req.DescribeConfigsResource
    result = Resp.DescribeConfigsResult
    entry = result.DescribeConfigsResourceResult
    synonym = entry.DescribeConfigsSynonym

    def request(version: int) -> Any:
        return Req(version=version, resources=[
            res(resource_type=2, resource_name="orders", configuration_keys=None),
            res(resource_type=4, resource_name="1", configuration_keys=["min.insync.replicas"]),
            res(resource_type=2, resource_name="events", configuration_keys=[])],
            include_synonyms=True, include_documentation=True)

    def response(version: int) -> bytes:
        configs = [entry(name="cleanup.policy", value="delete", read_only=False,
                         config_source=1, is_default=False, is_sensitive=False,
                         config_type=2, documentation="d" * 40,
                         synonyms=[synonym(name="log.cleanup.policy", value="delete",
                                           source=4)]),
                   entry(name="secret", value=None, read_only=True, config_source=5,
                         is_default=True, is_sensitive=True, config_type=3,
                         documentation=None, synonyms=[])]
        return framed(Resp(version=version, throttle_time_ms=5, results=[
            result(error_code=0, error_message=None, resource_type=2, resource_name="orders",
                   configs=configs),
            result(error_code=3, error_message="unknown", resource_type=2,
                   resource_name="gone", configs=[])]))

    out: list[Spec] = []
    for v in range(5):
        out.append((f"describe configs request v{v}", _describe_request,
                    [framed(request(v))]))
        seeds = [response(v)] + ([ask(request(v), v)] if v >= 1 else [])
        out.append((f"describe configs response v{v}", _describe_response(v), seeds))
    return out


def _alter(ask: Ask) -> list[Spec]:
    from kafka.protocol.admin import AlterConfigsRequest, IncrementalAlterConfigsRequest
    from kafka.protocol.admin import AlterConfigsResponse as AlterResp
    from kafka.protocol.admin import IncrementalAlterConfigsResponse as IncResp

    out: list[Spec] = []
    for key, cls, resp_cls, top, label in (
            (ALTER_CONFIGS, AlterConfigsRequest, AlterResp, 2, "alter configs"),
            (INCREMENTAL_ALTER_CONFIGS, IncrementalAlterConfigsRequest, IncResp, 1,
             "incremental alter configs")):
        res_cls = cls.AlterConfigsResource
        cfg_cls = res_cls.AlterableConfig
        item = resp_cls.AlterConfigsResourceResponse

        def config(name: str, value: str | None, cfg_cls: Any = cfg_cls, key: int = key
                   ) -> Any:
            extra = {"config_operation": 0} if key == INCREMENTAL_ALTER_CONFIGS else {}
            return cfg_cls(name=name, value=value, **extra)

        for v in range(top + 1):
            request = cls(version=v, validate_only=False, resources=[
                res_cls(resource_type=2, resource_name="orders",
                        configs=[config("min.insync.racks", "2"),
                                 config("retention.ms", "1000")]),
                res_cls(resource_type=4, resource_name="", configs=[config("x", None)]),
                res_cls(resource_type=2, resource_name="events", configs=[])])
            answer = ask(request, v)
            mine = framed(resp_cls(version=v, throttle_time_ms=3, responses=[
                item(error_code=0, error_message=None, resource_type=2,
                     resource_name="orders"),
                item(error_code=42, error_message="no", resource_type=4, resource_name="")]))
            out.append((f"{label} request v{v}", _alter_request, [framed(request)]))
            out.append((f"{label} response v{v}", _alter_response(key, v), [answer, mine]))
    return out


def _create_topics(ask: Ask) -> list[Spec]:
    from kafka.protocol.admin import CreateTopicsRequest as Req
    from kafka.protocol.admin import CreateTopicsResponse as Resp

    topic = Req.CreatableTopic
    assign = topic.CreatableReplicaAssignment
    cfg = topic.CreatableTopicConfig
    result = Resp.CreatableTopicResult
    rcfg = result.CreatableTopicConfigs

    def request(version: int) -> Any:
        return Req(version=version, timeout_ms=30000, validate_only=False, topics=[
            topic(name=f"new-{version}", num_partitions=3, replication_factor=3,
                  assignments=[], configs=[cfg(name="min.insync.racks", value="2"),
                                           cfg(name="x", value=None)]),
            topic(name=f"placed-{version}", num_partitions=-1, replication_factor=-1,
                  assignments=[assign(partition_index=0, broker_ids=[1, 2, 3]),
                               assign(partition_index=1, broker_ids=[2, 3, 1])],
                  configs=[])])

    def response(version: int) -> bytes:
        return framed(Resp(version=version, throttle_time_ms=3, topics=[
            result(name="orders", topic_id=uuid.UUID(int=7), error_code=0,
                   error_message=None, num_partitions=3, replication_factor=3,
                   configs=[rcfg(name="cleanup.policy", value="compact", read_only=False,
                                 config_source=1, is_sensitive=False)]),
            result(name="gone", topic_id=uuid.UUID(int=0), error_code=36,
                   error_message="exists", num_partitions=-1, replication_factor=-1,
                   configs=None)]))

    out: list[Spec] = []
    for v in range(8):
        out.append((f"create topics request v{v}", _create_topics_request,
                    [framed(request(v))]))
        seeds = [response(v)] + ([ask(request(v), v)] if v >= 2 else [])
        out.append((f"create topics response v{v}", _create_topics_response(v), seeds))
    return out


def _create_partitions(ask: Ask) -> list[Spec]:
    from kafka.protocol.admin import CreatePartitionsRequest as Req
    from kafka.protocol.admin import CreatePartitionsResponse as Resp

    topic = Req.CreatePartitionsTopic
    assign = topic.CreatePartitionsAssignment
    result = Resp.CreatePartitionsTopicResult
    out: list[Spec] = []
    for v in range(4):
        request = Req(version=v, timeout_ms=30000, validate_only=True, topics=[
            topic(name="orders", count=5,
                  assignments=[assign(broker_ids=[1, 2, 3]), assign(broker_ids=[2, 3, 1])]),
            topic(name="events", count=4, assignments=None)])
        mine = framed(Resp(version=v, throttle_time_ms=7, results=[
            result(name="orders", error_code=0, error_message=None),
            result(name="logs", error_code=39, error_message="no")]))
        out.append((f"create partitions request v{v}", _create_partitions_request,
                    [framed(request)]))
        out.append((f"create partitions response v{v}", _create_partitions_response(v),
                    [ask(request, v), mine]))
    return out


def admin_targets(ask: Ask) -> list[Spec]:
    """(name, decoder, seeds) for every config and topic-creation decoder and version."""
    return _describe(ask) + _alter(ask) + _create_topics(ask) + _create_partitions(ask)
