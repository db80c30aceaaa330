"""A real Apache Kafka cluster on loopback: KRaft, one controller, six brokers in three racks.

For the system tests (the ``kafka_cluster`` fixture in tests/system/conftest.py)
and for people:

    .venv/bin/python -m tests.system.cluster start          # prints the bootstrap (the
                                                            #   jars resolved first, once)
    .venv/bin/python -m tests.system.cluster kill-rack rack-b    # SIGKILL its brokers
    .venv/bin/python -m tests.system.cluster freeze-rack rack-a  # SIGSTOP: sockets open,
    .venv/bin/python -m tests.system.cluster thaw-rack rack-a    #   nothing answers; SIGCONT
    .venv/bin/python -m tests.system.cluster stop-rack rack-c    # SIGTERM: a clean stop
    .venv/bin/python -m tests.system.cluster restore-rack rack-b # start what is down, thaw
    .venv/bin/python -m tests.system.cluster status | stop

Brokers 1 and 4 are in rack-a, 2 and 5 in rack-b, 3 and 6 in rack-c; the
controller (node 100) is in none of them, so losing a rack never loses the
quorum. Settings make an ISR shrink within a few seconds of a rack failing
(``replica.lag.time.max.ms`` 4 s; the controller fences a broker that missed
heartbeats for 4 s), small heaps and few threads fit six brokers on two cores.
Storage is formatted anew under a temporary folder per start.

Invariant: every process is started in its own process group and recorded in
``cluster.json`` under the cluster's folder; ``stop`` (and the fixture, also
on failure) thaws frozen brokers before it terminates anything, and kills
what does not stop.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from tests.system import kafka_dist

RACKS = ("rack-a", "rack-b", "rack-c")
BROKER_RACKS = {1: "rack-a", 2: "rack-b", 3: "rack-c", 4: "rack-a", 5: "rack-b", 6: "rack-c"}
CONTROLLER_ID = 100
STATE_DIR = Path(os.environ.get("RGTEST_KAFKA_CLUSTER_DIR",
                                kafka_dist.REPO / ".cache" / "kafka-cluster"))
JVM = ["-Xms64m", "-Xmx320m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xss512k",
       "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true", "-Xshare:auto"]

_COMMON = """
controller.quorum.voters={controller}@127.0.0.1:{controller_port}
controller.listener.names=CONTROLLER
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SASL_SSL:SASL_SSL
log.dirs={data}
num.network.threads=2
num.io.threads=2
background.threads=2
num.recovery.threads.per.data.dir=1
log.cleaner.threads=1
"""
_BROKER = """
process.roles=broker
node.id={node_id}
broker.rack={rack}
listeners=PLAINTEXT://127.0.0.1:{port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port}
inter.broker.listener.name=PLAINTEXT
num.partitions=3
default.replication.factor=3
min.insync.replicas=1
offsets.topic.replication.factor=3
offsets.topic.num.partitions=6
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=6
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
group.initial.rebalance.delay.ms=0
replica.lag.time.max.ms=4000
replica.fetch.wait.max.ms=250
replica.socket.timeout.ms=4000
num.replica.fetchers=1
broker.heartbeat.interval.ms=500
unclean.leader.election.enable=false
replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector
"""
# With ClusterSecurity: a SASL_SSL listener (SCRAM-SHA-512, a PEM key store) beside PLAINTEXT,
# which stays the inter-broker listener (later keys win in a properties file).
_SECURE = """
listeners=PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{secure_port}
advertised.listeners=PLAINTEXT://127.0.0.1:{port},SASL_SSL://127.0.0.1:{secure_port}
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=\
org.apache.kafka.common.security.scram.ScramLoginModule required;
ssl.keystore.type=PEM
ssl.keystore.location={keystore}
connections.max.reauth.ms={reauth_ms}
"""
_CONTROLLER = """
process.roles=controller
node.id={node_id}
listeners=CONTROLLER://127.0.0.1:{port}
broker.heartbeat.interval.ms=500
broker.session.timeout.ms=4000
"""
_LOG4J2 = """status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.out.ref = OUT
"""
_LOG4J1 = """log4j.rootLogger=WARN, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
"""


@dataclass
class KafkaNode:
    node_id: int
    rack: str | None  # None: the controller
    port: int
    directory: Path
    pid: int | None = None
    frozen: bool = False
    secure_port: int | None = None  # the SASL_SSL listener, with ClusterSecurity

    @property
    def config(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log(self) -> Path:
        return self.directory / "server.log"

    def alive(self) -> bool:
        if self.pid is None:
            return False
        try:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:  # not our child (another shell started it)
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                return False
            return not _zombie(self.pid)
        return pid == 0

    def signal(self, sig: int) -> None:
        if self.pid is not None:
            try:
                os.killpg(self.pid, sig)
            except ProcessLookupError:
                pass


@dataclass(frozen=True)
class ClusterSecurity:
    """A SASL_SSL listener on every broker: SCRAM-SHA-512 ``users`` (name -> password,
    created when the storage is formatted) and ``keystore``, one PEM file holding an
    unencrypted PKCS#8 private key and its certificate chain."""

    keystore: Path
    users: dict[str, str]
    reauth_ms: int = 0  # connections.max.reauth.ms (KIP-368); 0: no session lifetime


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return False


