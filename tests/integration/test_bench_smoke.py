"""`rackguard bench --smoke` runs end to end, so the benchmark never rots.

Its figures are printed, not asserted: a shared 2-core machine is too noisy.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration


def test_bench_smoke_measures_every_target(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    exe = Path(sys.executable).parent / "rackguard"
    result = subprocess.run([str(exe), "bench", "--smoke", "--json", str(out)],
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stdout + result.stderr
    figures = json.loads(out.read_text())
    summary = figures["summary"]
    assert set(summary) == {"direct", "rackguard", "rackguard-observe", "tansu-proxy"}
    for name, row in summary.items():
        assert row["1024B_mb_s"] > 0 and row["p50_ms"] > 0, name
        if name != "direct":
            assert row["peak_rss_mb"] > 0 and row["1024B_cpu_s_per_gb"] > 0, name
    assert "x direct" in result.stdout.splitlines()[0]
    # the ledger's cost: both proxies carried the load and were measured
    ledger = figures["ledger"]["summary"]["5x100/s"]
    assert ledger["observe_partitions_per_s"] > 0 and ledger["observe+ledger_cpu_per_s"] > 0
    assert "extra CPU" in result.stdout
