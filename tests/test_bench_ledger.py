"""The ledger benchmark's arithmetic: the extra CPU is the median of per-round ratios."""

from __future__ import annotations

import os
import time

import pytest

from benchmarks.bench import cpu_seconds
from benchmarks.bench_ledger import LedgerResults, LedgerSample, table


def sample(target: str, rnd: int, us_per_partition: float, rate: float = 1000.0) -> LedgerSample:
    return LedgerSample(target, "5x100/s", rnd, us_per_partition * rate / 1e6, rate)


def test_extra_cpu_is_the_median_of_each_rounds_pair() -> None:
    results = LedgerResults()
    # a slow round (both targets slower) moves neither the ratio nor the median much
    for rnd, (off, on) in enumerate([(10, 11), (10, 12), (20, 21), (10, 13), (10, 11.5)]):
        results.samples += [sample("observe", rnd, off), sample("observe+ledger", rnd, on)]
    row = results.summary()["5x100/s"]
    # ratios: +10 %, +20 %, +5 %, +30 %, +15 %
    assert row["extra_cpu_ratio"] == pytest.approx(0.15)
    assert row["extra_cpu_q1"] == pytest.approx(0.075)
    assert row["extra_cpu_q3"] == pytest.approx(0.25)
    assert row["rounds"] == 5
    assert row["observe_cpu_us_per_partition"] == pytest.approx(10)
    assert "+15.0%" in table(results.summary())


def test_a_round_without_its_pair_is_left_out_of_the_ratio() -> None:
    results = LedgerResults()
    results.samples += [sample("observe", 0, 10), sample("observe+ledger", 0, 11),
                        sample("observe", 1, 10)]  # the run stopped before its pair
    row = results.summary()["5x100/s"]
    assert row["rounds"] == 1
    assert row["extra_cpu_ratio"] == pytest.approx(0.1)
    assert row["extra_cpu_q1"] == row["extra_cpu_q3"] == pytest.approx(0.1)


def test_cpu_seconds_counts_this_process_finely() -> None:
    before = cpu_seconds(os.getpid())
    deadline = time.process_time() + 0.05
    while time.process_time() < deadline:
        pass
    spent = cpu_seconds(os.getpid()) - before
    assert 0.04 <= spent < 1.0  # at clock-tick resolution 0.05 s could read as 0.04-0.06
