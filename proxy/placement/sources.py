"""Where the placement command's inputs come from, turned into :mod:`.model` values.

Invariant: parsing only (files, flags, plain dicts); the one network source
is :mod:`.live`. Bad input raises :class:`SourceError` with a message naming
the file or flag and what is wrong.

* ``--brokers 1=rack-a,2=rack-b,3=``: broker id -> rack (``ID=``: no rack);
* an assignment file: the JSON kafka-reassign-partitions reads and writes
  (``{"version":1,"partitions":[{"topic","partition","replicas"}]}``);
* a ledger snapshot file (``snapshots-*.parquet``, or the open ``.arrows``): the
  latest state in it (brokers with their racks, partitions with replicas and
  leader, and the ``required_racks`` the proxy's rule gives each topic).
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
    """The latest state in a ledger snapshot file (Parquet, or the open Arrow stream):
    of the latest run in it, each topic's latest row, the latest brokers and rule."""
    from proxy.ledger.files import read_stream  # pyarrow: only when this command runs

    try:
        if path.suffix == ".parquet":
            import pyarrow.parquet as pq

            table = pq.read_table(str(path))
        else:
            table = read_stream(path)
    except (OSError, ValueError) as exc:
        raise SourceError(f"{path}: not a ledger snapshot file ({exc})") from None
    if table is None or "kind" not in table.column_names:
        raise SourceError(f"{path}: not a ledger snapshot file")
    rows = table.to_pylist()
    if not rows:
        raise SourceError(f"{path}: no snapshot in the file")
    return snapshot_inputs(rows)


def snapshot_inputs(rows: Iterable[Mapping[str, Any]]) -> ClusterInputs:
    """The latest state of the latest (instance, run) among ledger snapshot rows."""
    rows = list(rows)
    latest_run = max(((r["ts"], r["instance"], r["run"]) for r in rows), default=None)
    if latest_run is None:
        return ClusterInputs({}, {})
    mine = sorted((r for r in rows if (r["instance"], r["run"]) == latest_run[1:]),
                  key=lambda r: r["seq"])
    racks: dict[int, str | None] = {}
    topics: dict[str, dict[int, PartitionReplicas]] = {}
    rule: Mapping[str, Any] | None = None
    for row in mine:
        kind = row["kind"]
        if kind == "brokers":
            racks = {n: (r or None) for n, r, live in zip(
                row["nodes"], row["racks"], row["live"], strict=True) if live}
        elif kind == "topic":
            topics[row["topic"]] = {
                p: PartitionReplicas(tuple(reps), leader) for p, reps, leader in zip(
                    row["partitions"], row["replicas"], row["leaders"], strict=True)}
        elif kind == "gone":
            topics.pop(row["topic"], None)
        elif kind == "rule":
            rule = row
    required: dict[str, int] = {}
    if rule is not None:
        exact = dict(zip(rule["rule_topics"] or [], rule["rule_topic_racks"] or [], strict=True))
        prefixes = list(zip(rule["rule_prefixes"] or [], rule["rule_prefix_racks"] or [],
                            strict=True))
        for name in topics:
            value = exact.get(name)
            if value is None:
                value = next((v for p, v in prefixes if name.startswith(p)),
                             rule["default_min_racks"])
            required[name] = int(value)
    return ClusterInputs(racks, topics, required)
