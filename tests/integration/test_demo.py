"""`rackguard demo` runs end to end from the installed command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.component.conftest import free_port_block

pytestmark = pytest.mark.integration


def test_demo_shows_rejection_and_recovery() -> None:
    base = free_port_block(210)
    exe = Path(sys.executable).parent / "rackguard"
    result = subprocess.run([str(exe), "demo", "--port-base", str(base)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    step3 = lines.index(next(line for line in lines if line.startswith("3.")))
    assert "spans rack-a" in lines[step3] and "rack-b" not in lines[step3]
    assert "acks=all -> REJECTED" in lines[step3 + 1]
    assert "NOT_ENOUGH_RACKS: payments-0" in lines[step3 + 1]
    assert any("acks=1   -> ok" in line for line in lines[step3:])
    step4 = next(i for i, line in enumerate(lines) if line.startswith("4."))
    assert "acks=all -> ok" in lines[step4 + 1]
    assert all("acks=all -> ok" in lines[i + 1] for i, line in enumerate(lines)
               if line.startswith(("1.", "2.")))
