"""The outage procedure in the outage it is for, on REAL Apache Kafka (6 brokers, 3 racks).

With three racks and min.insync.racks=2, one rack down changes nothing for writes: the
procedure (lower the value through the Admin API) is needed when two racks are down.
Here, with rack-b and rack-c killed, a topic on brokers 1,4 (rack-a), 2,5 (rack-b), 3
(rack-c) with min.insync.replicas=2 is refused with NOT_ENOUGH_RACKS; ``kafka-configs
--alter ... min.insync.racks=1`` through the proxy succeeds (the config topic has a
replica in every rack and min.insync.replicas=1); acks=all is accepted within 2 s on this
proxy and on a second rackguard started before the outage; ``--describe`` shows the value
and its source; an invalid value is refused. The same with the cluster-wide default. The
racks come back: the values are still there, setting 2 works, ``--delete-config`` brings
back the default, and the second proxy refuses again once rack coverage is below it.

Then the config topic's leader rack alone: killed, and hung (SIGSTOP), while a change is
made and every proxy applies it within 2 s; under the hang also a change made the moment
the rack froze (the write waits for Kafka to elect another leader). And a config topic
left with the old settings (min.insync.replicas=2) is fixed by a proxy at start, or named
in a read-only one's /readyz.

Needs the local Maven cluster (kafka-configs and the racks); skips on other rigs.
"""

from __future__ import annotations

import struct
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from protocol.metadata import PartitionMetadata, TopicMetadata, read_metadata
from tests.integration.harness.ports import free_port
from tests.integration.harness.procs import RackguardProxy
from tests.integration.harness.wire import RawKafkaConnection
from tests.integration.kip_support import NOT_ENOUGH_REPLICAS, RACKS_PREFIX, raw_produce_to
from tests.prometheus_text import read_samples, sample
from tests.system.cluster import BROKER_RACKS

from .rig import PROXY_ARGS, SystemRig
from .test_admin_configs_real_kafka import configs, first_leader, produce, refused, wait_ready
from .test_kafka_tools import TOPIC_COMMAND, tool

pytestmark = pytest.mark.system
R = "min.insync.racks"
CONFIG_TOPIC = "__rackguard_configs"
APPLY_S = 2.0  # the bound: every proxy applies a change within this of the write


def accepted(bootstrap: str, topic: str) -> bool:
    try:
        return produce(bootstrap, topic, b"x") == (0, "")
    except OSError:
        return False


def refused_for_racks(bootstrap: str, topic: str) -> bool:
    try:
        code, message = produce(bootstrap, topic, b"x")
    except OSError:
        return False
    return code == NOT_ENOUGH_REPLICAS and message.startswith(RACKS_PREFIX)


def leader_address(bootstrap: str, topic: str) -> tuple[str, int]:
    """The proxy's address for the leader of the topic's partition 0 (asked until a
    Metadata answer comes: one the proxy forwarded to a hung broker times out)."""
    host, port = bootstrap.rsplit(":", 1)
    deadline = time.monotonic() + 60
    while True:
        try:
            with RawKafkaConnection(host, int(port), timeout=5.0, client_id="rg-system") as c:
                raw, _ = c.request(MetadataRequest(version=5, topics=[topic],
                                                   allow_auto_topic_creation=False),
                                   MetadataResponse, 5)
            snap = read_metadata(struct.pack(">i", len(raw)) + raw, 5)
            leader = first_leader(snap.topics)
            broker = next(b for b in snap.brokers if b.node_id == leader)
            return broker.host, broker.port
        except OSError:
            assert time.monotonic() < deadline, f"no Metadata answer from {bootstrap}"


def code_at(address: tuple[str, int], topic: str) -> tuple[int, str]:
    """One acks=all record to the leader at ``address`` (a proxy's): (error code, message)."""
    began = time.monotonic()
    try:
        result = raw_produce_to(address, [(topic, 0, [b"x"])])[0]
    except OSError as exc:
        LAST_ANSWER[:] = [f"{exc} after {time.monotonic() - began:.2f} s"]
        return -1, str(exc)
    LAST_ANSWER[:] = [f"{result.error_code} {result.error_message or ''!r} after "
                      f"{time.monotonic() - began:.2f} s"]
    return result.error_code, result.error_message or ""


