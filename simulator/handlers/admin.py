"""Admin APIs of the simulator (a TEST DOUBLE): CreateTopics,
DescribeConfigs, AlterConfigs, IncrementalAlterConfigs.

Invariant: any live broker accepts admin requests (there is no separate
controller); topic configs are free-form strings, validated only for
min.insync.replicas, except ``min.insync.racks``, which is refused with
INVALID_CONFIG as a Kafka broker without KIP-1290 refuses a config it does not
know. Broker configs are read-only and minimal; the cluster-wide default (BROKER
resource "") accepts changes and keeps nothing. A client id in
``deny_alter_configs`` is refused every config change, validate-only included,
as an ACL without ALTER_CONFIGS would.
"""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin import (
    AlterConfigsResponse,
    CreateTopicsResponse,
    DescribeConfigsResponse,
    IncrementalAlterConfigsResponse,
)

from simulator import errors
from simulator.handlers.base import Ctx
from simulator.state import MIN_INSYNC_REPLICAS, StateError

TOPIC = 2
BROKER = 4
# DescribeConfigs config sources
TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
# config types
STRING, INT, LONG = 2, 3, 5
SET, DELETE = 0, 1
TOPIC_AUTHORIZATION_FAILED = 29
CLUSTER_AUTHORIZATION_FAILED = 31
UNKNOWN_TO_KAFKA = frozenset({"min.insync.racks"})  # KIP-1290 is not in Kafka

_TOPIC_DEFAULTS: dict[str, tuple[str, int]] = {
    "cleanup.policy": ("delete", STRING),
    "retention.ms": ("604800000", LONG),
    "segment.bytes": ("1073741824", INT),
    "max.message.bytes": ("1048588", INT),
    "unclean.leader.election.enable": ("false", STRING),
}


async def create_topics(ctx: Ctx, req: Any) -> Any:
    core = ctx.core
    results = []
    for t in req.topics:
        partitions = t.num_partitions if t.num_partitions > 0 else core.config.default_partitions
        rf = t.replication_factor if t.replication_factor > 0 else core.default_replication_factor()
        assignment = (
            [list(a.broker_ids) for a in sorted(t.assignments, key=lambda a: a.partition_index)]
            if t.assignments else None
        )
        configs = {c.name: c.value for c in t.configs if c.value is not None}
        error, message, topic_id = errors.NONE, None, None
        try:
            unknown = sorted(UNKNOWN_TO_KAFKA & set(configs))
            if unknown:
                raise StateError(errors.INVALID_CONFIG, f"Unknown topic config name: {unknown[0]}")
            if req.validate_only:
                if t.name in core.state.topics:
                    raise StateError(errors.TOPIC_ALREADY_EXISTS, f"topic {t.name!r} exists")
            else:
                topic = core.state.create_topic(t.name, partitions, rf, configs, assignment)
                topic_id = topic.topic_id
                partitions, rf = len(topic.partitions), len(topic.partitions[0].replicas)
        except StateError as exc:
            error, message = exc.code, exc.message
        results.append(
            CreateTopicsResponse.CreatableTopicResult(
                name=t.name, topic_id=topic_id, error_code=error, error_message=message,
                num_partitions=partitions if not error else -1,
                replication_factor=rf if not error else -1,
                configs=[] if error or req.validate_only else _created_configs(ctx, t.name),
            )
        )
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


def _created_configs(ctx: Ctx, name: str) -> list[Any]:
    cls = CreateTopicsResponse.CreatableTopicResult.CreatableTopicConfigs
    return [
        cls(name=c.name, value=c.value, read_only=False, config_source=c.config_source,
            is_sensitive=False)
        for c in _topic_configs(ctx, name)
    ]


def _entry(ctx: Ctx, name: str, value: str, source: int, kind: int) -> Any:
    cls = DescribeConfigsResponse.DescribeConfigsResult.DescribeConfigsResourceResult
    return cls(
        name=name, value=value, read_only=False, config_source=source,
        is_default=source == DEFAULT_CONFIG, is_sensitive=False, synonyms=[],
        config_type=kind, documentation=None,
    )


def _topic_configs(ctx: Ctx, name: str) -> list[Any]:
    topic = ctx.core.state.topics[name]
    out = []
    default_min = str(ctx.core.state.default_min_insync_replicas)
    merged = {k: (v, DEFAULT_CONFIG, kind) for k, (v, kind) in _TOPIC_DEFAULTS.items()}
    merged[MIN_INSYNC_REPLICAS] = (default_min, STATIC_BROKER_CONFIG, INT)
    for key, value in topic.configs.items():
        merged[key] = (value, TOPIC_CONFIG, merged.get(key, ("", 0, STRING))[2])
    for key, (value, source, kind) in sorted(merged.items()):
        out.append(_entry(ctx, key, value, source, kind))
    return out


