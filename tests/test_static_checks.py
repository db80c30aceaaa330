"""ruff and mypy are part of the test run, so CI fails on a lint or type error.

mypy reads the packages under their import names (``rackguard.proxy``, ...): the folders are
mapped to those names by setup.py's package_dir, which mypy cannot follow through an
editable install, so :func:`typecheck_tree` links them (and ``benchmarks``) under
``.cache/typecheck`` and mypy is pointed there (``python -m tests.test_static_checks``
runs the same by hand).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
PACKAGES = ("proxy", "protocol", "pipeline", "simulator")


def _run(*cmd: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)


def typecheck_tree() -> Path:
    """A folder in which ``rackguard/<package>`` links to each package's folder."""
    tree = ROOT / ".cache" / "typecheck"
    (tree / "rackguard").mkdir(parents=True, exist_ok=True)
    links = {tree / "rackguard" / package: ROOT / package for package in PACKAGES}
    links[tree / "benchmarks"] = ROOT / "benchmarks"
    for link, target in links.items():
        if not link.is_symlink():
            link.symlink_to(target, target_is_directory=True)
    return tree


def mypy() -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MYPYPATH": str(typecheck_tree())}
    targets = [f"rackguard.{package}" for package in PACKAGES] + ["benchmarks"]
    return _run(str(BIN / "mypy"), *[arg for target in targets for arg in ("-p", target)], env=env)


def test_ruff_is_clean() -> None:
    result = _run(str(BIN / "ruff"), "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_is_clean() -> None:
    result = mypy()
    assert result.returncode == 0, result.stdout + result.stderr


if __name__ == "__main__":
    done = mypy()
    print(done.stdout + done.stderr, end="")
    sys.exit(done.returncode)
