"""The placement command pointed at a cluster uses the min.insync.racks values set
through the Admin API (the config topic) as the proxies apply them: a topic's value over
the default and over --config's file, the cluster default, the minimums per dimension;
the command's flags still win; ``--ignore-config-topic`` leaves them out; records the
proxies would skip are skipped and said; a config topic that cannot be read is exit 2.

The cluster and the config topic are fakes (plain values in place of the live reads);
tests/system/test_rack_dimensions_real_kafka.py reads a real one."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from proxy.admin.state import Change, Resource, StoredValue, encode_record
from proxy.placement import command, config_topic, live
from proxy.placement.config_topic import Record, StoredConfigs, apply_records
from proxy.placement.model import PartitionReplicas as P
from proxy.placement.sources import ClusterInputs, SourceError

RACKS = {1: "eu-central-1/a", 2: "eu-central-1/b", 3: "eu-west-1/a", 4: "eu-central-1/c"}
TOPICS = {  # every partition: 2 racks, 1 region
    "orders": {0: P((1, 2), 1)},
    "logs": {0: P((1, 4), 1)},
    "audit": {0: P((2, 4), 2)},
}


def record(topic: str | None, value: int | None, dimension: str | None = None) -> Record:
    change = Change(Resource(topic, dimension),
                    None if value is None else StoredValue(value, 1.0, "kafka-configs"))
    key, raw = encode_record(change)
    return key, raw, b"kafka-configs"


class Fake:
    def __init__(self, monkeypatch: pytest.MonkeyPatch, records: list[Record]) -> None:
        self.read: list[tuple[str, str]] = []

        def read_cluster(bootstrap: str, **kw: Any) -> ClusterInputs:
            return ClusterInputs(dict(RACKS), {t: dict(p) for t, p in TOPICS.items()})

        def read_config_topic(bootstrap: str, topic: str, timeout_s: float = 10.0
                              ) -> StoredConfigs:
            self.read.append((bootstrap, topic))
            return apply_records(topic, records)

        monkeypatch.setattr(live, "read_cluster", read_cluster)
        monkeypatch.setattr(config_topic, "read_config_topic", read_config_topic)


def audit(*argv: str) -> tuple[int, dict[str, Any], str]:
    out, err = io.StringIO(), io.StringIO()
    code = command.run(["audit", "--bootstrap", "kafka:9092", "--json", *argv], out, err)
    return code, json.loads(out.getvalue()) if code == 0 else {}, err.getvalue()


def required(report: dict[str, Any]) -> dict[str, int]:
    return {t["topic"]: t["min_insync_racks"] for t in report["topics"]}


def test_topic_values_and_the_cluster_default_from_the_config_topic(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake = Fake(monkeypatch, [record("orders", 3), record(None, 1), record("logs", 3),
                              record("logs", None)])  # logs: set, then deleted
    code, report, err = audit()
    assert code == 0, err
    assert fake.read == [("kafka:9092", "__rackguard_configs")]
    assert required(report) == {"orders": 3, "logs": 1, "audit": 1}
    assert "2 value(s) from the config topic __rackguard_configs" in err
    # orders needs 3 racks, its replicas span 2: unsatisfiable
    [orders] = [t for t in report["topics"] if t["topic"] == "orders"]
    assert [p["status"] for p in orders["partitions_at_risk"]] == ["unsatisfiable"]


def test_flags_win_and_ignore_leaves_the_config_topic_out(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake = Fake(monkeypatch, [record("orders", 3), record(None, 1)])
    _, report, _ = audit("--topic-min-insync-racks", "orders=2")
    assert required(report)["orders"] == 2 and required(report)["logs"] == 1
    _, report, _ = audit("--min-insync-racks", "2")
    assert set(required(report).values()) == {2}
    fake.read.clear()
    _, report, err = audit("--ignore-config-topic")
    assert fake.read == [] and set(required(report).values()) == {2}
    assert "config topic" not in err


def test_the_config_files_topic_and_values_under_the_dynamic_ones(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = Fake(monkeypatch, [record("orders", 1)])
    toml = tmp_path / "rackguard.toml"
    toml.write_text('upstream = "kafka:9092"\nmin_insync_racks = 2\n'
                    'config_topic = "_rg_configs"\n'
                    'topic_min_insync_racks = { orders = 3, logs = 3 }\n')
    _, report, _ = audit("--config", str(toml))
    assert fake.read == [("kafka:9092", "_rg_configs")]
    # the dynamic value beats the file's for orders; logs keeps the file's
    assert required(report) == {"orders": 1, "logs": 3, "audit": 2}
    fake.read.clear()
    audit("--config", str(toml), "--config-topic", "other")
    assert fake.read == [("kafka:9092", "other")]


def test_minimums_per_dimension_from_the_config_topic(monkeypatch: pytest.MonkeyPatch) -> None:
    Fake(monkeypatch, [record("orders", 2, "region"), record(None, 2, "zone"),
                       record("audit", 2, "rack")])  # a dimension rack_dimensions lacks
    code, report, err = audit("--min-insync-racks", "1", "--rack-dimensions", "region/zone")
    assert code == 0, err
    at_risk = {t["topic"]: t["partitions_at_risk"] for t in report["topics"]}
    [orders] = at_risk["orders"]  # one region, needs 2: unsatisfiable, naming the region
    assert orders["status"] == "unsatisfiable" and orders["dimension"]["name"] == "region"
    [logs] = at_risk["logs"]  # 2 zones, the zone default 2: fragile
    assert logs["status"] == "fragile" and logs["dimension"]["name"] == "zone"
    # without dimensions they cannot be read: said, not used
    code, report, err = audit("--min-insync-racks", "1")
    assert code == 0 and all(not t["partitions_at_risk"] for t in report["topics"])
    assert "neither --rack-dimensions nor --config says how racks split" in err


def test_unreadable_records_are_skipped_and_a_failed_read_is_exit_2(
        monkeypatch: pytest.MonkeyPatch) -> None:
    Fake(monkeypatch, [(b"topic:orders", b"not json", b""), record("orders", 3)])
    code, report, err = audit()
    assert code == 0 and required(report)["orders"] == 3
    assert "1 record(s) rackguard cannot read, skipped" in err

    def fails(bootstrap: str, topic: str, timeout_s: float = 10.0) -> StoredConfigs:
        raise SourceError(f"config topic {topic}: not read to its end within 10 s "
                          "(--ignore-config-topic audits with the file and flags only)")

    monkeypatch.setattr(config_topic, "read_config_topic", fails)
    code, _, err = audit()
    assert code == 2 and "--ignore-config-topic" in err
    out = io.StringIO()
    assert command.run(["plan", "--bootstrap", "kafka:9092", "--fix"], out, io.StringIO()) == 2


def test_apply_records_in_offset_order() -> None:
    got = apply_records("t", [record("a", 2), record("a", 3), record(None, 2),
                              record("b", 2, "region"), record("b", None, "region"),
                              (None, b"{}", b"")])
    assert got.configs.topics["a"].value == 3 and got.configs.cluster_default is not None
    assert not got.configs.dimensions and (got.records, got.skipped, got.count()) == (6, 1, 2)
