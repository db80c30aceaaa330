"""Where the placement command's inputs come from, turned into :mod:`.model` values.

Invariant: parsing only (files, flags, plain dicts); the one network source
is :mod:`.live`. Bad input raises :class:`SourceError` with a message naming
the file or flag and what is wrong.

* ``--brokers 1=rack-a,2=rack-b,3=``: broker id -> rack (``ID=``: no rack);
* an assignment file: the JSON kafka-reassign-partitions reads and writes
  (``{"version":1,"partitions":[{"topic","partition","replicas"}]}``);
* a ledger snapshot file (``snapshots-*.jsonl``): the latest snapshot in it
  (brokers with their racks, partitions with replicas and leader, and the
  ``required_racks`` the proxy applied to each topic).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proxy.placement.model import PartitionReplicas


class SourceError(ValueError):
    """Input the placement command cannot use; the message says which and why."""


@dataclass(frozen=True, slots=True)
class ClusterInputs:
    racks: dict[int, str | None]
    topics: dict[str, dict[int, PartitionReplicas]]
    required: dict[str, int] = field(default_factory=dict)  # per topic, where the source says
    sizes: dict[tuple[str, int], int] = field(default_factory=dict)  # bytes per partition


def parse_brokers(text: str) -> dict[int, str | None]:
    racks: dict[int, str | None] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        node, sep, rack = item.partition("=")
        try:
            node_id = int(node)
        except ValueError:
            raise SourceError(f"--brokers: {item!r} is not ID=RACK (ID an integer)") from None
        if not sep:
            raise SourceError(f"--brokers: {item!r} is not ID=RACK (use ID= for no rack)")
        if node_id in racks:
            raise SourceError(f"--brokers: broker {node_id} given twice")
        racks[node_id] = rack.strip() or None
    if not racks:
        raise SourceError("--brokers: no broker given")
    return racks


def parse_topic_numbers(items: Iterable[str], flag: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for item in items:
        name, sep, number = item.rpartition("=")
        if not sep or not name:
            raise SourceError(f"{flag}: {item!r} is not NAME=N")
        try:
            out[name] = int(number)
        except ValueError:
            raise SourceError(f"{flag}: {item!r}: N must be an integer") from None
        if out[name] < 1:
            raise SourceError(f"{flag}: {item!r}: N must be >= 1")
    return out


def assignment_from_json(doc: Any, where: str) -> dict[str, dict[int, PartitionReplicas]]:
    if not isinstance(doc, dict) or not isinstance(doc.get("partitions"), list):
        raise SourceError(f"{where}: not a reassignment file (no \"partitions\" list)")
    topics: dict[str, dict[int, PartitionReplicas]] = {}
    for entry in doc["partitions"]:
        try:
            topic, index = str(entry["topic"]), int(entry["partition"])
            replicas = tuple(int(b) for b in entry["replicas"])
        except (KeyError, TypeError, ValueError):
            raise SourceError(f"{where}: bad entry {entry!r} (needs topic, partition, "
                              "replicas)") from None
        leader = replicas[0] if replicas else -1
        topics.setdefault(topic, {})[index] = PartitionReplicas(replicas, leader)
    return topics


def read_assignment(path: Path) -> dict[str, dict[int, PartitionReplicas]]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SourceError(f"{path}: {exc}") from None
    return assignment_from_json(doc, str(path))


def read_snapshot(path: Path) -> ClusterInputs:
    """The latest snapshot (greatest timestamp) in a ledger snapshot file."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    stamps: dict[tuple[str, int], float] = {}
    try:
        with path.open() as lines:
            for number, line in enumerate(lines, 1):
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                    key = (str(row["instance"]), int(row["snapshot"]))
                except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                    raise SourceError(f"{path}:{number}: not a snapshot line") from None
                groups.setdefault(key, []).append(row)
                stamps[key] = max(stamps.get(key, 0.0), float(row.get("ts", 0.0)))
    except OSError as exc:
        raise SourceError(f"{path}: {exc}") from None
    if not groups:
        raise SourceError(f"{path}: no snapshot in the file")
    latest = max(groups, key=lambda k: (stamps[k], k[1]))
    return snapshot_inputs(groups[latest])


def snapshot_inputs(rows: Iterable[Mapping[str, Any]]) -> ClusterInputs:
    racks: dict[int, str | None] = {}
    topics: dict[str, dict[int, PartitionReplicas]] = {}
    required: dict[str, int] = {}
    for row in rows:
        if row.get("kind") == "broker" and row.get("live", True):
            racks[int(row["node_id"])] = row.get("rack")
        elif row.get("kind") == "partition":
            name = str(row["topic"])
            topics.setdefault(name, {})[int(row["partition"])] = PartitionReplicas(
                tuple(row["replicas"]), int(row.get("leader", -1)))
            if row.get("required_racks") is not None:
                required[name] = int(row["required_racks"])
    return ClusterInputs(racks, topics, required)
