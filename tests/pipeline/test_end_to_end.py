"""End to end: simulator + in-process proxy with the ledger on + produces through a rack outage.

Producers send acks=all requests before, during (two of three racks down) and
after an outage; the ledger the proxy wrote is then read by the durability,
whatif and audit-loss reports, whose figures must equal what the clients
were told: every acknowledged write counted once with its bytes, every
rejection counted with its reason, all acknowledged bytes on an ISR of >= 2
racks (the proxy enforced it), time under 2 racks seen in the snapshots
during the outage, and every acknowledged offset counted by the loss audit.

What this does not show: that no acknowledged record is lost. The simulator
keeps one log per partition shared by all its brokers, so loss is impossible
here by construction; tests/system/test_loss_audit_real_kafka.py shows it on
real Kafka. The audit's figures are checked here only against each other (the
report over a dump and the one-command audit agree).
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.producer import ProduceResponse

from benchmarks.produce_frames import kp_request, make_batch
from pipeline.audit import main as audit_main
from pipeline.dump_offsets import read_topic, write_rows
from pipeline.labels import human_bytes
from pipeline.ledger_io import read_ledger
from pipeline.reports import audit_loss, durability, whatif
from proxy.app import Rackguard
from proxy.settings import load_settings
from simulator.cluster import SimulatedCluster, start_cluster
from simulator.config import SimulatorConfig, TopicSpec, racked_brokers
from tests.component.conftest import RawClient, free_port_block

pytestmark = pytest.mark.spark

RACKS = ["rack-a", "rack-b", "rack-c"]
VERSION = 9
PER_PHASE = 4  # requests per partition per phase
RECORDS = 3  # records per request


class Producer:
    """Raw acks=all produces to each partition's leader through the proxy; keeps the answers."""

    def __init__(self, cluster: SimulatedCluster, proxy_base: int) -> None:
        self.cluster = cluster
        self.base = proxy_base
        self.corr = 0
        self.clients: list[RawClient] = []
        self.acked: list[tuple[int, int, int, int]] = []  # partition, base offset, bytes, racks
        self.rejected: list[str] = []
        self.other: list[int] = []

    async def phase(self, partitions: int) -> None:
        for p in range(partitions):
            state = self.cluster.partition("orders", p)
            racks = len({RACKS[(n - 1) % 3] for n in state.isr})
            client = await RawClient.connect(self.base + state.leader)
            self.clients.append(client)
            for _ in range(PER_PHASE):
                self.corr += 1
                batch = make_batch(RECORDS, value=f"p{p}-{self.corr}".encode())
                client.send(kp_request(VERSION, [("orders", [(p, batch)])], acks=-1,
                                       correlation_id=self.corr))
                resp = ProduceResponse.decode(await client.recv(), version=VERSION,
                                              header=True, framed=True)
                [part] = resp.responses[0].partition_responses
                if part.error_code == 0:
                    self.acked.append((p, part.base_offset, len(batch), racks))
                elif part.error_message and part.error_message.startswith("NOT_ENOUGH_RACKS"):
                    self.rejected.append(part.error_message)
                else:
                    self.other.append(part.error_code)

    def close(self) -> None:
        for c in self.clients:
            c.close()


async def outage_traffic(tmp: Path, spark: Any) -> tuple[Producer, float, Path, int]:
    base = free_port_block(60)
    cluster = await start_cluster(SimulatorConfig(
        brokers=racked_brokers(6, RACKS, port_base=base),
        topics=[TopicSpec("orders", 3, 5, {"min.insync.replicas": "2"})]))
    app = Rackguard(load_settings({
        "upstream": cluster.bootstrap_servers, "bootstrap_port": base + 20,
        "broker_port_base": base + 20, "min_insync_racks": 2,
        "metadata_refresh_interval_ms": 60_000, "ledger_dir": str(tmp / "ledger"),
        "ledger_snapshot_interval_ms": 100, "instance_id": "e2e",
        # the whole cluster's view: partition-time at N racks counts from the start, not
        # from each topic's first produce (a sidecar's watched view)
        "view_scope": "cluster"}))
    producer = Producer(cluster, base + 20)
    try:
        await app.start()
        # partition 2 on two racks only: acknowledged, but what min.insync.racks=3 rejects
        p2 = cluster.partition("orders", 2)
        other = next(n for n in p2.replicas if RACKS[(n - 1) % 3] != RACKS[(p2.leader - 1) % 3])
        await cluster.set_isr("orders", 2, [p2.leader, other])
        await app.poller.refresh_now()
        await asyncio.sleep(0.3)  # snapshots see partition 2 at two racks
        await producer.phase(3)
        await cluster.kill_rack("rack-b")
        await cluster.kill_rack("rack-c")
        await app.poller.refresh_now()
        started = time.monotonic()
        await asyncio.sleep(0.5)  # snapshots see the outage
        await producer.phase(3)
        outage = time.monotonic() - started
        await cluster.restore_rack("rack-b")
        await cluster.restore_rack("rack-c")
        await app.poller.refresh_now()
        await asyncio.sleep(0.3)
        await producer.phase(3)
        await app.stop()  # the ledger writes what is queued
        rows = await asyncio.to_thread(lambda: list(read_topic(
            cluster.bootstrap_servers, "orders", 60)))
        dump = write_rows(rows, tmp / "orders.parquet")
        # the one-command audit reads the same topic from the cluster itself
        audited = await asyncio.to_thread(audit_main, [
            "--bootstrap", cluster.bootstrap_servers, "--ledger", str(tmp / "ledger"),
            "--out", str(tmp / "audit")], spark)
    finally:
        producer.close()
        await app.stop()
        await cluster.stop()
    return producer, outage, dump, audited