LAST_ANSWER: list[str] = []  # code_at's last answer, named when a bound is missed


def within(seconds: float, check: Callable[[], bool], what: str) -> float:
    """Seconds until ``check`` holds, polled every 50 ms; fails beyond ``seconds``."""
    began = time.monotonic()
    while not check():
        took = time.monotonic() - began
        if took > seconds:
            raise AssertionError(f"{what}: not within {seconds:.1f} s (the last produce "
                                 f"answer: {LAST_ANSWER[0] if LAST_ANSWER else 'none'})")
        time.sleep(0.05)
    return time.monotonic() - began


def leader_rack(bootstrap: str, topic: str) -> str:
    host, port = bootstrap.rsplit(":", 1)
    with RawKafkaConnection(host, int(port), timeout=10.0, client_id="rg-system") as conn:
        raw, _ = conn.request(MetadataRequest(version=5, topics=[topic],
                                              allow_auto_topic_creation=False),
                              MetadataResponse, 5)
    return BROKER_RACKS[first_leader(read_metadata(struct.pack(">i", len(raw)) + raw,
                                                   5).topics)]


@pytest.fixture(scope="module")
def spread(rig: SystemRig) -> Iterator[tuple[str, str]]:
    """Two topics on brokers 1,4 (rack-a), 2,5 (rack-b), 3 (rack-c), min.insync.replicas=2:
    one for a topic value, one for the cluster default."""
    if rig.cluster is None:
        pytest.skip("kafka-configs and the racks come with the locally resolved release")
    names = tuple(f"rg-outage-{kind}-{uuid.uuid4().hex[:6]}" for kind in ("topic", "default"))
    for name in names:
        tool(rig, TOPIC_COMMAND, "--create", "--topic", name, "--replica-assignment",
             "1:4:2:5:3", "--config", "min.insync.replicas=2")
    yield names[0], names[1]
    for name in names:
        tool(rig, TOPIC_COMMAND, "--delete", "--topic", name)


SECOND_METRICS: list[str] = []  # the second proxy's /metrics URL


