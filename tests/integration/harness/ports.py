"""Free TCP ports below 32768 (outside Linux's default ephemeral range).

Client sockets get ephemeral ports (32768-60999 by default), so a listener
below 32768 never collides with a client's local port, and a port seen as a
*remote* port in /proc/net/tcp is unambiguously a listener we started.
"""

from __future__ import annotations

import random
import socket
import threading
from collections.abc import Iterable

LOW = 10_000
HIGH = 32_767  # inclusive upper bound

_lock = threading.Lock()
_handed_out: set[int] = set()


def port_is_free(port: int, host: str = "127.0.0.1") -> bool:
    """True if nothing listens on host:port and we can bind it right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    # Binding succeeds for a port in TIME_WAIT; also make sure no one listens.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex((host, port)) != 0


def free_port(host: str = "127.0.0.1", *, low: int = LOW, high: int = HIGH) -> int:
    """One free port in [low, high], never handed out twice by this process."""
    return free_port_block((0,), host=host, low=low, high=high)


def free_port_block(
    offsets: Iterable[int],
    host: str = "127.0.0.1",
    *,
    low: int = LOW,
    high: int = HIGH,
    attempts: int = 500,
) -> int:
    """A base port such that base + o is free for every o in offsets.

    Used for the proxy's broker ports: base + node_id for each node id.
    """
    offs = sorted(set(offsets))
    span = offs[-1]
    if high - span < low:
        raise ValueError(f"offsets {offs} do not fit below {high}")
    rng = random.Random()
    with _lock:
        for _ in range(attempts):
            base = rng.randint(low, high - span)
            ports = [base + o for o in offs]
            if any(p in _handed_out for p in ports):
                continue
            if all(port_is_free(p, host) for p in ports):
                _handed_out.update(ports)
                return base
    raise RuntimeError(f"no free port block for offsets {offs} in [{low}, {high}]")
