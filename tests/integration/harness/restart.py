"""A proxy restarted as an orchestrator restarts a container: SIGTERM, wait for the
process to exit by itself, then a new process with the same flags on the same ports."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

from .procs import RackguardProxy


def restart(proxy: RackguardProxy, log_path: Path, drain_s: float
            ) -> tuple[float, float, str]:
    """(seconds from SIGTERM to the old process's exit, from then until the new one's
    bootstrap port answers, the old one's drain outcome from its log); the old process
    must exit by itself with status 0 within ``drain_s`` + 10 s."""
    assert proxy.proc is not None
    began = time.monotonic()
    os.kill(proxy.proc.pid, signal.SIGTERM)
    try:
        code = proxy.proc.wait(drain_s + 10)
    except subprocess.TimeoutExpired:
        proxy.stop(grace=0)
        raise AssertionError(f"the proxy did not exit after SIGTERM\n{proxy.log_tail()}"
                             ) from None
    took = time.monotonic() - began
    assert code == 0, proxy.log_tail()
    drained = re.findall(r"stopped \(drain (\w+)\)", proxy.log_tail(4000))
    proxy.log_path = log_path
    began = time.monotonic()
    proxy.start()
    return took, time.monotonic() - began, drained[-1] if drained else "?"
