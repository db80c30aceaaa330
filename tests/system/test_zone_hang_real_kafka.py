"""A rack that hangs, on real Apache Kafka: its brokers frozen (SIGSTOP: sockets open,
nothing answers) while the proxy's ``--upstream`` names only that rack's brokers, as a
sidecar in that zone would be configured.

On another cluster (RGTEST_BOOTSTRAP ...), its own proxy is used, with
RGTEST_FREEZE_RACK_CMD / RGTEST_THAW_RACK_CMD / RGTEST_METRICS_URL, freezing the first
of RGTEST_RACKS (the one its bootstrap list should name).

What must hold while it hangs: the proxy's view stays fresh (metadata age at most
twice the refresh interval at every 250 ms scrape) and /readyz stays 200, since two
racks still answer: the poller asks the brokers it knows, and a poll the hung rack does
not answer within the hedge delay is answered by another rack.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator

import pytest

from tests.integration.harness.ports import free_port
from tests.integration.harness.procs import RackguardProxy
from tests.prometheus_text import http_status, read_samples, sample
from tests.system.cluster import BROKER_RACKS

from .rig import SystemRig, wait_ready

FREEZE_S = float(os.environ.get("RGTEST_FREEZE_S", "20"))
REFRESH_MS = 1000


@pytest.fixture
def zone_proxy(rig: SystemRig, tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[tuple[str, float]]:
    """(the /metrics URL of a proxy whose bootstrap list is rack-a's, its refresh interval):
    one started here on the local cluster; on another rig, the rig's own proxy (its
    refresh interval from RGTEST_REFRESH_S, default 2)."""
    if rig.cluster is None:
        if rig.freeze_rack_fn is None or rig.metrics_url is None:
            pytest.skip("needs RGTEST_FREEZE_RACK_CMD, RGTEST_THAW_RACK_CMD and "
                        "RGTEST_METRICS_URL on a rig of your own")
        yield rig.metrics_url, float(os.environ.get("RGTEST_REFRESH_S", "2"))
        return
    port = free_port()
    proxy = RackguardProxy(
        rig.cluster.bootstrap_of(rig.racks[0]), tmp_path_factory.mktemp("zone-proxy"),
        tuple(BROKER_RACKS),
        ("--min-insync-racks", "2", "--metadata-refresh-interval-ms", str(REFRESH_MS),
         "--metrics-port", str(port)))
    proxy.start()
    try:
        wait_ready(f"http://127.0.0.1:{port}/readyz", 60)
        yield f"http://127.0.0.1:{port}/metrics", REFRESH_MS / 1000
    finally:
        proxy.stop()


def scrape(metrics_url: str) -> tuple[float | None, int]:
    """(rackguard_metadata_age_seconds, /readyz status)."""
    try:
        age = sample(read_samples(metrics_url, 2), "rackguard_metadata_age_seconds")
    except OSError:
        age = None
    return age, http_status(metrics_url.rsplit("/", 1)[0] + "/readyz")


def test_view_stays_fresh_while_the_bootstrap_rack_hangs(
    rig: SystemRig, zone_proxy: tuple[str, float]
) -> None:
    metrics_url, refresh_s = zone_proxy
    hung = rig.racks[0]
    rig.freeze_rack(hung)
    worst_age, not_ready = 0.0, 0
    try:
        end = time.monotonic() + FREEZE_S
        while time.monotonic() < end:
            age, status = scrape(metrics_url)
            worst_age = max(worst_age, age if age is not None else float("inf"))
            not_ready += status != 200
            time.sleep(0.25)
    finally:
        rig.thaw_rack(hung)
    print(f"{hung} frozen {FREEZE_S:.0f} s: worst metadata age {worst_age:.1f} s, "
          f"{not_ready} scrape(s) not ready")
    assert worst_age <= 2 * refresh_s and not_ready == 0
