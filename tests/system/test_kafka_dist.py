"""The test run resolves Apache Kafka by itself: what it says and does where Java or
Maven is missing, where Maven fails, and where it succeeds (a stand-in ``mvn``)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from tests.system import kafka_dist


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(kafka_dist, "CACHE", tmp_path / "kafka")
    monkeypatch.setattr(kafka_dist, "_failed", {})
    return tmp_path / "kafka"


def _path_with(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tools: dict[str, str]) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, script in tools.items():
        tool = bin_dir / name
        tool.write_text("#!/bin/sh\n" + script)
        tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(bin_dir))  # only these tools: no real java or mvn


# writes a broker jar where -Dlibs=DIR points, as dependency:copy-dependencies would
FAKE_MVN = """for a in "$@"; do case "$a" in -Dlibs=*) d="${a#-Dlibs=}";; esac; done
/bin/mkdir -p "$d" && : > "$d/kafka_2.13-9.9.9.jar" && : > "$d/kafka-clients-9.9.9.jar"
"""


def test_without_java_it_says_so_and_resolves_nothing(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _path_with(tmp_path, monkeypatch, {"mvn": FAKE_MVN})
    lines: list[str] = []
    problem = kafka_dist.prepare(["9.9.9"], lines.append)
    assert problem is not None and problem.startswith("no Java")
    assert lines == [] and not cache.exists()
    assert kafka_dist.unavailable_reason("9.9.9") == problem


def test_without_maven_it_says_so_while_a_version_is_unresolved(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _path_with(tmp_path, monkeypatch, {"java": "exit 0"})
    problem = kafka_dist.prepare(["9.9.9"], [].append)
    assert problem is not None and problem.startswith("no Maven") and "9.9.9" in problem
    (cache / "9.9.9").mkdir(parents=True)
    (cache / "9.9.9" / "READY").write_text("")
    assert kafka_dist.missing_tool(["9.9.9"]) is None  # resolved: Maven no longer needed


def test_a_failed_resolution_is_said_once_and_becomes_the_skip_reason(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _path_with(tmp_path, monkeypatch, {"java": "exit 0",
                                       "mvn": "echo 'Could not resolve' >&2; exit 1"})
    lines: list[str] = []
    problem = kafka_dist.prepare(["9.9.9"], lines.append)
    assert problem is not None and "resolving Apache Kafka 9.9.9 failed" in problem
    assert "Could not resolve" in problem
    assert len(lines) == 2 and lines[0].startswith("resolving Apache Kafka 9.9.9")
    assert kafka_dist.prepare(["9.9.9"], lines.append) == problem and len(lines) == 2
    assert kafka_dist.unavailable_reason("9.9.9") == problem
    assert not kafka_dist.ready("9.9.9")


def test_it_resolves_once_with_a_progress_line(
        cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _path_with(tmp_path, monkeypatch, {"java": "exit 0", "mvn": FAKE_MVN})
    lines: list[str] = []
    assert kafka_dist.prepare(["9.9.9"], lines.append) is None
    assert kafka_dist.ready("9.9.9") and kafka_dist.unavailable_reason("9.9.9") is None
    assert lines[0].startswith("resolving Apache Kafka 9.9.9 from Maven Central")
    assert lines[1].startswith("resolved Apache Kafka 9.9.9: 2 jars")
    assert kafka_dist.prepare(["9.9.9"], lines.append) is None and len(lines) == 2
