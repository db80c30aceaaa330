"""A security scan of the chart's rendered manifests with checkov (in its own environment
under .cache/, tests/deploy/tools.py): the sidecar runs as non-root with a read-only root
filesystem, no privilege escalation and resource limits; every finding left is one of
EXPLAINED, with the reason it stays.

checkov reports per workload (the Deployment), over its containers and init containers;
that it reads the sidecar (an init container) is checked by loosening the sidecar alone
and seeing the checks fail."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.deploy import tools
from tests.deploy.test_helm_chart import PLAIN, VALUES, render

# What checkov still reports, and why it stays.
EXPLAINED = {
    "CKV_K8S_43": "Image should use digest: the chart takes image.digest (it wins over the "
                  "tag); the examples cannot know a digest, so they name a tag",
    "CKV_K8S_15": "Image Pull Policy should be Always: IfNotPresent with a fixed tag or a "
                  "digest; Always adds a registry round trip to every start of the pod, "
                  "which the sidecar would delay (image.pullPolicy changes it)",
    "CKV_K8S_8": "Liveness Probe: the example application container has none (a stand-in "
                 "for the user's own); the sidecar has startup, readiness and liveness",
    "CKV_K8S_9": "Readiness Probe: as CKV_K8S_8, the example application container's",
    "CKV_K8S_42": "default service account used: by default the node-zone role is bound "
                  "to the workload's own ServiceAccount, \"default\" unless named "
                  "(serviceAccount.name), so the patch does not change the account the "
                  "application runs as; name the workload's own account, let the chart "
                  "make one (serviceAccount.create), or take the zone from the downward API "
                  "(zone.source: downward, no RBAC)",
    "CKV2_K8S_6": "NetworkPolicy: the pod is the user's workload, whose own traffic a "
                  "policy from this chart would restrict; the sidecar's Kafka listeners "
                  "bind to 127.0.0.1 only, its metrics port serves probes and Prometheus",
}
# Checks that must pass on every workload the chart renders.
MUST_PASS = {
    "CKV_K8S_20": "containers do not allow privilege escalation",
    "CKV_K8S_22": "read-only root filesystem",
    "CKV_K8S_23": "no root containers (runAsNonRoot)",
    "CKV_K8S_11": "CPU limits",
    "CKV_K8S_13": "memory limits",
    "CKV_K8S_28": "no NET_RAW (capabilities dropped)",
}


@pytest.fixture(scope="module")
def scan(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    helm = tools.helm()
    if isinstance(helm, str):
        pytest.skip(helm)
    checkov = tools.checkov()
    if isinstance(checkov, str):
        pytest.skip(checkov)
    out = tmp_path_factory.mktemp("rendered")
    for name, values in VALUES.items():
        (out / f"{name}.yaml").write_text(render(helm, values))
    (out / "plain.yaml").write_text(PLAIN.read_text())
    done = subprocess.run(
        [str(checkov), "--directory", str(out), "--framework", "kubernetes", "--output",
         "json", "--compact", "--skip-download"],  # passed checks too (no --quiet)
        capture_output=True, text=True, timeout=900)
    assert done.stdout.strip(), done.stderr[-3000:]
    report = json.loads(done.stdout)
    reports = report if isinstance(report, list) else [report]
    return reports


def checks(reports: list[dict[str, Any]], outcome: str) -> list[dict[str, Any]]:
    return [c for r in reports for c in r.get("results", {}).get(outcome, [])]


def test_every_finding_left_is_explained(scan: list[dict[str, Any]]) -> None:
    failed = {(c["check_id"], c["resource"]) for c in checks(scan, "failed_checks")}
    unexplained = sorted(f"{cid} {resource}" for cid, resource in failed
                         if cid not in EXPLAINED)
    assert unexplained == [], "checkov findings with no reason in EXPLAINED"


def test_the_locked_down_checks_pass(scan: list[dict[str, Any]]) -> None:
    passed = {(c["check_id"], c["resource"]) for c in checks(scan, "passed_checks")}
    failed = {(c["check_id"], c["resource"]) for c in checks(scan, "failed_checks")}
    deployments = {r for _, r in passed | failed if r.startswith("Deployment.")}
    assert deployments, "checkov saw no Deployment"
    for check in MUST_PASS:
        for resource in deployments:
            assert (check, resource) in passed, (check, MUST_PASS[check], resource)


def test_explained_findings_are_still_found(scan: list[dict[str, Any]]) -> None:
    """A reason for a finding that no longer occurs goes (the list stays true)."""
    failed = {c["check_id"] for c in checks(scan, "failed_checks")}
    assert set(EXPLAINED) <= failed, sorted(set(EXPLAINED) - failed)


def test_the_scan_sees_the_sidecar(tmp_path: Path) -> None:
    """The sidecar's container alone loosened: checkov's checks fail (it reads init
    containers, so the passes above are the sidecar's too)."""
    helm, checkov = tools.helm(), tools.checkov()
    if isinstance(helm, str) or isinstance(checkov, str):
        pytest.skip(helm if isinstance(helm, str) else str(checkov))
    text = render(helm, VALUES["workload"])
    sidecar_at = text.index("restartPolicy: Always")
    app_at = text.index("containers:\n", sidecar_at)
    head, sidecar, tail = text[:sidecar_at], text[sidecar_at:app_at], text[app_at:]
    loose = sidecar.replace("allowPrivilegeEscalation: false", "allowPrivilegeEscalation: true")
    loose = loose.replace("readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false")
    assert loose != sidecar
    (tmp_path / "loose.yaml").write_text(head + loose + tail)
    done = subprocess.run(
        [str(checkov), "--directory", str(tmp_path), "--framework", "kubernetes", "--output",
         "json", "--quiet", "--compact", "--skip-download"],
        capture_output=True, text=True, timeout=900)
    report = json.loads(done.stdout)
    failed = {c["check_id"] for c in checks(report if isinstance(report, list) else [report],
                                            "failed_checks")}
    assert {"CKV_K8S_20", "CKV_K8S_22"} <= failed
