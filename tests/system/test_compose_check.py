"""The compose rig and its provisioning files, checked without a Docker engine (runs in CI).

What a typo would break and nothing else here would notice: the shape of
docker-compose.yml (a KRaft controller, six brokers two per rack, rackguard
in front of exactly those brokers with settings it accepts, everything
published on 127.0.0.1 below 32768, a healthcheck on every service), the
Dockerfile's promises (slim base, non-root, /healthz healthcheck, no test
extra), that Prometheus scrapes the port rackguard serves, and that every
metric named by an alert or a dashboard panel is one the proxy exports.
``docker compose config -q`` (or the older ``docker-compose``) validates the
file against Compose's schema where either is installed.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest

from proxy.app import Rackguard
from proxy.cluster.view import ClusterView
from proxy.locality.metrics import LocalityMetrics
from proxy.settings import load_settings
from proxy.streams.metrics import StreamsCollector
from proxy.streams.watch import StreamsWatch
from tests.system import kafka_dist

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKER = ROOT / "docker"
RACKS = ("rack-a", "rack-b", "rack-c")
MAX_HOST_PORT = 32767


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = load(COMPOSE)
    assert isinstance(data, dict)
    return data


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return dict(compose["services"])


def env(service: dict[str, Any]) -> dict[str, str]:
    raw = service.get("environment", {})
    if isinstance(raw, list):
        raw = dict(item.split("=", 1) for item in raw)
    return {k: str(v) for k, v in raw.items()}


def brokers(services: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in services.items()
            if env(s).get("KAFKA_PROCESS_ROLES") == "broker"}


def published(service: dict[str, Any]) -> list[tuple[str, int, int]]:
    """(host ip, host port, container port) of every published port, ranges expanded."""
    out = []
    for spec in service.get("ports", []):
        ip, host, container = str(spec).split(":")
        h0, _, h1 = host.partition("-")
        c0, _, c1 = container.partition("-")
        hosts = range(int(h0), int(h1 or h0) + 1)
        containers = range(int(c0), int(c1 or c0) + 1)
        assert len(hosts) == len(containers), spec
        out.extend((ip, h, c) for h, c in zip(hosts, containers, strict=True))
    return out


def test_services(services: dict[str, dict[str, Any]]) -> None:
    assert {"controller", "rackguard", "prometheus", "grafana"} <= set(services)
    for name, service in services.items():
        assert "healthcheck" in service, f"{name} has no healthcheck"
        assert service["healthcheck"]["test"], name


def test_kafka_is_the_one_default_release(services: dict[str, dict[str, Any]]) -> None:
    images = {s["image"] for n, s in services.items() if n == "controller" or "KAFKA_NODE_ID"
              in env(s) or n.startswith("kafka")}
    assert images == {f"apache/kafka:{kafka_dist.DEFAULT_VERSION}"}


def test_kraft_controller_and_six_brokers_two_per_rack(
    services: dict[str, dict[str, Any]],
) -> None:
    controller = env(services["controller"])
    assert controller["KAFKA_PROCESS_ROLES"] == "controller"
    voters = controller["KAFKA_CONTROLLER_QUORUM_VOTERS"]
    assert voters == f"{controller['KAFKA_NODE_ID']}@controller:9093"
    cluster_id = controller["CLUSTER_ID"]
    assert len(base64.urlsafe_b64decode(cluster_id + "==")) == 16  # a Kafka Uuid

    found = brokers(services)
    assert len(found) == 6
    assert Counter(env(s)["KAFKA_BROKER_RACK"] for s in found.values()) == {
        rack: 2 for rack in RACKS}
    ids = sorted(int(env(s)["KAFKA_NODE_ID"]) for s in found.values())
    assert ids == [1, 2, 3, 4, 5, 6]
    for name, service in found.items():
        e = env(service)
        assert service["image"].startswith("apache/kafka:"), name
        assert e["CLUSTER_ID"] == cluster_id and e["KAFKA_CONTROLLER_QUORUM_VOTERS"] == voters
        assert e["KAFKA_ADVERTISED_LISTENERS"] == f"INTERNAL://{service['hostname']}:19092"
        assert "controller" in service["depends_on"], name
        assert int(e["KAFKA_MIN_INSYNC_REPLICAS"]) == 2


def test_rackguard_fronts_exactly_the_brokers_with_valid_settings(
    services: dict[str, dict[str, Any]],
) -> None:
    rg = services["rackguard"]
    settings = load_settings(env={k: v for k, v in env(rg).items()
                                  if k.startswith("RACKGUARD_")})
    advertised = {env(s)["KAFKA_ADVERTISED_LISTENERS"].split("//")[1]
                  for s in brokers(services).values()}
    assert set(settings.upstream) == advertised
    assert settings.min_insync_racks == 2
    assert settings.metrics_port is not None
    assert set(rg["depends_on"]) == set(brokers(services))
    ports = {container: (ip, host) for ip, host, container in published(rg)}
    node_ids = [int(env(s)["KAFKA_NODE_ID"]) for s in brokers(services).values()]
    for port in (settings.bootstrap_port, settings.metrics_port,
                 *(settings.broker_port(n) for n in node_ids)):
        assert ports.get(port, ("", 0))[1] == port, f"rackguard does not publish port {port}"
    assert f":{settings.metrics_port}/healthz" in json.dumps(rg["healthcheck"]["test"])
    assert rg["build"]["dockerfile"] == "docker/Dockerfile"


def test_published_ports_are_loopback_and_low(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        for ip, host, _ in published(service):
            assert ip == "127.0.0.1", f"{name} publishes on {ip}"
            assert 0 < host <= MAX_HOST_PORT, f"{name} publishes port {host}"


def test_dockerfile() -> None:
    text = (DOCKER / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11-slim\b", text, re.M)
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users and users[-1] not in ("root", "0")
    health = re.search(r"^HEALTHCHECK (?:.*\\\n)*.*", text, re.M)
    assert health and "/healthz" in health.group(0)
    installs = re.findall(r"pip install ([^\n&]+)", text)
    assert installs and all("test" not in i for i in installs)
    for path in re.findall(r"^COPY (\S+) ", text, re.M):
        assert (ROOT / path).exists(), path
    # the build context filter lets in the proxy alone: its packages, not the demo, the
    # simulator (a test double), the reports, the benchmarks or the tests
    allowed = (DOCKER / "Dockerfile.dockerignore").read_text().splitlines()
    assert allowed[allowed.index("**") + 1:].count("!proxy/**") == 1
    for package in ("protocol", "proxy"):
        assert f"!{package}/**" in allowed, f"the image would lack {package}/"
    for left_out in ("simulator", "pipeline", "benchmarks", "tests"):
        assert not any(line.startswith(f"!{left_out}") for line in allowed), left_out
    assert "proxy/tools/demo.py" in allowed, "the demo (on the simulator) would be let in"
    assert "!pyproject.toml" in allowed and "!README.md" in allowed
    assert "find_spec('proxy.tools.demo')" in text, "the image must check the demo is out"
    assert "gcc" not in text, "the image needs no compiler"


def test_prometheus_scrapes_rackguard(services: dict[str, dict[str, Any]]) -> None:
    config = load(DOCKER / "prometheus" / "prometheus.yml")
    port = env(services["rackguard"])["RACKGUARD_METRICS_PORT"]
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    targets = [t for sc in jobs["rackguard"]["static_configs"] for t in sc["targets"]]
    assert targets == [f"rackguard:{port}"]
    mounts = services["prometheus"]["volumes"]
    assert "./docker/prometheus:/etc/prometheus:ro" in mounts
    for rule_file in config["rule_files"]:
        assert (DOCKER / "prometheus" / Path(rule_file).name).is_file()


def exported_names() -> set[str]:
    # as the compose file runs it: the whole-cluster view (placement metrics exported)
    app = Rackguard(load_settings({"upstream": "127.0.0.1:9", "view_scope": "cluster"}))
    # what a proxy whose racks have dimensions adds (rack coverage per dimension)
    dims = Rackguard(load_settings({"upstream": "127.0.0.1:9", "view_scope": "cluster",
                                    "rack_dimensions": "region/zone"}))
    locality = CollectorRegistry()  # what a proxy with client_rack adds (at start)
    LocalityMetrics(locality, "rack-a", "fill", ClusterView)
    locality.register(StreamsCollector(StreamsWatch("rack-a", "zone", ())))  # (at start)
    text = (app.metrics_text().decode() + dims.metrics_text().decode()
            + generate_latest(locality).decode())
    names = set()
    for name, kind in re.findall(r"# TYPE (\S+) (\S+)", text):
        names.add(name)
        if kind == "histogram":
            names.update(name + s for s in ("_bucket", "_sum", "_count"))
    return names


def referenced(expr: str) -> set[str]:
    return set(re.findall(r"\brackguard_[a-z_]+", expr))


def test_alerts_name_only_exported_metrics() -> None:
    rules = load(DOCKER / "prometheus" / "alerts.yml")
    exprs = [r["expr"] for g in rules["groups"] for r in g["rules"]]
    used = set().union(*(referenced(e) for e in exprs))
    assert {"rackguard_under_min_rack_isr_partitions",
            "rackguard_produce_partitions_total"} <= used
    assert used <= exported_names(), used - exported_names()
    for g in rules["groups"]:
        for r in g["rules"]:
            assert r["alert"] and r["labels"]["severity"] and r["annotations"]["summary"]


def test_grafana_dashboard_and_datasource() -> None:
    ds = load(DOCKER / "grafana" / "provisioning" / "datasources" / "prometheus.yml")
    uid = ds["datasources"][0]["uid"]
    assert ds["datasources"][0]["url"] == "http://prometheus:9090"
    provider = load(DOCKER / "grafana" / "provisioning" / "dashboards" / "rackguard.yml")
    assert provider["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"
    dash = json.loads((DOCKER / "grafana" / "dashboards" / "rackguard.json").read_text())
    panels = [p for p in dash["panels"] if p["type"] != "row"]
    exprs = [t["expr"] for p in panels for t in p["targets"]]
    assert all(p["datasource"]["uid"] == uid for p in panels)
    used = set().union(*(referenced(e) for e in exprs))
    assert used <= exported_names(), used - exported_names()
    for needed in ("rackguard_under_min_rack_isr_partitions", "rackguard_isr_rack_count",
                   "rackguard_produce_partitions_total", "rackguard_bytes_total",
                   "rackguard_fetch_bytes_total", "rackguard_streams_tasks"):
        assert needed in used  # rack coverage, rejections, throughput
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))


def compose_command() -> list[str] | None:
    """``docker compose`` (the plugin), else the older standalone ``docker-compose``."""
    docker = shutil.which("docker")
    if docker is not None:
        probe = subprocess.run([docker, "compose", "version"], capture_output=True,
                               text=True, timeout=30)
        if probe.returncode == 0:
            return [docker, "compose"]
    standalone = shutil.which("docker-compose")
    return [standalone] if standalone is not None else None


def test_docker_compose_config_validates() -> None:
    command = compose_command()
    if command is None:
        pytest.skip("neither the docker compose plugin nor docker-compose is installed; "
                    "the structural checks above still ran")
    result = subprocess.run([*command, "-f", str(COMPOSE), "config", "-q"],
                            capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert result.returncode == 0, result.stderr