def _cluster_id() -> str:
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


@dataclass
class KafkaCluster:
    directory: Path
    kafka_version: str
    nodes: dict[int, KafkaNode] = field(default_factory=dict)
    cluster_id: str = field(default_factory=_cluster_id)
    start_seconds: float = 0.0
    security: ClusterSecurity | None = None

    # -- building -------------------------------------------------------------------------
    @classmethod
    def create(cls, directory: Path | None = None, kafka_version: str | None = None,
               ports: Iterable[int] | None = None,
               security: ClusterSecurity | None = None) -> KafkaCluster:
        from tests.integration.harness.ports import free_port

        root = Path(tempfile.mkdtemp(prefix="kafka-", dir=directory))
        cluster = cls(root, kafka_version or kafka_dist.version(), security=security)
        chosen = list(ports) if ports is not None else [free_port() for _ in range(7)]
        ids = [CONTROLLER_ID, *BROKER_RACKS]
        for node_id, port in zip(ids, chosen, strict=True):
            rack = BROKER_RACKS.get(node_id)
            secure = free_port() if security is not None and rack is not None else None
            cluster.nodes[node_id] = KafkaNode(node_id, rack, port, root / f"node-{node_id}",
                                               secure_port=secure)
        return cluster

    @property
    def controller(self) -> KafkaNode:
        return self.nodes[CONTROLLER_ID]

    @property
    def brokers(self) -> list[KafkaNode]:
        return [n for n in self.nodes.values() if n.rack is not None]

    def rack(self, rack: str) -> list[KafkaNode]:
        found = [n for n in self.brokers if n.rack == rack]
        if not found:
            raise ValueError(f"no rack {rack!r}: the racks are {', '.join(RACKS)}")
        return found

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.brokers)

    @property
    def secure_bootstrap(self) -> str:
        """The SASL_SSL listeners (with ClusterSecurity)."""
        return ",".join(f"127.0.0.1:{n.secure_port}" for n in self.brokers)

    def bootstrap_of(self, rack: str) -> str:
        return ",".join(f"127.0.0.1:{n.port}" for n in self.rack(rack))

    def _write_configs(self) -> None:
        log4j2 = int(self.kafka_version.split(".")[0]) >= 4
        (self.directory / "log4j.properties").write_text(_LOG4J2 if log4j2 else _LOG4J1)
        for n in self.nodes.values():
            n.directory.mkdir(parents=True, exist_ok=True)
            values = {"controller": CONTROLLER_ID, "controller_port": self.controller.port,
                      "data": n.directory / "data", "node_id": n.node_id, "rack": n.rack,
                      "port": n.port, "secure_port": n.secure_port,
                      "keystore": self.security.keystore if self.security else None,
                      "reauth_ms": self.security.reauth_ms if self.security else 0}
            body = (_BROKER if n.rack else _CONTROLLER).format(**values)
            if self.security is not None and n.rack is not None:
                body += _SECURE.format(**values)
            n.config.write_text(_COMMON.format(**values) + body)

    def _java(self, main: str, *args: str) -> list[str]:
        log4j2 = int(self.kafka_version.split(".")[0]) >= 4
        logging = (f"-Dlog4j2.configurationFile={self.directory / 'log4j.properties'}"
                   if log4j2 else f"-Dlog4j.configuration=file:"
                   f"{self.directory / 'log4j.properties'}")
        return ["java", *JVM, logging, "-cp", kafka_dist.classpath(self.kafka_version), main,
                *args]

    def _format(self) -> None:
        running = []
        for n in self.nodes.values():
            argv = self._java("kafka.tools.StorageTool", "format", "-t", self.cluster_id,
                              "-c", str(n.config), "--ignore-formatted")
            users = self.security.users if self.security and n.rack is None else {}
            for user, password in users.items():  # into the controller's bootstrap metadata
                argv += ["--add-scram", f"SCRAM-SHA-512=[name={user},password={password}]"]
            running.append((n, subprocess.Popen(argv, stdout=subprocess.PIPE,
                                                stderr=subprocess.STDOUT, text=True)))
        for n, proc in running:
            out, _ = proc.communicate(timeout=180)
            if proc.returncode != 0:
                raise RuntimeError(f"formatting node {n.node_id} failed: {out[-2000:]}")

    # -- running --------------------------------------------------------------------------
    def _launch(self, n: KafkaNode) -> None:
        with open(n.log, "ab") as log:
            proc = subprocess.Popen(self._java("kafka.Kafka", str(n.config)), stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        n.pid = proc.pid
        n.frozen = False
        self.save()

    def start(self, timeout: float = 240.0) -> None:
        began = time.monotonic()
        self._write_configs()
        self._format()
        for n in self.nodes.values():
            self._launch(n)
        try:
            self.wait_for_brokers(set(BROKER_RACKS), timeout)
        except Exception:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - began
        self.save()

    def wait_for_brokers(self, expected: set[int], timeout: float) -> None:
        """Until some broker's Metadata lists every broker of ``expected``."""
        deadline = time.monotonic() + timeout
        last = "no answer yet"
        while time.monotonic() < deadline:
            for n in self.nodes.values():
                if n.rack is not None and not n.alive() and n.pid is not None:
                    raise RuntimeError(f"broker {n.node_id} exited:\n{self.log_tail(n)}")
            if not self.controller.alive():
                raise RuntimeError(f"the controller exited:\n{self.log_tail(self.controller)}")
            for n in self.brokers:
                if n.frozen or not n.alive():
                    continue
                try:
                    seen = set(metadata_brokers("127.0.0.1", n.port, 2.0))
                except OSError as exc:
                    last = f"broker {n.node_id}: {exc}"
                    continue
                if expected <= seen:
                    return
                last = f"broker {n.node_id} lists {sorted(seen)}"
            time.sleep(0.5)
        raise TimeoutError(f"Kafka brokers {sorted(expected)} not registered after "
                           f"{timeout:.0f} s ({last})")

    def kill_rack(self, rack: str) -> None:
        for n in self.rack(rack):
            if n.frozen:
                n.signal(signal.SIGCONT)
            n.signal(signal.SIGKILL)
            _reap(n)
            n.pid, n.frozen = None, False
        self.save()

    def kill_racks(self, racks: Iterable[str], last: int | None = None) -> None:
        """SIGKILL every broker of ``racks`` at once, then reap them: the racks die
        together (one after the other, a record appended in between can reach the
        later rack's brokers alone). Signals sent together still land milliseconds
        apart, so ``last`` (a broker of ``racks``) is killed only once the others are
        reaped: whatever they fetched, it fetched too."""
        nodes = [n for rack in racks for n in self.rack(rack)]
        final = [n for n in nodes if n.node_id == last]
        if last is not None and not final:
            raise ValueError(f"broker {last} is not in {', '.join(racks)}")
        for group in ([n for n in nodes if n.node_id != last], final):
            for n in group:
                if n.frozen:
                    n.signal(signal.SIGCONT)
                n.signal(signal.SIGKILL)
            for n in group:
                _reap(n)
                n.pid, n.frozen = None, False
        self.save()

    def stop_rack(self, rack: str, timeout: float = 60.0) -> None:
        for n in self.rack(rack):
            n.signal(signal.SIGCONT)
            n.signal(signal.SIGTERM)
        for n in self.rack(rack):
            _stop_or_kill(n, timeout)
            n.pid, n.frozen = None, False
        self.save()

    def freeze_rack(self, rack: str) -> None:
        for n in self.rack(rack):
            n.signal(signal.SIGSTOP)
            n.frozen = True
        self.save()

    def thaw_rack(self, rack: str) -> None:
        for n in self.rack(rack):
            n.signal(signal.SIGCONT)
            n.frozen = False
        self.save()

    def restore_rack(self, rack: str, timeout: float = 120.0) -> None:
        """Thaws the rack's frozen brokers, starts the stopped ones, and waits until every
        broker is registered again."""
        for n in self.rack(rack):
            if n.frozen:
                n.signal(signal.SIGCONT)
                n.frozen = False
            elif not n.alive():
                self._launch(n)
        self.save()
        self.wait_for_brokers({n.node_id for n in self.rack(rack)}, timeout)

    def stop(self) -> None:
        """Everything down: thaw, terminate, kill what lingers (brokers before the
        controller, so they can leave cleanly while it still answers)."""
        for n in self.nodes.values():
            n.signal(signal.SIGCONT)
        for group in (self.brokers, [self.controller]):
            for n in group:
                n.signal(signal.SIGTERM)
            for n in group:
                _stop_or_kill(n, 20.0)
                n.pid, n.frozen = None, False
        self.save()

    def log_tail(self, n: KafkaNode, max_bytes: int = 4000) -> str:
        try:
            return n.log.read_bytes()[-max_bytes:].decode("utf-8", "replace")
        except OSError as exc:
            return f"<no log: {exc}>"

    # -- the state file, for the command line ---------------------------------------------
    def save(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        state = {"directory": str(self.directory), "kafka_version": self.kafka_version,
                 "cluster_id": self.cluster_id, "start_seconds": self.start_seconds,
                 "nodes": [{"node_id": n.node_id, "rack": n.rack, "port": n.port,
                            "directory": str(n.directory), "pid": n.pid, "frozen": n.frozen}
                           for n in self.nodes.values()]}
        (self.directory / "cluster.json").write_text(json.dumps(state, indent=1))

    @classmethod
    def load(cls, directory: Path) -> KafkaCluster:
        state = json.loads((directory / "cluster.json").read_text())
        cluster = cls(Path(state["directory"]), state["kafka_version"],
                      cluster_id=state["cluster_id"], start_seconds=state["start_seconds"])
        for n in state["nodes"]:
            cluster.nodes[n["node_id"]] = KafkaNode(n["node_id"], n["rack"], n["port"],
                                                    Path(n["directory"]), n["pid"],
                                                    n["frozen"])
        return cluster


def _reap(n: KafkaNode, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while n.alive() and time.monotonic() < deadline:
        time.sleep(0.05)


def _stop_or_kill(n: KafkaNode, timeout: float) -> None:
    _reap(n, timeout)
    if n.alive():
        n.signal(signal.SIGKILL)
        _reap(n)


def metadata_brokers(host: str, port: int, timeout: float) -> list[int]:
    """The node ids of one broker's Metadata answer (no topics asked)."""
    from kafka.protocol.metadata import MetadataRequest, MetadataResponse

    from protocol.metadata import read_metadata
    from tests.integration.harness.wire import RawKafkaConnection

    with RawKafkaConnection(host, port, timeout=timeout, client_id="rg-cluster") as conn:
        raw, _ = conn.request(MetadataRequest(version=1, topics=[]), MetadataResponse, 1)
    snapshot = read_metadata(len(raw).to_bytes(4, "big") + raw, 1)
    return [b.node_id for b in snapshot.brokers]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.system.cluster",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("start", "stop", "status", "kill-rack",
                                             "freeze-rack", "thaw-rack", "stop-rack",
                                             "restore-rack"))
    parser.add_argument("rack", nargs="?", choices=RACKS)
    parser.add_argument("--dir", type=Path, default=STATE_DIR,
                        help=f"where the cluster lives (default {STATE_DIR})")
    args = parser.parse_args(argv)
    current = args.dir / "current"
    if args.command == "start":
        problem = kafka_dist.prepare([kafka_dist.version()],
                                     lambda line: print(line, file=sys.stderr))
        if problem:
            print(problem, file=sys.stderr)
            return 2
        args.dir.mkdir(parents=True, exist_ok=True)
        cluster = KafkaCluster.create(args.dir)
        cluster.start()
        if current.is_symlink() or current.exists():
            current.unlink()
        current.symlink_to(cluster.directory)
        print(f"Apache Kafka {cluster.kafka_version} up in {cluster.start_seconds:.1f} s; "
              f"bootstrap {cluster.bootstrap}; state in {cluster.directory}")
        return 0
    if not (current / "cluster.json").exists():
        print(f"no cluster started from {args.dir}", file=sys.stderr)
        return 2
    cluster = KafkaCluster.load(current.resolve())
    if args.command == "stop":
        cluster.stop()
        return 0
    if args.command == "status":
        for n in cluster.nodes.values():
            state = "frozen" if n.frozen else "up" if n.alive() else "down"
            print(f"node {n.node_id:>3} {n.rack or 'controller':<10} 127.0.0.1:{n.port} {state}")
        return 0
    if args.rack is None:
        parser.error(f"{args.command} needs a rack")
    getattr(cluster, args.command.replace("-", "_"))(args.rack)
    return 0


if __name__ == "__main__":
    sys.exit(main())
