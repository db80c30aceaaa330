"""The benchmark scripts run (a few iterations), so they never rot, and the figures they
print are sane: a ratio within wide bounds, a time above zero and below a ceiling far
above any healthy run (a shared 2-core machine is noisy; these catch a benchmark that
measures nothing, or the wrong thing, not a slow host).

Every script runs as ``python -m benchmarks.NAME`` from the repository's root, as the
docs say to run them.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NUMBER = r"(-?[\d,]+(?:\.\d+)?)"


def run(module: str, *args: str) -> str:
    result = subprocess.run([sys.executable, "-m", f"benchmarks.{module}", *args],
                            capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def figures(pattern: str, text: str) -> list[float]:
    """The numbers the first match of ``pattern`` captured (NUMBER marks each)."""
    found = re.search(pattern.replace("#", NUMBER), text)
    assert found, f"{pattern!r} not in:\n{text}"
    return [float(g.replace(",", "")) for g in found.groups()]


def test_micro_benchmarks_figures_are_sane() -> None:
    out = run("micro", "--quick")
    for label in ("produce acks peek", "produce walk, 1 partition", "rack decision, ISR of 5",
                  "decision metrics"):
        (us,) = figures(re.escape(label) + r"[^:]*:\s+# us", out)
        assert 0 < us < 500, (label, us)
    (off,) = figures(r"request\+response v9 , policy off:\s+# us", out)
    (observe,) = figures(r"request\+response v9 , observe\s*:\s+# us", out)
    assert 1 < observe / off < 50, (off, observe)  # deciding costs something, not the world
    (read_ms,) = figures(r"metadata v12 read, 2,000 parts:\s+# ms", out)
    assert 0 < read_ms < 500
    without, added = figures(r"fetch v12 1 part\(s\), 60 KB answer:\s+# us without client_rack,"
                             r" \+# us with it", out)
    assert 0 < without < 500 and 0 < added < 100 * without
    for label in ("metadata v12 rewrite", "cluster view update", "60 KB answer"):
        assert label in out


def test_loop_lag_figures_are_sane() -> None:
    # 10,000 partitions: a frame above the 256 KiB line, so the large-frame path runs
    out = run("loop_lag", "--partitions", "10000", "--repeat", "2")
    median, longest = figures(r"longest stall median # ms, max # ms over 2 run", out)
    assert 0 < median <= longest < 5000
    (on_loop,) = figures(r"on the event loop: longest stall # ms", out)
    assert 0 < on_loop < 5000


def test_ledger_overhead_figures_are_sane() -> None:
    out = run("ledger_overhead", "--requests", "300")
    assert "writer thread" in out and "event loop" in out
    off, on = figures(r"1 partition\(s\)/request: .*process CPU incl. writer # -> # us", out)
    assert 0 < off < 10_000 and 0 < on < 10_000
    (per_request,) = figures(r"1 partition\(s\)/request: event loop # us per request", out)
    assert 0 < per_request < 10_000
    assert figures(r"50 partition\(s\)/request: .*rows dropped # of #", out) == [0, 15_000]
    (disk,) = figures(r"disk: # bytes of closed Parquet per acknowledged partition-write", out)
    assert 0 < disk <= 50  # the ledger's bar: at most 50 bytes per partition-write
    (snapshot_kb,) = figures(r"snapshots: # kB in one hour", out)
    assert 0 < snapshot_kb < 1000


def test_connections_figures_are_sane() -> None:
    out = run("connections", "--connections", "200")
    idle, active = figures(r"per idle connection \(with its upstream\): # KiB; "
                           r"per active connection: # KiB", out)
    assert 0 < idle < 200 and 0 < active < 200


def test_config_propagation_figures_are_sane() -> None:
    out = run("config_propagation", "--changes", "5")
    p50, p99 = figures(r"in force on the other: p50 # ms, p99 # ms", out)
    assert 0 < p50 <= p99 < 10_000


def test_metrics_scrape_figures_are_sane() -> None:
    out = run("metrics_scrape", "--topics", "2", "--per-topic", "100", "--repeat", "1")
    assert out.count("scrape, 200 partitions") == 4, out
    ms, healthy = figures(r"scrape, 200 partitions, healthy, at_or_under: # ms, # lines", out)
    assert 0 < ms < 1000
    down_ms, down = figures(r"rack-c down, all: # ms, # lines", out)
    assert 0 < down_ms < 1000
    assert down > healthy  # an outage adds the under-covered partitions' series


def test_fetch_locality_figures_are_sane() -> None:
    out = run("fetch_locality", "--rounds", "1", "--mb", "2", "--fetch-seconds", "0.4")
    (ratio,) = figures(r"throughput client_rack/off: median #", out)
    assert 0.2 < ratio < 5, ratio  # the same bytes through the same proxy, one setting apart
    seen, given = figures(r"all Fetch requests \(seen, given client_rack\): off #, #", out)
    assert seen > 0 and given == 0  # off changes nothing
    seen, given = figures(r"client_rack #, #\n", out)
    assert seen > 0 and given == seen  # on, every consumer Fetch named no rack and got one
    rate, cpu_us = figures(r"small fetches .*: off #/s at # us CPU each", out)
    assert rate > 0 and 0 < cpu_us < 10_000


def test_losswatch_cost_figures_are_sane() -> None:
    out = run("losswatch_cost", "--quick")
    off, on = figures(r"produce round trip, acks=all, 1 record:\s+# us watch off,\s+# us on", out)
    assert 0 < off < on < 10 * off + 100  # the watch costs something, not the world
    (per_partition,) = figures(r"loss watch memory: # bytes per tracked partition", out)
    assert 50 < per_partition < 5000


def test_idle_wakeups_figures_are_sane() -> None:
    out = run("idle_wakeups", "--window", "3", "--warmup", "1")
    cpu, rss = figures(r"idle: # % of a core, # MB RSS", out)
    assert 0 <= cpu < 50 and 10 < rss < 1000
    woke, = figures(r"the loop woke # times a second", out)
    assert 0 < woke < 1000
    fetches, = figures(r"\| control Fetch \| # \|", out)  # the config topic's reader
    assert 0 < fetches < 5  # a long poll: the leader holds each Fetch 0.5 s (docs/performance.md)
