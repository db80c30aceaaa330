"""The Helm chart, checked offline: ``helm lint`` and ``helm template`` with the default
values and with TLS/SASL values, every rendered object validated against the Kubernetes
JSON schemas (kubernetes-validate), the settings it writes loaded by the proxy, the
alerts and the dashboard taken from their one source, the plain manifest current.

helm is built once per machine from the Go module proxy (tests/deploy/tools.py); these
tests skip with the reason where it cannot be.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from proxy.settings import load_settings
from tests.deploy import tools

CHART = tools.REPO / "deploy" / "helm" / "rackguard"
VALUES = {name: CHART / "ci" / f"{name}-values.yaml"
          for name in ("default", "tls-sasl", "workload")}
PLAIN = tools.REPO / "deploy" / "kubernetes" / "rackguard-sidecar.yaml"
ALERTS = tools.REPO / "docker" / "prometheus" / "alerts.yml"
DASHBOARD = tools.REPO / "docker" / "grafana" / "dashboards" / "rackguard.json"
# the oldest Kubernetes with native sidecars on by default, one in wide use, the newest
KUBE_VERSIONS = ("1.29.0", "1.33.0", "1.37.0")
CRD_KINDS = {"PodMonitor", "ServiceMonitor", "PrometheusRule"}


@pytest.fixture(scope="module")
def helm() -> Path:
    found = tools.helm()
    if isinstance(found, str):
        pytest.skip(found)
    return found


def run_helm(helm: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(helm), *args], capture_output=True, text=True, timeout=120)


def render(helm: Path, values: Path | None, *extra: str, kube: str = "1.33.0") -> str:
    args = ["template", "rackguard", str(CHART), "--namespace", "apps",
            "--kube-version", kube, *extra]
    if values is not None:
        args += ["-f", str(values)]
    done = run_helm(helm, *args)
    assert done.returncode == 0, done.stderr
    return done.stdout


def objects(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


@pytest.mark.parametrize("name", sorted(VALUES))
def test_helm_lint(helm: Path, name: str) -> None:
    done = run_helm(helm, "lint", str(CHART), "-f", str(VALUES[name]), "--strict",
                    "--kube-version", "1.33.0")
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("name", sorted(VALUES))
def test_every_rendered_object_is_valid_kubernetes(helm: Path, name: str) -> None:
    import kubernetes_validate

    for kube in KUBE_VERSIONS:
        docs = objects(render(helm, VALUES[name], kube=kube))
        assert docs
        for doc in docs:
            if doc["kind"] in CRD_KINDS:
                continue  # prometheus-operator's: checked below
            kubernetes_validate.validate(doc, kube, strict=True)


def test_the_required_values_say_what_is_missing(helm: Path) -> None:
    done = run_helm(helm, "template", "rackguard", str(CHART), "--set", "upstream=k:9092")
    assert done.returncode != 0 and "workload.selector: the labels" in done.stderr
    done = run_helm(helm, "template", "rackguard", str(CHART),
                    "--set", "workload.selector.app=a")
    assert done.returncode != 0 and "upstream: the Kafka cluster's bootstrap" in done.stderr
    done = run_helm(helm, "template", "rackguard", str(CHART), "-f", str(VALUES["default"]),
                    "--set", "terminationGracePeriodSeconds=5")
    assert done.returncode != 0 and "must exceed drainTimeoutSeconds" in done.stderr


def sidecar(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = by_kind(docs, "Deployment")
    spec = deployment["spec"]["template"]["spec"]
    (container,) = [c for c in spec["initContainers"] if c["name"] == "rackguard"]
    return container


def test_a_native_sidecar_with_probes_and_a_locked_down_container(helm: Path) -> None:
    docs = objects(render(helm, VALUES["workload"]))
    (deployment,) = by_kind(docs, "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    c = sidecar(docs)
    assert c["restartPolicy"] == "Always"  # native: before the app, stopped after it
    assert [x["name"] for x in pod["containers"]] == ["app"]
    assert c["startupProbe"]["httpGet"]["path"] == "/readyz"
    assert c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz"
    # a hung zone: readiness tolerates 15 s of failure, longer than a failed-over poll
    ready = c["readinessProbe"]
    assert ready["periodSeconds"] * ready["failureThreshold"] >= 15
    sc = c["securityContext"]
    assert sc["runAsNonRoot"] and sc["readOnlyRootFilesystem"]
    assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == ["ALL"]
    assert {"cpu", "memory"} <= set(c["resources"]["limits"])
    assert pod["terminationGracePeriodSeconds"] > 10  # above the drain timeout


def toml_of(docs: list[dict[str, Any]]) -> str:
    (config,) = [d for d in by_kind(docs, "ConfigMap") if "rackguard.toml" in d["data"]]
    return str(config["data"]["rackguard.toml"])


@pytest.mark.parametrize("name", sorted(VALUES))
def test_the_proxy_loads_the_settings_the_chart_writes(helm: Path, name: str,
                                                       tmp_path: Path) -> None:
    path = tmp_path / "rackguard.toml"
    path.write_text(toml_of(objects(render(helm, VALUES[name]))))
    s = load_settings(config_file=path, env={})
    assert s.listen_host == "127.0.0.1" and s.metrics_host == "0.0.0.0"
    assert s.min_insync_racks == 2 and s.drain_timeout_ms == 10_000
    if name == "tls-sasl":
        assert s.security_protocol == "SASL_SSL"
        assert str(s.sasl_password_file) == "/etc/rackguard/sasl-password/password"
        assert str(s.tls_cert) == "/etc/rackguard/listener-tls/tls.crt"
    if name == "workload":
        assert dict(s.topic_min_insync_racks) == {"payments": 3}
        assert str(s.client_rack_file) == "/etc/rackguard/zone/zone"
    if name == "default":
        assert s.client_rack_command == \
            "rackguard node-zone --label topology.kubernetes.io/zone"


def test_secrets_are_files_never_environment_or_arguments(helm: Path) -> None:
    docs = objects(render(helm, VALUES["tls-sasl"], "--set", "workload.create=true",
                          "--set", "workload.containers[0].name=app",
                          "--set", "workload.containers[0].image=app:1"))
    c = sidecar(docs)
    assert all("valueFrom" not in e or "secretKeyRef" not in e["valueFrom"]
               for e in c.get("env", []))
    assert not any("secret" in a.lower() or "password" in a.lower() for a in c["args"])
    assert not c.get("envFrom")
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    (deployment,) = by_kind(docs, "Deployment")
    secrets = {v["name"]: v["secret"]["secretName"]
               for v in deployment["spec"]["template"]["spec"]["volumes"] if "secret" in v}
    assert secrets == {"rackguard-listener-tls": "rackguard-listener-tls",
                       "rackguard-upstream-tls": "kafka-ca",
                       "rackguard-sasl-password": "orders-producer-kafka-password"}
    assert all(mounts[name]["readOnly"] for name in secrets)
    assert "change-me" not in toml_of(docs) and "sasl_password =" not in toml_of(docs)


def test_the_zone_lookup_has_a_read_only_role_on_nodes(helm: Path) -> None:
    # by default the workload keeps its own ServiceAccount; the role is bound to it
    docs = objects(render(helm, VALUES["default"]))
    (role,) = by_kind(docs, "ClusterRole")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
    (binding,) = by_kind(docs, "ClusterRoleBinding")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "default",
                                    "namespace": "apps"}]
    assert not by_kind(docs, "ServiceAccount")
    (patch,) = objects(render(helm, VALUES["default"], "--set", "sidecarPatch=true"))
    assert "serviceAccountName" not in patch["spec"]["template"]["spec"]
    # or the release makes one, and the pods run as it
    docs = objects(render(helm, VALUES["default"], "--set", "serviceAccount.create=true"))
    (binding,) = by_kind(docs, "ClusterRoleBinding")
    (account,) = by_kind(docs, "ServiceAccount")
    assert binding["subjects"] == [{"kind": "ServiceAccount",
                                    "name": account["metadata"]["name"],
                                    "namespace": "apps"}]
    (patch,) = objects(render(helm, VALUES["default"], "--set", "sidecarPatch=true",
                              "--set", "serviceAccount.create=true"))
    assert patch["spec"]["template"]["spec"]["serviceAccountName"] == \
        account["metadata"]["name"]
    # the downward-API source needs neither
    docs = objects(render(helm, VALUES["workload"]))
    assert not by_kind(docs, "ClusterRole") and not by_kind(docs, "ServiceAccount")


def test_the_patch_adds_the_same_sidecar_as_the_created_workload(helm: Path) -> None:
    extra = ("--set", "workload.create=true", "--set", "workload.containers[0].name=app",
             "--set", "workload.containers[0].image=app:1")
    whole = objects(render(helm, VALUES["default"], *extra))
    (patch,) = objects(render(helm, VALUES["default"], "--set", "sidecarPatch=true"))
    pod = patch["spec"]["template"]["spec"]
    (deployment,) = by_kind(whole, "Deployment")
    created = deployment["spec"]["template"]["spec"]
    assert pod["initContainers"] == created["initContainers"]
    assert pod["volumes"] == created["volumes"]
    assert pod.get("serviceAccountName") == created.get("serviceAccountName")
    assert pod.get("terminationGracePeriodSeconds") == \
        created.get("terminationGracePeriodSeconds")
    # unset, the patch leaves the Deployment's own grace period alone
    assert "terminationGracePeriodSeconds" not in pod


def test_alerts_and_dashboard_come_from_their_one_source(helm: Path) -> None:
    docs = objects(render(helm, VALUES["default"]))
    (rule,) = by_kind(docs, "PrometheusRule")
    assert rule["spec"]["groups"] == yaml.safe_load(ALERTS.read_text())["groups"]
    for group in rule["spec"]["groups"]:
        assert group["rules"] and all("alert" in r and "expr" in r for r in group["rules"])
    (board,) = [d for d in by_kind(docs, "ConfigMap") if "rackguard.json" in d["data"]]
    assert board["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(board["data"]["rackguard.json"]) == json.loads(DASHBOARD.read_text())
    for link, source in (("alerts.yml", ALERTS), ("dashboard.json", DASHBOARD)):
        assert (CHART / "files" / link).resolve() == source.resolve()  # a link, no copy


def test_monitoring_objects_find_the_sidecars_port(helm: Path) -> None:
    docs = objects(render(helm, VALUES["default"]))
    (monitor,) = by_kind(docs, "PodMonitor")
    assert monitor["spec"]["selector"]["matchLabels"] == {"app": "orders-producer"}
    assert monitor["spec"]["podMetricsEndpoints"][0]["port"] == "rg-metrics"
    docs = objects(render(helm, VALUES["tls-sasl"]))
    assert not by_kind(docs, "PodMonitor")
    (service,) = by_kind(docs, "Service")
    (monitor,) = by_kind(docs, "ServiceMonitor")
    assert service["spec"]["selector"] == {"app": "orders-producer"}
    assert monitor["spec"]["selector"]["matchLabels"].items() <= \
        service["metadata"]["labels"].items()
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"


def plain_manifest(helm: Path) -> str:
    body = render(helm, VALUES["workload"])
    return PLAIN_HEADER + body


PLAIN_HEADER = """\
# rackguard as a native sidecar of a Deployment, for teams without Helm: the chart's
# render with deploy/helm/rackguard/ci/workload-values.yaml (the zone from the pod's own
# label, so no RBAC). Regenerate it with
#   helm template rackguard deploy/helm/rackguard --namespace apps --kube-version 1.33.0 \\
#     -f deploy/helm/rackguard/ci/workload-values.yaml
# (tests/deploy/test_helm_chart.py checks it is current). Replace the app container with
# yours, and upstream in the ConfigMap with your cluster. The alerts and the dashboard
# are not copied here: load them from docker/ (docs/kubernetes.md, Monitoring).
"""


def test_the_plain_manifest_is_the_charts_render(helm: Path) -> None:
    expected = plain_manifest(helm)
    kinds = {d["kind"] for d in objects(expected)}
    assert "PrometheusRule" not in kinds and "rackguard.json" not in expected  # one source
    assert PLAIN.read_text() == expected, (
        f"{PLAIN.relative_to(tools.REPO)} is not the chart's render: regenerate it "
        "(see its header)")


def test_extra_settings_reach_the_proxy(helm: Path, tmp_path: Path) -> None:
    docs = objects(render(helm, VALUES["default"], "--set", "extraSettings.log_level=DEBUG",
                          "--set", "extraSettings.max_metadata_age_ms=20000",
                          "--set", "extraSettings.broker_racks.7=rack-c",
                          "--set", "ruleMode=observe", "--set", "zone.source=off"))
    path = tmp_path / "rackguard.toml"
    path.write_text(toml_of(docs))
    s = load_settings(config_file=path, env={})
    assert s.log_level == "DEBUG" and s.max_metadata_age_ms == 20_000
    assert dict(s.broker_racks) == {7: "rack-c"} and s.observe is True
    assert s.client_rack_command is None and s.client_rack_file is None
    assert not by_kind(docs, "ClusterRole")
