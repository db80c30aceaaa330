"""CPU cost of the decision ledger per acks=all produce, with the writer thread running.

    .venv/bin/python benchmarks/ledger_overhead.py [--requests 200000]

Drives the Produce hook (RackEnforcer) and the response transform as fast as
one thread can, without sockets, for 1-partition and 10-partition requests:
once with the ledger off, once on (writing to a temporary directory). Prints
the event-loop thread's CPU per request (what the data path pays) and the
whole process's CPU per request (adding the writer thread's JSON encoding and
file writes), and the rows dropped. Reported, not asserted.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from prometheus_client import CollectorRegistry  # noqa: E402

from benchmarks.micro import snapshot  # noqa: E402
from proxy.cluster_view import ClusterViewStore  # noqa: E402
from proxy.connection import ClientInfo, Forward  # noqa: E402
from proxy.enforcement import EnforcementSettings, RackEnforcer  # noqa: E402
from proxy.enforcement_metrics import EnforcementMetrics  # noqa: E402
from proxy.ledger import DecisionLedger, LedgerConfig  # noqa: E402
from proxy.policy import RackRule  # noqa: E402
from tests.unit._produce_oracle import kp_request, kp_response, make_batch  # noqa: E402

CLIENT = ClientInfo("10.0.0.1:40000", "node-1")


def run(partitions: int, requests: int, ledger_dir: Path | None) -> tuple[float, float, float]:
    """(loop-thread CPU µs/request, process CPU µs/request, rows dropped)."""
    store = ClusterViewStore(time.monotonic)
    store.apply_metadata(snapshot(1, 10), full=True)
    settings = EnforcementSettings(RackRule(default_min_racks=2, max_metadata_age_s=1e9), None,
                                   False, 2.0)
    registry = CollectorRegistry()
    ledger = None
    if ledger_dir is not None:
        ledger = DecisionLedger(LedgerConfig(ledger_dir, "bench"), registry,
                                view_source=lambda: store.view,
                                rule_source=lambda: settings.rule)
        ledger.start()
    enforcer = RackEnforcer(settings, store, _never, lambda f, v: f,
                            EnforcementMetrics(CollectorRegistry(), time.monotonic),
                            time.monotonic, ledger)
    frame = memoryview(kp_request(9, [("topic-0", [(p, make_batch(5)) for p in
                                                   range(partitions)])], correlation_id=1))
    response = memoryview(kp_response(9, [("topic-0", [
        {"index": p, "error_code": 0, "base_offset": 1000} for p in range(partitions)])],
        correlation_id=1))
    thread0, proc0 = time.thread_time(), time.process_time()
    for _ in range(requests):
        action = enforcer(CLIENT, frame, 0, 9, 1)
        assert isinstance(action, Forward) and action.transform is not None
        action.transform(response, 9)
    thread1 = time.thread_time()
    dropped = 0.0
    if ledger is not None:
        ledger.stop(timeout=120)  # let the writer finish: its CPU counts too
        dropped = registry.get_sample_value("rackguard_ledger_rows_dropped_total",
                                            {"reason": "queue_full"}) or 0.0
    proc1 = time.process_time()
    return ((thread1 - thread0) / requests * 1e6, (proc1 - proc0) / requests * 1e6, dropped)


async def _never() -> bool:
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=200_000)
    args = parser.parse_args(argv)
    for partitions in (1, 10):
        off_loop, off_proc, _ = run(partitions, args.requests, None)
        tmp = Path(tempfile.mkdtemp(prefix="rg-ledger-bench-"))
        try:
            on_loop, on_proc, dropped = run(partitions, args.requests, tmp)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        print(f"{partitions:>2} partition(s)/request: hook+transform {off_loop:.1f} us off, "
              f"{on_loop:.1f} us on the loop thread (+{on_loop - off_loop:.1f} us); process "
              f"CPU incl. writer {off_proc:.1f} -> {on_proc:.1f} us (+{on_proc - off_proc:.1f} "
              f"us); rows dropped {dropped:.0f} of {partitions * args.requests}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