async def test_reports_over_a_real_ledger_through_a_rack_outage(
    spark: Any, tmp_path: Path
) -> None:
    producer, outage, dump, audited = await outage_traffic(tmp_path, spark)
    acked, rejected = producer.acked, producer.rejected
    assert len(acked) == 2 * 3 * PER_PHASE, "before and after the outage all are acknowledged"
    assert len(rejected) + len(producer.other) == 3 * PER_PHASE
    assert rejected, "the outage must produce NOT_ENOUGH_RACKS rejections"
    assert set(producer.other) <= {19}  # an ISR below min.insync.replicas: the broker's 19

    ledger = read_ledger(spark, [tmp_path / "ledger"])
    d = durability(spark, ledger, 2).summary
    assert d["malformed_decision_rows"] == 0 and d["malformed_snapshot_rows"] == 0
    assert d["instances"] == ["e2e"]
    assert d["produce_requests"] == d["partition_writes"] == 3 * 3 * PER_PHASE
    assert d["acked_writes"] == len(acked)
    assert d["acked_bytes"] == sum(b for _, _, b, _ in acked)
    assert d["acked_records"] == RECORDS * len(acked)
    assert d["share_bytes_ge_n"] == 1.0  # enforced: nothing acknowledged on one rack
    verdict = durability(spark, ledger, 2).verdict
    assert verdict.findings[0] == (
        f"All acknowledged bytes ({human_bytes(d['acked_bytes'])}, {RECORDS * len(acked)} "
        "records, on 1 topic) were acknowledged while their in-sync replicas spanned at least "
        "2 racks: losing any one rack would have lost none of them.")
    assert verdict.findings[1].startswith(
        f"The proxy refused {len(rejected)} partition writes (NOT_ENOUGH_RACKS: "
        f"{len(rejected)})")
    assert not verdict.at_risk
    assert d["rejections_by_reason"] == {"rejected:NOT_ENOUGH_RACKS": len(rejected)}
    assert d["rejected_writes"] == len(rejected)
    assert d["broker_errors"] == len(producer.other)
    # all three partitions spent the outage on one rack (rack-a only)
    assert round(3 * 0.4, 6) <= d["seconds_under"] <= 3 * (outage + 0.5)  # 1.2, not 1.2000..2
    assert 0.2 <= d["seconds_at"]  # partition 2 before the outage

    w = whatif(spark, ledger, [2, 3]).summary["by_min_racks"]
    assert w["2"]["would_reject_writes"] == 0
    assert w["3"]["would_reject_writes"] == sum(1 for *_, r in acked if r < 3) >= PER_PHASE
    assert w["3"]["would_reject_bytes"] == sum(b for _, _, b, r in acked if r < 3)

    a = audit_loss(spark, ledger, str(dump)).summary
    assert a["acked_offsets"] == RECORDS * len(acked)  # every acknowledged offset, once
    assert a["unverifiable_acked_writes"] == 0  # each carries its base offset
    # rackguard audit: the same figures in one command, with its own dump (whether any
    # offset is missing is the simulator's property, not the proxy's: not asserted here)
    assert audited == 0
    summary = json.loads((tmp_path / "audit" / "summary.json").read_text())
    assert (summary["acked_offsets"], summary["missing_offsets"]) == (
        a["acked_offsets"], a["missing_offsets"])
    assert (tmp_path / "audit" / "offsets.parquet").exists()
