"""How fresh the proxy's view stays while a zone fails: worst metadata age and time to fail
over, per rack and fault, with the proxy's default timing.

    .venv/bin/python benchmarks/zone_faults.py [--seconds 30] [--modes kill,hang,...]

The simulator (six brokers, two per rack; a test double) runs in this process, and
``rackguard serve`` (defaults: refresh every 2 s, hedge after 0.5 s, 1 s connect and 2 s
request timeouts) in front of it with rack-a's brokers as its bootstrap list. Each rack
in turn is killed, hung, blackholed and cut off from the proxy for ``--seconds``, then
restored; /metrics and /readyz are read every 250 ms. Printed per fault: the worst
``rackguard_metadata_age_seconds``, the longest poll (``rackguard_metadata_poll_duration_seconds``:
the time a poll took to get an answer from some broker, its failovers and hedges
included), and how many reads found the proxy not ready. Figures, not assertions: the
tests assert the bounds (tests/integration/test_zone_faults.py).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from simulator.config import SimulatorConfig, TopicSpec, racked_brokers
from simulator.faults import Fault
from simulator.threaded import ThreadedCluster

RACKS = ("rack-a", "rack-b", "rack-c")
MODES = ("kill", "hang", "blackhole", "partition-proxy")
RACKGUARD = Path(sys.executable).parent / "rackguard"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def read(port: int) -> tuple[float, float, bool]:
    """(metadata age, last poll duration, ready)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
        values = {s.name: s.value for f in text_string_to_metric_families(r.read().decode())
                  for s in f.samples if not s.labels}
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2):
            ready = True
    except urllib.error.HTTPError:
        ready = False
    return (values.get("rackguard_metadata_age_seconds", float("inf")),
            values.get("rackguard_metadata_poll_duration_seconds", 0.0), ready)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="each fault's length")
    parser.add_argument("--modes", default=",".join(MODES))
    args = parser.parse_args(argv)
    base = 20000 + os.getpid() % 5000
    cluster = ThreadedCluster(SimulatorConfig(
        brokers=racked_brokers(6, list(RACKS), port_base=base),
        topics=[TopicSpec("zones", 6, 3, {"min.insync.replicas": "2"})])).start()
    metrics = free_port()
    log = tempfile.NamedTemporaryFile(prefix="rackguard-zone-", suffix=".log", delete=False)
    proxy = subprocess.Popen(
        [str(RACKGUARD), "serve", "--upstream", f"127.0.0.1:{base},127.0.0.1:{base + 3}",
         "--bootstrap-port", str(free_port()), "--broker-port-base", str(base + 100),
         "--min-insync-racks", "2", "--metrics-port", str(metrics)],
        stdout=log, stderr=subprocess.STDOUT)
    print(f"{'fault':<26} {'worst age':>10} {'longest poll':>13} {'not ready':>10}")
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if read(metrics)[2]:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"rackguard did not get ready; see {log.name}")
            time.sleep(0.2)
        for mode in args.modes.split(","):
            for rack in RACKS:
                if mode == "kill":
                    cluster.kill_rack(rack)
                else:
                    cluster.fault_rack(rack, Fault(mode))
                worst_age = longest = 0.0
                unready = reads = 0
                end = time.monotonic() + args.seconds
                while time.monotonic() < end:
                    age, poll, ready = read(metrics)
                    worst_age, longest = max(worst_age, age), max(longest, poll)
                    unready += not ready
                    reads += 1
                    time.sleep(0.25)
                if mode == "kill":
                    cluster.restore_rack(rack)
                else:
                    cluster.fault_rack(rack, None)
                where = "bootstrap inside" if rack == "rack-a" else "bootstrap outside"
                print(f"{mode + ' ' + rack + ' (' + where + ')':<44} {worst_age:>8.2f} s "
                      f"{longest:>11.2f} s {unready:>5}/{reads}", flush=True)
                time.sleep(3)
    finally:
        proxy.terminate()
        proxy.wait(10)
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
