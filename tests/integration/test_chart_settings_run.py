"""The settings file the Helm chart writes, run: ``rackguard serve --config`` with the
ConfigMap's rackguard.toml in front of Tansu answers its probes, applies a new content of
the file without a restart (the mounted ConfigMap's change), and drains on SIGTERM.

Ports: the chart's are given free ones here, and the operations endpoint is kept on
127.0.0.1 (``RACKGUARD_METRICS_HOST``, the environment winning over the file as in a
pod's env), as every test on this machine listens on loopback only."""

from __future__ import annotations

import os
import re
import signal
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests.deploy import tools
from tests.deploy.test_helm_chart import VALUES, render
from tests.prometheus_text import http_status

from .harness.ports import free_port, free_port_block
from .harness.procs import ManagedProcess, TansuBroker, proxy_unavailable_reason
from .harness.wire import wait_for_port


def wait_for(predicate: object, timeout: float, what: str) -> float:
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        if predicate():  # type: ignore[operator]
            return time.monotonic() - began
        time.sleep(0.1)
    raise AssertionError(f"{what}: not within {timeout} s")


def test_the_charts_settings_serve_reload_and_drain(
    tansu_upstream: TansuBroker, tmp_path: Path
) -> None:
    helm = tools.helm()
    if isinstance(helm, str):
        pytest.skip(helm)
    reason = proxy_unavailable_reason()
    if reason:
        pytest.skip(reason)
    bootstrap, base, metrics = free_port(), free_port_block((tansu_upstream.node_id,)), \
        free_port()
    text = render(helm, VALUES["default"], "--set", f"upstream={tansu_upstream.bootstrap}",
                  "--set", f"ports.bootstrap={bootstrap}", "--set",
                  f"ports.brokerPortBase={base}", "--set", f"ports.metrics={metrics}",
                  "--set", "zone.source=off", "--set", "configWatchSeconds=1",
                  "--set", "minInsyncRacks=1")
    (config,) = [d for d in yaml.safe_load_all(text)
                 if d and d["kind"] == "ConfigMap" and "rackguard.toml" in d["data"]]
    toml = tmp_path / "rackguard.toml"
    toml.write_text(config["data"]["rackguard.toml"])
    env = {**os.environ, "RACKGUARD_METRICS_HOST": "127.0.0.1",
           "RACKGUARD_METRICS_PORT": str(metrics)}
    proc = ManagedProcess("rackguard", [str(Path(sys.executable).parent / "rackguard"),
                                        "serve", "--config", str(toml)],
                          tmp_path / "rackguard.log", env=env)
    proc.start()
    try:
        wait_for_port("127.0.0.1", bootstrap, 30, proc=proc.proc)
        ops = f"http://127.0.0.1:{metrics}"
        assert http_status(f"{ops}/healthz") == 200
        wait_for(lambda: http_status(f"{ops}/readyz") == 200, 60, "/readyz 200")
        # the ConfigMap's new content, as the kubelet swaps it in: applied, no restart
        new = tmp_path / "rackguard.toml.new"
        new.write_text(toml.read_text().replace("min_insync_racks = 1",
                                                "min_insync_racks = 2"))
        os.replace(new, toml)
        took = wait_for(lambda: "min.insync.racks=2" in proc.log_tail(20000), 10,
                        "the reload")
        assert proc.alive() and took < 5
        assert proc.proc is not None
        os.kill(proc.proc.pid, signal.SIGTERM)
        assert proc.proc.wait(15) == 0
        assert re.search(r"stopped \(drain clean\)", proc.log_tail(20000))
    finally:
        proc.stop()
