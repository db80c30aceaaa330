"""The benchmark scripts run (a few iterations), so they never rot; figures are not asserted
(timed assertions flake on a shared machine)."""

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
                  "metadata v12 read", "cluster view update", "60 KB answer"):
        assert label in result.stdout, result.stdout


def test_loop_lag_quick_run_prints_its_figures() -> None:
    # 10,000 partitions: a frame above the 256 KiB line, so the large-frame path runs
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "loop_lag.py"), "--partitions", "10000",
         "--repeat", "2"],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "run 2: longest stall" in result.stdout, result.stdout
    assert "longest stall median" in result.stdout, result.stdout
    assert "on the event loop: longest stall" in result.stdout, result.stdout


def test_ledger_overhead_quick_run_prints_its_figures() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "ledger_overhead.py"), "--requests", "300"],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "Python encoder" in result.stdout and "event loop" in result.stdout, result.stdout
    assert "process CPU incl. writer" in result.stdout, result.stdout


def test_connections_benchmark_small_run_prints_its_figures() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.connections", "--connections", "200"],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "per idle connection" in result.stdout and "per active" in result.stdout, \
        result.stdout


def test_config_propagation_quick_run_prints_its_figures() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "config_propagation.py"), "--changes", "5"],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "in force on the other: p50" in result.stdout, result.stdout


def test_metrics_scrape_small_run_prints_its_figures() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.metrics_scrape", "--topics", "2", "--per-topic",
         "100", "--repeat", "1"],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("scrape, 200 partitions") == 4, result.stdout
    assert "rack-c down, all" in result.stdout, result.stdout


def test_fetch_locality_quick_run_prints_its_figures() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "fetch_locality.py"), "--rounds", "1",
         "--mb", "2", "--fetch-seconds", "0.4"],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "throughput client_rack/off" in result.stdout, result.stdout
    assert "small fetches" in result.stdout and "Fetch requests: off" in result.stdout


def test_losswatch_cost_quick_run_prints_its_figures() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "losswatch_cost.py"), "--quick"],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "watch off" in result.stdout and "bytes per tracked partition" in result.stdout, (
        result.stdout)
