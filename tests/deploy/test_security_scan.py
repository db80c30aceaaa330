"""A security scan of the chart's rendered manifests with checkov (in its own environment
under .cache/, tests/deploy/tools.py): the sidecar runs as non-root with a read-only root
filesystem, no privilege escalation and resource limits; every finding left is one of
EXPLAINED, with the reason it stays."""

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
         "json", "--quiet", "--compact", "--skip-download"],
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


def test_the_scan_reads_the_rendered_files() -> None:
    assert Path(PLAIN).name == "rackguard-sidecar.yaml"
