"""One real cluster behind rackguard for the whole system tier (see rig.py for where it
comes from), and the official Java client.

Invariant: every test here is marked ``system`` and skips with the one-line reason
when no cluster can be had (fails instead under CI=true, where .ci/run installed
Maven and the run resolved Kafka); the cluster is restored after each test (racks a
test stopped, killed or froze come back) and stopped at the end of the session.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.harness import java

from .rig import SystemRig, find_rig


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.system)


@pytest.fixture(scope="session")
def rig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SystemRig]:
    found = find_rig(tmp_path_factory.mktemp("kafka"))
    if isinstance(found, str):
        if os.environ.get("CI") == "true":  # CI has Java and Maven: it must run there
            pytest.fail(f"CI=true but the system tier cannot run: {found}")
        pytest.skip(found)
    try:
        yield found
    finally:
        found.close()


@pytest.fixture(autouse=True)
def _racks_back(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "rig" in request.fixturenames:
        request.getfixturevalue("rig").restore_all()


@pytest.fixture(scope="session")
def java_client() -> java.JavaClient:
    reason = java.unavailable_reason()
    if reason:
        pytest.skip(reason)
    return java.build_client()
