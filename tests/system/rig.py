"""Where the system tests find a real Kafka cluster behind rackguard, and how they cut racks.

Three ways, tried in this order:

1. An existing deployment, described by environment variables:
   ``RGTEST_BOOTSTRAP``        the proxy's bootstrap address (HOST:PORT);
   ``RGTEST_STOP_RACK_CMD``    shell command stopping every broker of ``{rack}``;
   ``RGTEST_START_RACK_CMD``   shell command starting them again;
   ``RGTEST_FREEZE_RACK_CMD``  optional: one making them hang (no answer, sockets open);
   ``RGTEST_THAW_RACK_CMD``    optional: the one undoing it;
   ``RGTEST_METRICS_URL``      optional: the proxy's /metrics URL;
   ``RGTEST_RACKS``            optional: the racks, the first one kept up
                               (default ``rack-a,rack-b,rack-c``).
2. Apache Kafka from Maven Central, started here (tests/system/cluster.py): a
   KRaft controller and six brokers in three racks on loopback, with
   ``rackguard serve`` in front, where Java runs and the jars are resolved
   (the test run resolves them itself: tests/conftest.py, kafka_dist.prepare).
   ``RGTEST_KAFKA_VERSION`` picks the release (tests/system/kafka_dist.py).
3. The repository's docker-compose.yml, where a Docker engine answers
   (``docker info``) and ``docker compose`` (or ``docker-compose``) exists:
   ``up -d --build``, wait for /readyz, stop and start the broker services of
   a rack, ``down -v`` at the end (``RGTEST_KEEP_RIG=1`` keeps it up).

None: :func:`find_rig` returns a reason, and the tests skip with it.

Invariant: a rack this module stopped, killed or froze is brought back before
the rig is released (also when a test fails), so a failed run does not leave a
half-dead cluster behind; a cluster this module started is stopped.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tests.integration.harness.ports import free_port
from tests.integration.harness.procs import RackguardProxy
from tests.system import kafka_dist
from tests.system.cluster import BROKER_RACKS, RACKS, KafkaCluster

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
COMPOSE_UP_TIMEOUT_S = 900


@dataclass
class SystemRig:
    bootstrap: str
    racks: tuple[str, ...]
    stop_rack_fn: Callable[[str], None]
    start_rack_fn: Callable[[str], None]
    metrics_url: str | None = None
    close_fn: Callable[[], None] = lambda: None
    stopped: list[str] = field(default_factory=list)
    kill_rack_fn: Callable[[str], None] | None = None  # SIGKILL (default: stop_rack_fn)
    freeze_rack_fn: Callable[[str], None] | None = None
    thaw_rack_fn: Callable[[str], None] | None = None
    frozen: list[str] = field(default_factory=list)
    cluster: KafkaCluster | None = None  # the brokers, where this module started them

    @property
    def host_port(self) -> tuple[str, int]:
        host, _, port = self.bootstrap.rpartition(":")
        return host, int(port)

    def stop_rack(self, rack: str) -> None:
        self.stopped.append(rack)
        self.stop_rack_fn(rack)

    def start_rack(self, rack: str) -> None:
        self.start_rack_fn(rack)
        if rack in self.stopped:
            self.stopped.remove(rack)

    def kill_rack(self, rack: str) -> None:
        self.stopped.append(rack)
        (self.kill_rack_fn or self.stop_rack_fn)(rack)

    def kill_racks(self, racks: list[str], last: int | None = None) -> None:
        """Several racks killed together (the local cluster signals every broker first,
        broker ``last`` once the others are dead); elsewhere one after the other, in the
        order given (``last`` is not known there)."""
        if self.cluster is None:
            for rack in racks:
                self.kill_rack(rack)
            return
        self.stopped.extend(racks)
        self.cluster.kill_racks(racks, last)

    def freeze_rack(self, rack: str) -> None:
        if self.freeze_rack_fn is None:
            raise NotImplementedError("this rig cannot freeze a rack (RGTEST_FREEZE_RACK_CMD)")
        self.frozen.append(rack)
        self.freeze_rack_fn(rack)

    def thaw_rack(self, rack: str) -> None:
        assert self.thaw_rack_fn is not None
        self.thaw_rack_fn(rack)
        if rack in self.frozen:
            self.frozen.remove(rack)

    def restore_all(self) -> None:
        for rack in list(reversed(self.frozen)):
            self.thaw_rack(rack)
        for rack in list(reversed(self.stopped)):
            self.start_rack(rack)

    def close(self) -> None:
        try:
            self.restore_all()
        finally:
            self.close_fn()


def run(command: list[str] | str, timeout: float, what: str) -> None:
    result = subprocess.run(command, shell=isinstance(command, str), capture_output=True,
                            text=True, timeout=timeout, cwd=ROOT)
    if result.returncode != 0:
        raise RuntimeError(f"{what} failed ({result.returncode}): "
                           f"{(result.stderr or result.stdout).strip()[-2000:]}")


def _from_environment() -> SystemRig | str:
    bootstrap = os.environ["RGTEST_BOOTSTRAP"]
    stop = os.environ.get("RGTEST_STOP_RACK_CMD")
    start = os.environ.get("RGTEST_START_RACK_CMD")
    if not stop or not start:
        return ("RGTEST_BOOTSTRAP is set but RGTEST_STOP_RACK_CMD / RGTEST_START_RACK_CMD "
                "are not (shell commands with {rack})")
    racks = tuple(r.strip() for r in os.environ.get("RGTEST_RACKS", ",".join(RACKS))
                  .split(",") if r.strip())

    def command(template: str) -> Callable[[str], None]:
        return lambda rack: run(template.format(rack=shlex.quote(rack)), 300,
                                f"{template!r} for {rack}")

    freeze, thaw = (os.environ.get("RGTEST_FREEZE_RACK_CMD"),
                    os.environ.get("RGTEST_THAW_RACK_CMD"))
    return SystemRig(bootstrap, racks, command(stop), command(start),
                     os.environ.get("RGTEST_METRICS_URL"),
                     freeze_rack_fn=command(freeze) if freeze and thaw else None,
                     thaw_rack_fn=command(thaw) if freeze and thaw else None)


PROXY_ARGS = ("--min-insync-racks", "2", "--metadata-refresh-interval-ms", "1000",
              "--max-metadata-age-ms", "10000", "--log-level", "INFO")


def _from_local_cluster(work: Path) -> SystemRig:
    """Kafka from Maven Central, started here, with rackguard in front of it."""
    cluster = KafkaCluster.create(work)
    cluster.start()
    metrics_port = free_port()
    try:
        proxy = RackguardProxy(cluster.bootstrap, work, tuple(BROKER_RACKS),
                               (*PROXY_ARGS, "--metrics-port", str(metrics_port)))
        proxy.start()
        wait_ready(f"http://127.0.0.1:{metrics_port}/readyz", 120)
    except Exception:
        cluster.stop()
        raise

    def close() -> None:
        try:
            proxy.stop()
        finally:
            cluster.stop()

    return SystemRig(
        proxy.bootstrap, RACKS, cluster.stop_rack, cluster.restore_rack,
        f"http://127.0.0.1:{metrics_port}/metrics", close,
        kill_rack_fn=cluster.kill_rack, freeze_rack_fn=cluster.freeze_rack,
        thaw_rack_fn=cluster.thaw_rack, cluster=cluster)


def compose_command() -> list[str] | None:
    docker = shutil.which("docker")
    if docker is not None:
        probe = subprocess.run([docker, "compose", "version"], capture_output=True, timeout=30)
        if probe.returncode == 0:
            return [docker, "compose"]
    standalone = shutil.which("docker-compose")
    return [standalone] if standalone else None


def docker_engine_problem() -> str | None:
    docker = shutil.which("docker")
    if docker is None:
        return "no docker command"
    try:
        probe = subprocess.run([docker, "info"], capture_output=True, text=True, timeout=30)
    except subprocess.TimeoutExpired:
        return "`docker info` timed out"
    if probe.returncode != 0:
        lines = (probe.stderr or probe.stdout).strip().splitlines()
        return f"no Docker engine (`docker info`: {lines[-1] if lines else 'failed'})"
    return None


def rack_services(compose_file: Path = COMPOSE_FILE) -> dict[str, list[str]]:
    """rack -> broker service names, read from the compose file's KAFKA_BROKER_RACK."""
    services = yaml.safe_load(compose_file.read_text())["services"]
    out: dict[str, list[str]] = {}
    for name, service in services.items():
        rack = (service.get("environment") or {}).get("KAFKA_BROKER_RACK")
        if rack:
            out.setdefault(str(rack), []).append(name)
    return out


