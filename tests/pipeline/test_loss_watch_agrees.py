"""The live loss watch and the offline audit-loss report agree on the same scenario.

The assembled proxy (observe mode, the ledger on) in front of two scripted brokers
(tests/component/test_loss_watch_app.py): 40 records acknowledged by broker 1 (offsets
0..39), then broker 2, never in the ISR, elected with a log that ends at offset 25. The
watch reports 25..39 live; the PySpark audit-loss report over the proxy's own ledger and a
dump of what the new leader holds (offsets 0..24) finds the same range.

What this relies on of the pipeline (its public entry points only, whatever the ledger's
file format): the proxy's ``ledger_dir`` setting and ``Rackguard.stop`` writing what is
queued; :func:`pipeline.ledger_io.read_ledger` (spark, [directory]);
:func:`pipeline.dump_offsets.write_rows` (rows of (topic, partition, offset, timestamp,
key hash), a ``.jsonl`` path); :func:`pipeline.reports.audit_loss` (spark, ledger, dump
path, topic) and its ``missing_ranges`` table (``topic``, ``partition``,
``first_offset``, ``last_offset``, ``records``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from benchmarks.produce_frames import kp_request, make_batch
from pipeline.dump_offsets import write_rows
from pipeline.ledger_io import read_ledger
from pipeline.reports import audit_loss
from proxy.app import Rackguard
from proxy.losswatch.report import ConfirmedLoss
from proxy.settings import load_settings
from tests.component.conftest import RawClient, free_port_block
from tests.component.test_loss_watch_app import TOPIC, TwoBrokers

pytestmark = pytest.mark.spark


async def scenario(tmp: Path) -> list[ConfirmedLoss]:
    brokers = TwoBrokers()
    await brokers.start()
    base = free_port_block(10)
    app = Rackguard(load_settings({
        "upstream": f"127.0.0.1:{brokers.brokers[1].port}", "bootstrap_port": base,
        "broker_port_base": base, "metadata_refresh_interval_ms": 200,
        "loss_watch_confirm_delay_ms": 100, "config_topic": "", "min_insync_racks": 2,
        "observe": True, "ledger_dir": str(tmp / "ledger"), "instance_id": "agree",
        "ledger_snapshot_interval_ms": 100}))
    reported: list[ConfirmedLoss] = []
    assert app.loss_watch is not None
    app.loss_watch.reporter.add_sink(reported.append)
    client = None
    try:
        await app.start()
        client = await RawClient.connect(base + 1)
        for corr in range(4):
            client.send(kp_request(9, [(TOPIC, [(0, make_batch(10))])], correlation_id=corr))
            await client.recv()
        brokers.part.leader, brokers.part.epoch, brokers.part.isr = 2, 4, [2]
        brokers.part.epoch_start = 25
        deadline = asyncio.get_running_loop().time() + 10
        while not reported and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
    finally:
        if client is not None:
            client.close()
        await app.stop()
        await brokers.stop()
    return reported


def test_the_audit_finds_the_ranges_the_watch_reported(spark: Any, tmp_path: Path) -> None:
    reported = asyncio.run(scenario(tmp_path))
    watch = sorted((loss.topic, loss.partition, r.first, r.last)
                   for loss in reported for r in loss.ranges)
    assert watch == [(TOPIC, 0, 25, 39)]
    dump = write_rows([(TOPIC, 0, offset, 0, None) for offset in range(25)],
                      tmp_path / "offsets.jsonl")
    report = audit_loss(spark, read_ledger(spark, [tmp_path / "ledger"]), str(dump), TOPIC)
    audit = sorted((r["topic"], r["partition"], r["first_offset"], r["last_offset"])
                   for r in report.tables["missing_ranges"].collect())
    assert audit == watch
