"""KIP-708 with REAL Kafka Streams on the suite's real Kafka cluster, audited by sidecars.

The KIP's example: 9 Kafka Streams instances (3 Kubernetes clusters x 3 zones, tags
``client.tag.zone`` and ``client.tag.cluster``, ``rack.aware.assignment.tags=zone,cluster``,
``num.standby.replicas=2``) running a stateful topology of 12 tasks (a count per key over
a 12-partition topic). Kafka Streams 4.4 from Maven Central, the instances as separate
KafkaStreams objects in one JVM (tests/integration/java/StreamsKip708.java), each through
its own ``rackguard serve`` whose ``client_rack`` is the instance's zone.

- (a) tags set right: the sidecar in front of the group leader exports 12 of 12 tasks
  fully spread on both dimensions, ``rackguard streams audit`` says the same, and the
  copies it names are those of Kafka Streams' own ``metadataForLocalThreads()``;
- (d) the zone eu-central-1c goes (its three sidecars killed, its instances closed
  without leaving): every active task of that zone is taken over, in Kafka Streams' first
  assignment without the lost instances, by an instance the audit named as holding its
  standby (caught up, as Kafka Streams' own lags say: read from its assignor's log);
  every task runs again on the instances left, the audit agreeing with Kafka Streams,
  and the counts go on from where they were, with records produced during the loss.
  Where the actives are once the follow-up rebalances have balanced the load is
  printed, not asserted (Kafka Streams does not promise it: docs/streams.md);
- (b) three instances of eu-central-1c with ``client.tag.zone`` copied from
  eu-central-1a: their sidecars and the command name them, and the command shows the
  spread that results (by the tags, and by the zones the sidecars really run in);
- (c) two zones only (6 instances): the command says "not possible", not "not done".

Needs Java, the Kafka Streams jars (tests/system/kafka_dist.py install_streams) and the
rig this repository starts.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from tests.integration.harness import streams_java, wire
from tests.integration.harness.ports import free_port
from tests.integration.harness.procs import REPO, RackguardProxy
from tests.prometheus_text import metrics_url, read_samples, sample

from .cluster import BROKER_RACKS
from .rig import SystemRig

pytestmark = pytest.mark.system

ZONES = ("eu-central-1a", "eu-central-1b", "eu-central-1c")
CLUSTERS = ("k8s-cluster1", "k8s-cluster2", "k8s-cluster3")
TASKS = 12
RACKGUARD = REPO / ".venv" / "bin" / "rackguard"


@pytest.fixture(scope="module")
def streams_cp(rig: SystemRig) -> str:
    if rig.cluster is None:
        pytest.skip("needs the Kafka cluster this repository starts (tests/system/cluster.py)")
    reason = streams_java.unavailable_reason()
    if reason:
        pytest.skip(reason)
    return streams_java.classpath("StreamsKip708")


class Node:
    def __init__(self, n: int, zone: str, cluster: str, zone_tag: str, upstream: str,
                 work: Path) -> None:
        self.name = f"node-{n}"
        self.zone, self.cluster, self.zone_tag = zone, cluster, zone_tag
        self.metrics_port = free_port()
        self.proxy = RackguardProxy(upstream, work, tuple(BROKER_RACKS),
                                    ("--client-rack", zone, "--metrics-port",
                                     str(self.metrics_port), "--streams-tags", "zone,cluster"))

    @property
    def sidecar(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}"

    def document(self) -> dict[str, Any]:
        import urllib.request

        with urllib.request.urlopen(self.sidecar + "/streams", timeout=5) as answer:
            return dict(json.loads(answer.read()))


class Deployment:
    """Sidecars and Kafka Streams instances of one application."""

    def __init__(self, rig: SystemRig, cp: str, work: Path, nodes: list[tuple[str, str, str]],
                 protocol: str = "classic") -> None:
        assert rig.cluster is not None
        self.app = f"kip708-{uuid.uuid4().hex[:8]}"
        self.input, self.output = f"{self.app}-in", f"{self.app}-out"
        self.bootstrap = rig.cluster.bootstrap
        _create_topics(self.bootstrap, [self.input, self.output])
        self.nodes = [Node(i + 1, z, c, t, self.bootstrap, work)
                      for i, (z, c, t) in enumerate(nodes)]
        for node in self.nodes:
            node.proxy.start()
        for node in self.nodes:
            for b in BROKER_RACKS:
                wire.wait_for_port(*node.proxy.broker_address(b), 30, proc=node.proxy.proc)
        specs = [f"{n.name}={n.proxy.bootstrap},{n.zone_tag},{n.cluster}" for n in self.nodes]
        self.assignor_log = work / "streams-assignor.log"
        log_cp, log_opts = streams_java.assignor_log(self.assignor_log)
        self.jvm = subprocess.Popen(
            [streams_java.java(), "-Xmx768m", "-XX:TieredStopAtLevel=1",
             f"-Dgroup.protocol={protocol}", *log_opts, "-cp", cp + log_cp,
             "StreamsKip708", self.app, self.input, self.output, str(work / "state"), *specs],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            text=True, start_new_session=True)
        self.produced: dict[str, int] = {}

    def ask(self, command: str, timeout: float = 90) -> dict[str, Any]:
        assert self.jvm.stdin is not None and self.jvm.stdout is not None
        self.jvm.stdin.write(command + "\n")
        self.jvm.stdin.flush()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.jvm.stdout.readline()
            if not line:
                raise RuntimeError(f"the Streams JVM ended (rc={self.jvm.poll()})")
            if line.startswith("RESULT "):
                return dict(json.loads(line[len("RESULT "):]))
        raise TimeoutError(command)

    def produce(self, per_key: int) -> None:
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks="all", linger_ms=5)
        for p in range(TASKS):
            key = f"key-{p}"
            for _ in range(per_key):
                producer.send(self.input, key=key.encode(), value=b"v", partition=p)
            self.produced[key] = self.produced.get(key, 0) + per_key
        producer.flush(60)
        producer.close()

    def counts(self, timeout: float = 120) -> dict[str, int]:
        """The latest count per key on the output topic, once it reaches every key's
        produced total (or the timeout)."""
        consumer = KafkaConsumer(bootstrap_servers=self.bootstrap, enable_auto_commit=False)
        consumer.assign([TopicPartition(self.output, p) for p in range(TASKS)])
        consumer.seek_to_beginning()
        latest: dict[str, int] = {}
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline and latest != self.produced:
                for records in consumer.poll(timeout_ms=500).values():
                    for r in records:
                        latest[r.key.decode()] = int.from_bytes(r.value, "big", signed=True)
        finally:
            consumer.close()
        return latest

    def close(self) -> None:
        try:
            if self.jvm.poll() is None:
                self.ask("quit", timeout=120)
        except (OSError, RuntimeError, TimeoutError):
            pass
        finally:
            if self.jvm.poll() is None:
                self.jvm.kill()
            self.jvm.wait(30)
            for node in self.nodes:
                node.proxy.stop()


def _create_topics(bootstrap: str, names: list[str]) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=30000)
    try:
        admin.create_topics([NewTopic(n, TASKS, 3) for n in names])
    finally:
        admin.close()


def kip_nodes(zones: tuple[str, ...] = ZONES, copied: dict[int, str] | None = None
              ) -> list[tuple[str, str, str]]:
    """(zone, cluster, zone tag) of node-1.. (cluster-major, as in the KIP)."""
    out = []
    for cluster in CLUSTERS:
        for zone in zones:
            n = len(out) + 1
            out.append((zone, cluster, (copied or {}).get(n, zone)))
    return out


@pytest.fixture
def deployment(rig: SystemRig, streams_cp: str, tmp_path: Path, request: pytest.FixtureRequest
               ) -> Iterator[Deployment]:
    nodes, protocol = (request.param if isinstance(request.param, tuple)
                       else (request.param, "classic"))
    dep = Deployment(rig, streams_cp, tmp_path, nodes, protocol)
    try:
        yield dep
    finally:
        dep.close()


# ----- what Kafka Streams says, and what the sidecars and the command say

def java_copies(status: dict[str, Any]) -> dict[str, tuple[str, tuple[str, ...]]]:
    """task -> (instance with the active, instances with standbys), from Kafka Streams'
    own metadataForLocalThreads()."""
    active: dict[str, str] = {}
    standby: dict[str, list[str]] = {}
    for name, inst in status["instances"].items():
        for task in inst["active"]:
            active[task] = name
        for task in inst["standby"]:
            standby.setdefault(task, []).append(name)
    return {t: (active.get(t, ""), tuple(sorted(standby.get(t, [])))) for t in
            set(active) | set(standby)}


def audit_copies(doc: dict[str, Any], status: dict[str, Any]
                 ) -> dict[str, tuple[str, tuple[str, ...]]]:
    """The same, from an audit document: process ids named by their members' client ids
    (a member id starts with its consumer's client id)."""
    consumers = {c: name for name, inst in status["instances"].items()
                 for c in inst["consumers"]}
    names = {}
    for inst in doc["instances"]:
        for member in [*inst["members"], inst["label"]]:
            for consumer, name in consumers.items():
                if member == consumer or member.startswith(consumer + "-"):
                    names[inst["process_id"]] = name
    return {t["task"]: (names.get(t["copies"][0], "?"),
                        tuple(sorted(names.get(p, "?") for p in t["copies"][1:])))
            for t in doc["tasks"]}


def settled(dep: Deployment, instances: int, timeout: float = 240, sidecar: bool = True,
            standbys: int | None = 2) -> tuple[dict[str, Any], dict[str, Any]]:
    """Kafka Streams' status and the leader sidecar's audit once every instance runs,
    every task has its active and ``standbys`` standbys (None: at least one; after a
    loss Kafka Streams adds warm-up replicas, which it lists as standbys, and moves
    actives by probing rebalances minutes apart), and the audit names the same copies
    (twice in a row)."""
    deadline = time.monotonic() + timeout
    agreed = 0
    last: Any = None
    while time.monotonic() < deadline:
        status = dep.ask("status")
        docs = [n.document() for n in dep.nodes if n.proxy.alive()]
        audits = [d["audits"][dep.app] for d in docs if dep.app in d["audits"]]
        java = java_copies(status)
        running = [i for i in status["instances"].values() if i["state"] == "RUNNING"]
        failed = {n: i["state"] for n, i in status["instances"].items()
                  if i["state"] in ("ERROR", "PENDING_ERROR", "NOT_RUNNING")}
        assert not failed, f"Kafka Streams instances stopped: {failed}"
        if not sidecar:  # a KIP-1071 group: the command's audit, from StreamsGroupDescribe
            try:
                audits = [cli_audit(dep, "--protocol", "streams")[1]]
            except AssertionError:  # not described yet (exit 2): ask again
                audits = []
        ok = (len(running) == instances and len(java) == TASKS
              and all(a and (len(s) == standbys if standbys else s) for a, s in java.values())
              and len(audits) == 1
              and audit_copies(audits[0], status) == java)
        agreed = agreed + 1 if ok else 0
        last = (status, audits)
        if agreed == 2:
            return status, audits[0]
        time.sleep(3)
    raise AssertionError(f"no settled assignment agreed by the audit: {last}")


def cli_audit(dep: Deployment, *extra: str) -> tuple[int, dict[str, Any]]:
    alive = [n for n in dep.nodes if n.proxy.alive()]
    argv = [str(RACKGUARD), "streams", "audit", "--bootstrap", alive[0].proxy.bootstrap,
            "--group", dep.app, "--tags", "zone,cluster", "--json", *extra]
    for n in alive:
        argv += ["--sidecar", n.sidecar]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, dict(json.loads(done.stdout))


def cli_text(dep: Deployment, *extra: str) -> str:
    alive = [n for n in dep.nodes if n.proxy.alive()]
    argv = [str(RACKGUARD), "streams", "audit", "--bootstrap", alive[0].proxy.bootstrap,
            "--group", dep.app, "--tags", "zone,cluster", *extra]
    for n in alive:
        argv += ["--sidecar", n.sidecar]
    return subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout


def leader_samples(dep: Deployment) -> dict[Any, float]:
    for n in dep.nodes:
        if n.proxy.alive():
            got = read_samples(metrics_url(n.metrics_port))
            if sample(got, "rackguard_streams_instances", app=dep.app) is not None:
                return got
    raise AssertionError("no sidecar exports the application's audit")


# ----- (a) and (d)

@pytest.mark.parametrize("deployment", [kip_nodes()], indirect=True, ids=["kip-example"])
def test_the_kip_example_is_fully_spread_and_survives_a_zone(deployment: Deployment) -> None:
    dep = deployment
    status, doc = settled(dep, 9)
    assert doc["tasks_total"] == TASKS and doc["tasks_fully_spread"] == TASKS
    got = leader_samples(dep)
    for dim in ("zone", "cluster"):
        assert sample(got, "rackguard_streams_tasks", app=dep.app, dimension=dim,
                      spread="full") == TASKS
    assert sample(got, "rackguard_streams_untagged_instances", app=dep.app) == 0
    code, report = cli_audit(dep)
    assert code == 0 and report["protocol"] == "classic"
    assert report["tasks_fully_spread"] == TASKS
    assert report["spread"]["sidecar-zone"]["full"] == TASKS  # the real zones too
    assert audit_copies(report, status) == java_copies(status)
    assert report["zone_mismatch"] == []
    print("\n" + cli_text(dep))
    dep.produce(50)
    assert dep.counts() == dep.produced
    time.sleep(3)  # the standbys apply the changelog (commit interval 200 ms)

    # (d) the zone eu-central-1c goes: its sidecars die, its instances stop heartbeating.
    # The audit's prediction, per task whose active is in the lost zone: the instances of
    # the other zones holding its standbys (caught up: the counts are all in, and the
    # standbys have had 3 s to apply the changelog), read from the leader sidecar's audit
    # as it stands when the zone goes.
    status, doc = settled(dep, 9)
    copies = audit_copies(doc, status)
    lost = {n.name for n in dep.nodes if n.zone == ZONES[2]}
    predicted = {t: tuple(s for s in standbys if s not in lost)
                 for t, (active, standbys) in copies.items() if active in lost}
    assert predicted and all(predicted.values())  # the zone held actives, standbys elsewhere
    seen = len(streams_java.assignor_decisions(dep.assignor_log))
    for n in dep.nodes:
        if n.name in lost:
            os.killpg(n.proxy.pid, signal.SIGKILL)
            n.proxy.stop()
    dep.ask("close " + " ".join(sorted(lost)), timeout=120)
    dep.produce(25)  # records keep coming while the group notices the loss
    after_status, after_doc = settled(dep, 6, standbys=None)
    after = java_copies(after_status)
    assert all(after[t][0] and after[t][0] not in lost for t in copies)  # all tasks run
    dep.produce(25)
    assert dep.counts() == dep.produced  # nothing lost, nothing counted twice

    # Where the actives went: Kafka Streams' own decisions (its assignor's log), the
    # first one without the lost instances being the takeover. What Kafka Streams
    # promises (HighAvailabilityTaskAssignor): a stateful active goes to an instance
    # caught up on the task (lag <= acceptable.recovery.lag, 0 here) whenever one
    # exists; for a lost task those are the instances holding its standby.
    decisions = streams_java.assignor_decisions(dep.assignor_log)[seen:]
    assert decisions, f"no assignment decision logged in {dep.assignor_log}"
    first = next((d for d in decisions if not lost & d.keys()), None)
    assert first is not None, f"no decision without the lost instances: {decisions}"
    took = {t: next(i for i, p in first.items() if t in p.active) for t in predicted}
    for t, holders in predicted.items():
        lags = {h: first[h].lags.get(t) for h in holders}
        assert all(lag is not None and lag <= 0 for lag in lags.values()), (
            f"{t}: a standby the audit named was not caught up when the zone went ({lags})")
        assert took[t] in holders, (
            f"{t}: active went to {took[t]}, not to a caught-up standby {holders}")
    stayed = sorted(t for t in predicted if after[t][0] in predicted[t])
    print(f"\nzone {ZONES[2]} lost: {len(predicted)} of {len(predicted)} active tasks taken "
          f"over by an instance the audit named as holding their standby "
          f"({', '.join(f'{t}->{took[t]}' for t in sorted(predicted))}); after "
          f"{len(decisions)} rebalances, settled: {len(stayed)} of them still there "
          f"({', '.join(f'{t}->{after[t][0]}' for t in sorted(predicted))}); audit after: "
          f"{after_doc['tasks_fully_spread']} of {after_doc['tasks_total']} fully spread, "
          f"verdicts {after_doc['verdicts']}")


# ----- (b) copied zone tags

COPIED = {3: ZONES[0], 6: ZONES[0], 9: ZONES[0]}


@pytest.mark.parametrize("deployment", [kip_nodes(copied=COPIED)], indirect=True,
                         ids=["copied-zone-tags"])
def test_copied_zone_tags_are_named(deployment: Deployment) -> None:
    dep = deployment
    status, doc = settled(dep, 9)
    code, report = cli_audit(dep)
    assert code == 1
    assert sorted(m["label"].split("-StreamThread")[0] for m in report["zone_mismatch"]) == [
        "node-3", "node-6", "node-9"]
    assert all(m["zone_tag"] == ZONES[0] and m["sidecar_zone"] == ZONES[2]
               for m in report["zone_mismatch"])
    # by the tags only two zones exist: three copies cannot be in three of them
    assert report["spread"]["zone"]["full"] == 0
    assert report["verdicts"]["not possible"] == TASKS
    assert report["ideal_possible"] is False
    for n in dep.nodes:
        got = read_samples(metrics_url(n.metrics_port))
        state = "differs" if n.name in ("node-3", "node-6", "node-9") else "matches"
        assert sample(got, "rackguard_streams_sidecar_instances", app=dep.app,
                      zone_tag=state) == 1, n.name
    print("\n" + cli_text(dep))


# ----- (c) two zones only

@pytest.mark.parametrize("deployment", [kip_nodes(ZONES[:2])], indirect=True,
                         ids=["two-zones"])
def test_two_zones_are_not_possible_rather_than_not_done(deployment: Deployment) -> None:
    dep = deployment
    status, doc = settled(dep, 6)
    code, report = cli_audit(dep)
    assert report["ideal_possible"] is False
    assert report["spread"]["zone"]["full"] == 0
    assert report["verdicts"]["not possible"] == TASKS
    assert report["verdicts"]["possible but not done"] == 0
    assert report["spread"]["cluster"]["full"] == TASKS
    got = leader_samples(dep)
    assert sample(got, "rackguard_streams_task_verdicts", app=dep.app,
                  verdict="not possible") == TASKS
    print("\n" + cli_text(dep))


# ----- KIP-1071: the broker assigns; the command reads StreamsGroupDescribe

@pytest.mark.parametrize("deployment", [(kip_nodes(), "streams")], indirect=True,
                         ids=["kip1071"])
def test_a_kip1071_streams_group_is_audited_by_the_command(deployment: Deployment) -> None:
    dep = deployment
    status, report = settled(dep, 9, sidecar=False)
    assert report["protocol"] == "streams"
    assert report["tasks_total"] == TASKS
    assert all(i["tags"]["cluster"] in CLUSTERS and i["tags"]["zone"] in ZONES
               for i in report["instances"])
    # each sidecar read its member's tags from its StreamsGroupHeartbeat
    for n in dep.nodes:
        got = read_samples(metrics_url(n.metrics_port))
        assert sample(got, "rackguard_streams_sidecar_instances", app=dep.app,
                      zone_tag="matches") == 1, n.name
    # Kafka 4.4's broker-side assignor places standbys by load and stickiness only
    # (docs/streams.md): the spread is whatever that gives, and the audit says which
    print(f"\nKIP-1071 on Kafka 4.4: {report['tasks_fully_spread']} of {TASKS} tasks fully "
          f"spread, verdicts {report['verdicts']}")
    print(cli_text(dep, "--protocol", "streams"))
