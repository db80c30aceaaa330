"""Reads a live cluster for the placement command: brokers, racks, assignments, sizes.

Invariant: read-only (Metadata, DescribeCluster and, where the brokers answer
it, DescribeLogDirs), through kafka-python's admin client; a cluster that
does not answer DescribeLogDirs gives no sizes, not an error. The command
runs this once; the proxy's serving path never imports it.
"""

from __future__ import annotations

from typing import Any

from proxy.placement.model import PartitionReplicas
from proxy.placement.sources import ClusterInputs, SourceError


def read_cluster(bootstrap: str, timeout_ms: int = 10000, sizes: bool = True,
                 internal: bool = False) -> ClusterInputs:
    from kafka.admin import KafkaAdminClient
    from kafka.errors import KafkaError

    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=timeout_ms,
                                 client_id="rackguard-placement")
    except KafkaError as exc:
        raise SourceError(f"--bootstrap {bootstrap}: cannot reach the cluster: {exc}") from None
    try:
        cluster = admin.describe_cluster()
        racks = {int(b["broker_id"]): b.get("rack") for b in cluster["brokers"]}
        topics: dict[str, dict[int, PartitionReplicas]] = {}
        for t in admin.describe_topics():
            if t.get("error_code") or (t.get("is_internal") and not internal):
                continue
            topics[t["name"]] = {
                int(p["partition_index"]): PartitionReplicas(
                    tuple(p["replica_nodes"]), int(p["leader_id"]),
                    tuple(p.get("offline_replicas") or ()))
                for p in t["partitions"]}
        found = _sizes(admin) if sizes else {}
    except KafkaError as exc:
        raise SourceError(f"--bootstrap {bootstrap}: {exc}") from None
    finally:
        admin.close()
    return ClusterInputs(racks, topics, sizes=found)


def _sizes(admin: Any) -> dict[tuple[str, int], int]:
    from kafka.errors import KafkaError

    try:
        answers = admin.describe_log_dirs()
    except (KafkaError, NotImplementedError):
        return {}
    return log_dir_sizes(answers)


def log_dir_sizes(answers: list[dict[str, Any]]) -> dict[tuple[str, int], int]:
    """Largest replica size per partition from kafka-python's describe_log_dirs answer."""
    out: dict[tuple[str, int], int] = {}
    for broker in answers:
        for log_dir in broker.get("log_dirs", ()):
            if log_dir.get("error_code"):
                continue
            for topic in log_dir.get("topics", ()):
                for p in topic.get("partitions", ()):
                    key = (topic["name"], int(p["partition_index"]))
                    size = int(p.get("partition_size", 0))
                    if size > out.get(key, -1) and not p.get("is_future_key"):
                        out[key] = size
    return out
