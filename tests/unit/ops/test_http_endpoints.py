"""The operations HTTP endpoint's thread: it serves, sleeps between requests (no poll
twice a second in an idle sidecar) and still stops at once."""

from __future__ import annotations

import time
import urllib.request

from proxy.ops.health import Health
from proxy.ops.http_endpoints import OpsHttpServer


def _switches(native_id: int) -> int:
    with open(f"/proc/self/task/{native_id}/status") as f:
        return sum(int(line.split()[1]) for line in f if "ctxt_switches:" in line)


def test_serves_sleeps_between_requests_and_stops_at_once() -> None:
    server = OpsHttpServer("127.0.0.1", 0, lambda: b"m 1\n", lambda: Health(True, "alive"),
                           lambda: Health(False, "not yet"))
    server.start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        with urllib.request.urlopen(base + "/healthz", timeout=5) as r:
            assert r.status == 200 and r.read() == b"alive\n"
        thread = server._thread
        assert thread is not None and thread.native_id is not None
        before = _switches(thread.native_id)
        time.sleep(1.2)  # serve_forever's default would have woken twice
        assert _switches(thread.native_id) - before <= 1
    finally:
        began = time.monotonic()
        server.stop()
    assert time.monotonic() - began < 1.0 and server._thread is None