def wait_ready(url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except urllib.error.HTTPError as exc:
            last = f"{exc.code} {exc.read().decode(errors='replace').strip()}"
        except OSError as exc:
            last = str(exc)
        time.sleep(2)
    raise RuntimeError(f"{url} not ready after {timeout:.0f} s: {last}")


def _from_compose(compose: list[str]) -> SystemRig:
    base = [*compose, "-f", str(COMPOSE_FILE)]
    by_rack = rack_services()
    run([*base, "up", "-d", "--build"], COMPOSE_UP_TIMEOUT_S, "docker compose up")

    def close() -> None:
        if os.environ.get("RGTEST_KEEP_RIG") != "1":
            run([*base, "down", "-v"], 300, "docker compose down")

    try:
        wait_ready("http://127.0.0.1:9404/readyz", COMPOSE_UP_TIMEOUT_S)
    except Exception:
        close()
        raise
    return SystemRig(
        "127.0.0.1:9092",
        tuple(sorted(by_rack)),
        lambda rack: run([*base, "stop", *by_rack[rack]], 300, f"stopping {rack}"),
        lambda rack: run([*base, "start", *by_rack[rack]], 300, f"starting {rack}"),
        "http://127.0.0.1:9404/metrics",
        close,
    )


def find_rig(work: Path) -> SystemRig | str:
    """A rig, or the reason there is none (the tests skip with it)."""
    if os.environ.get("RGTEST_BOOTSTRAP"):
        return _from_environment()
    local_problem = kafka_dist.unavailable_reason()
    if local_problem is None:
        return _from_local_cluster(work)
    problem = docker_engine_problem()
    compose = compose_command()
    if problem is None and compose is not None:
        return _from_compose(compose)
    why = problem or "no `docker compose` / `docker-compose`"
    return (f"no real Kafka cluster: {local_problem}; {why}; and RGTEST_BOOTSTRAP is not set "
            "(see docs/testing.md, 'System tests against a real cluster')")
