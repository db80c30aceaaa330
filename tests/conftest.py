"""The test run sets up its real-Kafka tier by itself.

At the top of the run one line says whether that tier can run here (and, where
Java or Maven is missing, that it skips and why). Once the tests are collected,
if any of them needs real Kafka or the official Java client (the ``system`` and
``java`` markers), the pinned Apache Kafka releases are resolved from Maven
Central where they are not yet (tests/system/kafka_dist.py: once per machine,
under its lock, a progress line each), before the first test runs.

Invariant: nothing is resolved when no collected test needs it; a resolution
that fails is said once and its tests skip with the reason.
"""

from __future__ import annotations

import os

import pytest

from tests.system import kafka_dist

NEEDS_KAFKA = ("system", "java")


def pytest_report_header(config: pytest.Config) -> str:
    versions = ", ".join(kafka_dist.VERSIONS)
    problem = kafka_dist.missing_tool()
    if problem:
        return f"real-Kafka tier: skipped, {problem}"
    where = (f"tests against RGTEST_BOOTSTRAP={os.environ['RGTEST_BOOTSTRAP']}; "
             if os.environ.get("RGTEST_BOOTSTRAP") else "")
    if all(kafka_dist.ready(v) for v in kafka_dist.VERSIONS):
        return f"real-Kafka tier: {where}Apache Kafka {versions} in {kafka_dist.CACHE}"
    return (f"real-Kafka tier: {where}Apache Kafka {versions} resolved from Maven Central "
            "before the first test that needs it (once per machine)")


def pytest_collection_finish(session: pytest.Session) -> None:
    if session.config.option.collectonly:
        return
    if not any(item.get_closest_marker(m) for item in session.items for m in NEEDS_KAFKA):
        return
    if all(kafka_dist.ready(v) for v in kafka_dist.VERSIONS):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")

    def say(line: str) -> None:
        if reporter is not None:
            reporter.write_line(f"real-Kafka tier: {line}")

    kafka_dist.prepare(kafka_dist.VERSIONS, say)
