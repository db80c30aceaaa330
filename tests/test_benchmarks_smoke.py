"""The microbenchmarks run (a few iterations), so they never rot; figures are not asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_micro_benchmarks_quick_run_prints_every_figure() -> None:
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "micro.py"), "--quick"],
                            capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    for label in ("produce acks peek", "produce walk", "rack decision", "metadata v12 rewrite",
                  "metadata v12 read", "cluster view update"):
        assert label in result.stdout, result.stdout
