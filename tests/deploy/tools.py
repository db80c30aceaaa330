"""The chart checks' tools, built or installed once per machine under .cache/.

- helm: built from the Go module proxy (``go install helm.sh/helm/v3/cmd/helm@VERSION``)
  into ``.cache/helm/VERSION/helm``;
- checkov: from PyPI into a virtual environment of its own, ``.cache/checkov-VERSION``
  (it pins many packages; kept apart from the project's).

``python -m tests.deploy.tools install`` (run by .ci/run) does both; the tests call the
same functions and skip with the reason where a tool cannot be had (no Go, no network).
A lock file serialises concurrent builds.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache"
HELM_VERSION = "v3.22.0"
CHECKOV_VERSION = "3.3.30"
BUILD_TIMEOUT_S = 1800


def cache() -> Path:
    return CACHE


def _locked(name: str) -> int:
    cache().mkdir(exist_ok=True)
    fd = os.open(cache() / f".{name}.lock", os.O_CREAT | os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def find_go() -> str | None:
    """The go command: on PATH, or where the official archive installs it."""
    return shutil.which("go") or next(
        (str(p) for p in (Path("/usr/local/go/bin/go"),) if p.is_file()), None)


def helm() -> Path | str:
    """The helm binary, built once; or why there is none."""
    target = cache() / "helm" / HELM_VERSION / "helm"
    if target.is_file():
        return target
    go = find_go()
    if go is None:
        return "no Go toolchain: helm is built from the Go module proxy (install Go)"
    fd = _locked("helm")
    try:
        if not target.is_file():
            env = {**os.environ, "GOBIN": str(target.parent), "CGO_ENABLED": "0"}
            done = subprocess.run([go, "install", f"helm.sh/helm/v3/cmd/helm@{HELM_VERSION}"],
                                  env=env, capture_output=True, text=True,
                                  timeout=BUILD_TIMEOUT_S)
            if done.returncode != 0 or not target.is_file():
                tail = (done.stderr.strip().splitlines() or ["?"])[-1]
                return f"helm {HELM_VERSION} did not build: {tail}"
    finally:
        os.close(fd)
    return target


def checkov() -> Path | str:
    """The checkov command in its own virtual environment, installed once; or why not."""
    venv = cache() / f"checkov-{CHECKOV_VERSION}"
    target = venv / "bin" / "checkov"
    marker = venv / ".installed"
    if marker.is_file():
        return target
    fd = _locked("checkov")
    try:
        if not marker.is_file():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
            done = subprocess.run(
                [str(venv / "bin" / "pip"), "install", "--quiet",
                 "--disable-pip-version-check", f"checkov=={CHECKOV_VERSION}"],
                capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
            if done.returncode != 0 or not target.is_file():
                tail = (done.stderr.strip().splitlines() or ["?"])[-1]
                return f"checkov {CHECKOV_VERSION} did not install: {tail}"
            marker.touch()
    finally:
        os.close(fd)
    return target


def main(argv: list[str]) -> int:
    if argv != ["install"]:
        print("usage: python -m tests.deploy.tools install", file=sys.stderr)
        return 2
    for name, found in (("helm", helm()), ("checkov", checkov())):
        if isinstance(found, str):
            print(f"deploy tools: {name}: {found}; the chart tests that need it will skip")
        else:
            print(f"deploy tools: {name} at {found.relative_to(REPO)}")
    return 0  # a missing tool's tests skip with the reason printed above


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
