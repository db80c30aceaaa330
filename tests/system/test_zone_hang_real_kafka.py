"""A rack that hangs, on real Apache Kafka: its brokers frozen (SIGSTOP: sockets open,
nothing answers) while the proxy's ``--upstream`` names only that rack's brokers, as a
sidecar in that zone would be configured.

What must hold while it hangs: the proxy's view stays fresh (metadata age at most
twice the refresh interval at every 250 ms scrape) and /readyz stays 200, since two
racks still answer: the poller asks the brokers it knows, and a poll the hung rack does
not answer within the hedge delay is answered by another rack.
"""

from __future__ import annotations

import os
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.harness.ports import free_port
from tests.integration.harness.procs import RackguardProxy
from tests.system.cluster import BROKER_RACKS

from .rig import SystemRig, wait_ready

FREEZE_S = float(os.environ.get("RGTEST_FREEZE_S", "20"))
REFRESH_MS = 1000


@pytest.fixture
def zone_proxy(rig: SystemRig, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[tuple[RackguardProxy, int]]:
    if rig.cluster is None:
        pytest.skip("needs the local Maven cluster (it names each rack's brokers)")
    port = free_port()
    proxy = RackguardProxy(
        rig.cluster.bootstrap_of(rig.racks[0]), tmp_path_factory.mktemp("zone-proxy"),
        tuple(BROKER_RACKS),
        ("--min-insync-racks", "2", "--metadata-refresh-interval-ms", str(REFRESH_MS),
         "--metrics-port", str(port)))
    proxy.start()
    try:
        wait_ready(f"http://127.0.0.1:{port}/readyz", 60)
        yield proxy, port
    finally:
        proxy.stop()


def scrape(port: int) -> tuple[float | None, int]:
    """(rackguard_metadata_age_seconds, /readyz status)."""
    age = None
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
            for family in text_string_to_metric_families(r.read().decode()):
                for s in family.samples:
                    if s.name == "rackguard_metadata_age_seconds":
                        age = s.value
    except OSError:
        pass
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            status = r.status
    except urllib.error.HTTPError as exc:
        status = exc.code
    except OSError:
        status = 0
    return age, status


def test_view_stays_fresh_while_the_bootstrap_rack_hangs(
    rig: SystemRig, zone_proxy: tuple[RackguardProxy, int]
) -> None:
    _, port = zone_proxy
    hung = rig.racks[0]
    rig.freeze_rack(hung)
    worst_age, not_ready = 0.0, 0
    try:
        end = time.monotonic() + FREEZE_S
        while time.monotonic() < end:
            age, status = scrape(port)
            worst_age = max(worst_age, age if age is not None else float("inf"))
            not_ready += status != 200
            time.sleep(0.25)
    finally:
        rig.thaw_rack(hung)
    print(f"{hung} frozen {FREEZE_S:.0f} s: worst metadata age {worst_age:.1f} s, "
          f"{not_ready} scrape(s) not ready")
    assert worst_age <= 2 * REFRESH_MS / 1000 and not_ready == 0
