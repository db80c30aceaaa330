"""Connection limits and the rate-limited bad-input log (pure, with a stepped clock)."""

from __future__ import annotations

import logging

import pytest

from proxy.security.bad_input_log import OTHER, BadInputLog
from proxy.security.limits import ConnectionLimits


def test_total_and_per_address_limits() -> None:
    limits = ConnectionLimits(max_total=3, max_per_address=2)
    assert limits.admit("10.0.0.1") is None
    assert limits.admit("10.0.0.1") is None
    assert limits.admit("10.0.0.1") == "max_connections_per_client"
    assert limits.admit("10.0.0.2") is None
    assert limits.admit("10.0.0.3") == "max_connections"
    assert limits.total == 3
    limits.release("10.0.0.1")
    assert limits.admit("10.0.0.3") is None
    for address in ("10.0.0.1", "10.0.0.2", "10.0.0.3"):
        limits.release(address)
    assert limits.total == 0 and limits.held("10.0.0.1") == 0


def test_zero_means_no_limit() -> None:
    limits = ConnectionLimits(0, 0)
    for _ in range(10_000):
        assert limits.admit("10.0.0.1") is None


def test_a_release_without_an_admission_changes_nothing() -> None:
    limits = ConnectionLimits(1, 1)
    limits.release("10.0.0.9")
    assert limits.total == 0 and limits.admit("10.0.0.9") is None


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_three_thousand_garbage_connections_write_two_lines(
        clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("rackguard.test.badinput")
    bad = BadInputLog(logger, clock, interval_s=10)
    with caplog.at_level(logging.WARNING, logger.name):
        for i in range(3000):
            bad.report("10.1.1.1", "bad_frame", f"closing client 10.1.1.1:{i}: bad frame")
        clock.now += 10
        bad.flush()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert "closing client 10.1.1.1:0" in lines[0]
    assert "2999 more bad frame" in lines[1]


def test_each_peer_and_reason_gets_its_own_first_line(
        clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("rackguard.test.badinput2")
    bad = BadInputLog(logger, clock, interval_s=10)
    with caplog.at_level(logging.WARNING, logger.name):
        bad.report("a", "bad_frame", "a1")
        bad.report("a", "bad_header", "a2")
        bad.report("b", "bad_frame", "b1")
        bad.report("a", "bad_frame", "a3")
        clock.now += 11
        bad.report("a", "bad_frame", "a4")  # a new interval: summary of the last, then a4
    lines = [r.getMessage() for r in caplog.records]
    assert [line.split(" ")[0] for line in lines] == ["a1", "a2", "b1", "bad", "a4"]
    assert "from a: 1 more bad frame" in lines[3]


def test_memory_is_bounded_whatever_the_number_of_peers(
        clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    logger = logging.getLogger("rackguard.test.badinput3")
    bad = BadInputLog(logger, clock, interval_s=10, max_keys=5)
    with caplog.at_level(logging.WARNING, logger.name):
        for i in range(1000):
            bad.report(f"10.0.{i // 256}.{i % 256}", "bad_frame", f"peer {i}")
        assert len(bad._window) <= 6
        bad.flush()
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 6
    assert f"from {OTHER}: 995 more" in lines[-1]