def _broker_configs(ctx: Ctx, node_id: int) -> list[Any]:
    broker = ctx.core.state.brokers[node_id]
    values = {
        "broker.id": (str(node_id), INT),
        "broker.rack": (broker.rack or "", STRING),
        MIN_INSYNC_REPLICAS: (str(ctx.core.state.default_min_insync_replicas), INT),
        "default.replication.factor": (str(ctx.core.default_replication_factor()), INT),
        "num.partitions": (str(ctx.core.config.default_partitions), INT),
        "auto.create.topics.enable": (str(ctx.core.config.auto_create_topics).lower(), STRING),
    }
    return [
        _entry(ctx, key, value, STATIC_BROKER_CONFIG, kind)
        for key, (value, kind) in sorted(values.items())
    ]


async def describe_configs(ctx: Ctx, req: Any) -> Any:
    results = []
    for r in req.resources:
        error, message, configs = errors.NONE, None, []
        if r.resource_type == TOPIC and r.resource_name in ctx.core.state.topics:
            configs = _topic_configs(ctx, r.resource_name)
        elif r.resource_type == TOPIC:
            error, message = errors.UNKNOWN_TOPIC_OR_PARTITION, "unknown topic"
        elif r.resource_type == BROKER:
            node = int(r.resource_name) if r.resource_name.isdigit() else ctx.node_id
            if node in ctx.core.state.brokers:
                configs = _broker_configs(ctx, node)
            else:
                error, message = errors.INVALID_REQUEST, "unknown broker"
        else:
            error, message = errors.INVALID_REQUEST, "unsupported resource type"
        if r.configuration_keys is not None:
            wanted = set(r.configuration_keys)
            configs = [c for c in configs if c.name in wanted]
        results.append(
            DescribeConfigsResponse.DescribeConfigsResult(
                error_code=error, error_message=message, resource_type=r.resource_type,
                resource_name=r.resource_name, configs=configs,
            )
        )
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _alter(ctx: Ctx, req: Any, incremental: bool) -> list[tuple[int, str | None, int, str]]:
    out = []
    for r in req.resources:
        error, message = errors.NONE, None
        unknown = sorted(UNKNOWN_TO_KAFKA & {c.name for c in r.configs})
        if ctx.client_id in ctx.core.config.deny_alter_configs:
            error = TOPIC_AUTHORIZATION_FAILED if r.resource_type == TOPIC else (
                CLUSTER_AUTHORIZATION_FAILED)
            message = f"client {ctx.client_id!r} may not alter configs (deny_alter_configs)"
        elif unknown:
            error, message = errors.INVALID_CONFIG, f"Unknown config name: {unknown[0]}"
        elif r.resource_type == BROKER and r.resource_name == "":
            pass  # the cluster-wide default: accepted, nothing of it kept
        elif r.resource_type != TOPIC:
            error, message = errors.INVALID_REQUEST, "only topic configs can be altered"
        elif r.resource_name not in ctx.core.state.topics:
            error, message = errors.UNKNOWN_TOPIC_OR_PARTITION, "unknown topic"
        else:
            changes: dict[str, str | None] = {}
            for c in r.configs:
                op = c.config_operation if incremental else SET
                if op not in (SET, DELETE):
                    error, message = errors.INVALID_REQUEST, "only SET and DELETE are supported"
                changes[c.name] = c.value if op == SET else None
            if not error and not req.validate_only:
                try:
                    ctx.core.state.alter_topic_configs(
                        r.resource_name, changes, replace=not incremental
                    )
                except StateError as exc:
                    error, message = exc.code, exc.message
        out.append((error, message, r.resource_type, r.resource_name))
    return out


async def alter_configs(ctx: Ctx, req: Any) -> Any:
    cls = AlterConfigsResponse.AlterConfigsResourceResponse
    responses = [
        cls(error_code=e, error_message=m, resource_type=t, resource_name=n)
        for e, m, t, n in _alter(ctx, req, incremental=False)
    ]
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)


async def incremental_alter_configs(ctx: Ctx, req: Any) -> Any:
    cls = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
    responses = [
        cls(error_code=e, error_message=m, resource_type=t, resource_name=n)
        for e, m, t, n in _alter(ctx, req, incremental=True)
    ]
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)
