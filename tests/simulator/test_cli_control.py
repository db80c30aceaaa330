"""The simulator's CLI (as a subprocess) and its HTTP control endpoint."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from simulator import SimulatedCluster, TopicSpec, start_cluster
from simulator.cli import build_parser, config_from_args
from tests.simulator.helpers import RawClient, free_port_base, six_broker_config

ROOT = Path(__file__).resolve().parents[2]


def http(port: int, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method=method)
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_cli_arguments_build_a_config() -> None:
    args = build_parser().parse_args(
        ["--brokers", "4", "--racks", "x,y", "--port-base", "21000", "--topic", "a:5:2",
         "--topic", "b"]
    )
    config = config_from_args(args)
    assert [(b.node_id, b.rack, b.port) for b in config.brokers] == [
        (1, "x", 21000), (2, "y", 21001), (3, "x", 21002), (4, "y", 21003)
    ]
    assert [(t.name, t.partitions, t.replication_factor) for t in config.topics] == [
        ("a", 5, 2), ("b", 3, 3)
    ]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["--topic", "a:x"])


@pytest.mark.integration
def test_cli_runs_until_sigterm() -> None:
    base = free_port_base(4)
    control = free_port_base(1)
    proc = subprocess.Popen(
        [sys.executable, "-m", "simulator", "--brokers", "3", "--port-base", str(base),
         "--control-port", str(control), "--topic", "demo:3:3", "--log-level", "WARNING"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None
        summary = json.loads(proc.stdout.readline())
        assert summary["bootstrap_servers"].startswith(f"127.0.0.1:{base},")
        status, state = http(control, "GET", "/state")
        assert status == 200 and len(state["topics"]["demo"]["partitions"]) == 3
        with RawClient("127.0.0.1", base) as c:
            c.send_frame(b"\x00\x12\x00\x00\x00\x00\x00\x01\xff\xff")  # ApiVersions v0
            assert len(c.recv_frame()) > 10
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)


@pytest.mark.integration
async def test_http_control_endpoint() -> None:
    config = six_broker_config(TopicSpec("t", 3, 3))
    config.control_port = free_port_base(1)
    cluster: SimulatedCluster = await start_cluster(config)
    assert cluster.control is not None
    port = cluster.control.port
    async def call(method: str, path: str, body: Any = None) -> tuple[int, Any]:
        return await asyncio.to_thread(http, port, method, path, body)

    try:
        assert (await call("POST", "/racks/rack-c/kill")) == (200, {"killed": [3, 6]})
        status, state = await call("GET", "/state")
        assert [b["alive"] for b in state["brokers"]] == [True, True, False, True, True, False]
        assert (await call("POST", "/racks/rack-c/restore"))[0] == 200
        status, body = await call("POST", "/topics/t/partitions/0/isr", [2])
        assert status == 200 and body == {"isr": [2], "leader": 2}
        status, body = await call("POST", "/topics/t/partitions/0/isr", [99])
        assert status == 409
        assert (await call("POST", "/topics", {"name": "n", "partitions": 2}))[0] == 200
        status, body = await call("POST", "/topics/n/config",
                                  {"key": "min.insync.replicas", "value": "3"})
        assert body == {"configs": {"min.insync.replicas": "3"}}
        assert (await call("POST", "/nowhere"))[0] == 404
    finally:
        await cluster.stop()