@pytest.fixture(scope="module")
def second(rig: SystemRig, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A second rackguard in front of the same cluster, started before any outage
    (its /metrics URL in SECOND_METRICS)."""
    assert rig.cluster is not None
    port = free_port()
    proxy = RackguardProxy(rig.cluster.bootstrap, tmp_path_factory.mktemp("second"),
                           tuple(BROKER_RACKS), (*PROXY_ARGS, "--metrics-port", str(port)))
    proxy.start()
    try:
        wait_ready(f"http://127.0.0.1:{port}/readyz")
        SECOND_METRICS[:] = [f"http://127.0.0.1:{port}/metrics"]
        yield proxy.bootstrap
    finally:
        proxy.stop()


def topic_changes(metrics: str) -> float:
    return sample(read_samples(metrics), "rackguard_config_changes_total",
                  resource_type="topic") or 0.0


def test_two_racks_down_the_value_is_lowered_and_restored(
        rig: SystemRig, spread: tuple[str, str], second: str) -> None:
    topic, by_default = spread
    proxies = (rig.bootstrap, second)
    for bootstrap in proxies:
        assert accepted(bootstrap, topic) and accepted(bootstrap, by_default)
    rig.kill_rack("rack-b")
    rig.kill_rack("rack-c")
    for bootstrap in proxies:  # the ISR (brokers 1 and 4) spans one rack
        within(60, lambda b=bootstrap: refused_for_racks(b, topic), "refused with NOT_ENOUGH_RACKS")
        within(10, lambda b=bootstrap: refused_for_racks(b, by_default), "the other refused")

    configs(rig, "--alter", "--entity-name", topic, "--add-config", f"{R}=1")
    took = [within(APPLY_S, lambda b=b: accepted(b, topic), f"accepted through {b}")
            for b in proxies]
    shown = configs(rig, "--describe", "--entity-name", topic, bootstrap=second)
    assert f"DYNAMIC_TOPIC_CONFIG:{R}=1" in shown, shown
    out = refused(rig, "--entity-type", "topics", "--alter", "--entity-name", topic,
                  "--add-config", f"{R}=0")
    assert "must be an integer >= 1" in out, out

    configs(rig, "--alter", "--entity-default", "--add-config", f"{R}=1", entity="brokers")
    took += [within(APPLY_S, lambda b=b: accepted(b, by_default), f"default through {b}")
             for b in proxies]
    shown = configs(rig, "--describe", "--entity-default", entity="brokers", bootstrap=second)
    assert f"{R}=1" in shown and "DYNAMIC_DEFAULT_BROKER_CONFIG" in shown, shown
    print(f"two racks down: applied {', '.join(f'{t:.2f}' for t in took)} s after the write")

    rig.start_rack("rack-b")
    rig.start_rack("rack-c")
    shown = configs(rig, "--describe", "--entity-name", topic)
    assert f"DYNAMIC_TOPIC_CONFIG:{R}=1" in shown, shown  # nothing lost
    shown = configs(rig, "--describe", "--entity-default", entity="brokers")
    assert f"{R}=1" in shown, shown
    configs(rig, "--alter", "--entity-name", topic, "--add-config", f"{R}=2")
    assert f"DYNAMIC_TOPIC_CONFIG:{R}=2" in configs(rig, "--describe", "--entity-name", topic)
    configs(rig, "--alter", "--entity-name", topic, "--delete-config", R)
    configs(rig, "--alter", "--entity-default", "--delete-config", R, entity="brokers")
    assert f"DYNAMIC_TOPIC_CONFIG:{R}" not in configs(rig, "--describe", "--entity-name", topic)

    rig.kill_rack("rack-b")  # rack coverage below the static 2 again
    rig.kill_rack("rack-c")
    within(60, lambda: refused_for_racks(second, topic), "the second proxy refuses again")
    within(10, lambda: refused_for_racks(second, by_default), "and for the default")


def test_the_config_topics_leader_rack_killed_then_hung(
        rig: SystemRig, spread: tuple[str, str], second: str) -> None:
    """Only the config topic's leader rack out: a change made meanwhile is stored and in
    force on both proxies within 2 s. The topic's ISR spans the other two racks, so 3
    refuses its writes and deleting it lets them through again."""
    topic, other = spread
    proxies = (rig.bootstrap, second)
    rack = leader_rack(rig.bootstrap, CONFIG_TOPIC)
    took: list[float] = []

    def round_trip() -> None:
        """3, then back to the static 2, through the first proxy; each proxy is asked at
        the leader's address it gives (its Metadata answer could come from a hung broker)."""
        leaders = [leader_address(b, topic) for b in proxies]
        configs(rig, "--command-config", str(quick), "--alter", "--entity-name", topic,
                "--add-config", f"{R}=3")
        took.extend(within(APPLY_S, lambda a=a: code_at(a, topic)[1].startswith(RACKS_PREFIX),
                           f"3 at {a}") for a in leaders)
        configs(rig, "--command-config", str(quick), "--alter", "--entity-name", topic,
                "--delete-config", R)
        took.extend(within(APPLY_S, lambda a=a: code_at(a, topic) == (0, ""), f"2 at {a}")
                    for a in leaders)

    quick = Path(rig.cluster.directory if rig.cluster else ".") / "outage-admin.properties"
    quick.write_text("request.timeout.ms=5000\ndefault.api.timeout.ms=60000\n")
    rig.kill_rack(rack)
    try:
        for bootstrap in proxies:  # the ISR leaves the killed rack: two racks left
            within(60, lambda b=bootstrap: accepted(b, topic) and len(isr_racks(b, topic)) == 2,
                   "the ISR without the killed rack")
        round_trip()
    finally:
        rig.start_rack(rack)
    within(60, lambda: len(isr_racks(rig.bootstrap, topic)) == 3, "the ISR back in 3 racks")
    print(f"{rack} killed: applied {', '.join(f'{t:.2f}' for t in took)} s after the write")

    rack = leader_rack(rig.bootstrap, CONFIG_TOPIC)
    took.clear()
    metrics = [m for m in (rig.metrics_url, *SECOND_METRICS) if m]
    before = [topic_changes(m) for m in metrics]
    rig.freeze_rack(rack)
    try:
        # a change the moment it hangs: the write waits for Kafka to elect another leader
        frozen = time.monotonic()
        configs(rig, "--command-config", str(quick), "--alter", "--entity-name", other,
                "--add-config", f"{R}=1")
        stored = time.monotonic() - frozen
        for url, count in zip(metrics, before, strict=True):
            took.append(within(APPLY_S, lambda u=url, c=count: topic_changes(u) == c + 1,
                               f"the change counted on {url}"))
        print(f"{rack} hung: a change made at once stored {stored:.1f} s after it froze")
        for bootstrap in proxies:  # Kafka fences the hung brokers; the ISR leaves them
            within(90, lambda b=bootstrap: len(isr_racks(b, topic)) == 2 and accepted(b, topic),
                   "the ISR without the hung rack")
        round_trip()
    finally:
        rig.thaw_rack(rack)
    print(f"{rack} hung: applied {', '.join(f'{t:.2f}' for t in took)} s after the write")
    configs(rig, "--alter", "--entity-name", other, "--delete-config", R)


def isr_racks(bootstrap: str, topic: str) -> set[str]:
    """The racks of the ISR of the topic's partition 0, as the proxy's Metadata answer
    gives them (empty when it does not answer in time: a hung broker was asked)."""
    host, port = bootstrap.rsplit(":", 1)
    try:
        with RawKafkaConnection(host, int(port), timeout=5.0, client_id="rg-system") as conn:
            raw, _ = conn.request(MetadataRequest(version=5, topics=[topic],
                                                  allow_auto_topic_creation=False),
                                  MetadataResponse, 5)
    except OSError:
        return set()
    snap = read_metadata(struct.pack(">i", len(raw)) + raw, 5)
    if not snap.topics or not TopicMetadata(*snap.topics[0]).partitions:
        return set()
    partition = PartitionMetadata(*TopicMetadata(*snap.topics[0]).partitions[0])
    return {BROKER_RACKS[n] for n in partition.isr}


def readyz(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as answer:
        return str(answer.read().decode())


def test_a_config_topic_with_the_old_settings(rig: SystemRig, tmp_path: Path) -> None:
    """A config topic created by an older rackguard (min.insync.replicas=2): a proxy sets 1
    itself at start; a read-only one leaves it and says in /readyz what to change."""
    if rig.cluster is None:
        pytest.skip("kafka-topics comes with the locally resolved release")
    old = f"rg-old-configs-{uuid.uuid4().hex[:6]}"
    direct = rig.cluster.bootstrap.split(",")[0]
    tool(rig, TOPIC_COMMAND, "--create", "--topic", old, "--partitions", "1",
         "--replication-factor", "3", "--config", "min.insync.replicas=2",
         "--config", "cleanup.policy=compact", bootstrap=direct)
    try:
        for read_only in (True, False):
            port = free_port()
            flags = ("--config-topic-read-only",) if read_only else ()
            proxy = RackguardProxy(rig.cluster.bootstrap, tmp_path, tuple(BROKER_RACKS),
                                   (*PROXY_ARGS, "--metrics-port", str(port),
                                    "--config-topic", old, *flags))
            proxy.start()
            try:
                wait_ready(f"http://127.0.0.1:{port}/readyz")
                if read_only:
                    within(20, lambda p=port: "min.insync.replicas=2" in readyz(p),
                           "/readyz names the old setting")
                    assert "--add-config min.insync.replicas=1" in readyz(port)
                    shown = configs(rig, "--describe", "--entity-name", old, bootstrap=direct)
                    assert "DYNAMIC_TOPIC_CONFIG:min.insync.replicas=2" in shown, shown
                else:
                    within(20, lambda: "DYNAMIC_TOPIC_CONFIG:min.insync.replicas=1" in configs(
                        rig, "--describe", "--entity-name", old, bootstrap=direct),
                        "the proxy set min.insync.replicas=1")
                    assert "min.insync.replicas" not in readyz(port)
            finally:
                proxy.stop()
    finally:
        tool(rig, TOPIC_COMMAND, "--delete", "--topic", old, bootstrap=direct)
