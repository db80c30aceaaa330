"""``python -m benchmarks.bench --smoke`` runs end to end, so the benchmark never rots, and
its figures are sane: each proxy's throughput a bounded ratio of the direct one, its
latency above zero and below a ceiling, its memory and CPU measured, and the ledger's
load carried at close to the rate asked for, and the loss watch's on/off ratio (the same
observe configuration run with the watch on and off, alternated) measured. The bounds
are wide (a shared 2-core machine is noisy): they catch a benchmark that measures
nothing or the wrong target.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_bench_smoke_measures_every_target(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    result = subprocess.run([sys.executable, "-m", "benchmarks.bench", "--smoke",
                             "--loss-watch-pair", "--json", str(out)],
                            capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    figures = json.loads(out.read_text())
    summary = figures["summary"]
    assert set(summary) == {"direct", "rackguard", "rackguard-observe",
                            "rackguard-observe-watch-off", "tansu-proxy"}
    direct = summary["direct"]
    for name, row in summary.items():
        for size in ("1024B", "16384B"):
            ratio = row[f"{size}_mb_s"] / direct[f"{size}_mb_s"]
            assert 0.02 < ratio < 20, (name, size, ratio)
        assert 0 < row["p50_ms"] <= row["p99_ms"] < 2000, name
        if name != "direct":
            assert 5 < row["peak_rss_mb"] < 2000, name
            assert 0 < row["1024B_cpu_s_per_gb"] < 1000, name
    assert "x direct" in result.stdout.splitlines()[0]
    # the loss watch's cost: on over off, per record size, in broad bounds (one round)
    watch = figures["loss_watch"]
    assert set(watch) == {"1024B", "16384B"}
    for size, row in watch.items():
        assert row["rounds"] == 1, (size, row)
        assert 0.3 < row["mb_s_ratio"]["median"] < 3, (size, row)
        assert 0.3 < row["cpu_s_per_gb_ratio"]["median"] < 3, (size, row)
    assert "loss watch on / off" in result.stdout
    # the ledger's cost: both proxies carried the load (5 partitions x 100 requests/s)
    ledger = figures["ledger"]["summary"]["5x100/s"]
    for target in ("observe", "observe+ledger"):
        assert 250 < ledger[f"{target}_partitions_per_s"] < 750, ledger
        assert 0 < ledger[f"{target}_cpu_per_s"] < 2.0, ledger  # of one core, two at most
    assert -1 < ledger["extra_cpu_ratio"] < 10, ledger
    assert "extra CPU" in result.stdout
