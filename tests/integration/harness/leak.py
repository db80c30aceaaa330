"""Leak checks: no client may reach the upstream broker except via the proxy.

Two levels:

* Socket level (:func:`direct_connections`, :func:`assert_no_direct_connections`):
  parse /proc/net/tcp{,6} for ESTABLISHED sockets whose *remote* port is the
  upstream broker's port, map socket inodes to pids via /proc/<pid>/fd, and
  require every such socket to belong to an allowed pid (the proxy and its
  descendants). Run it while the clients are still connected.

* Byte level (:func:`find_address_leaks`, :func:`assert_no_address_leak`):
  search raw response bytes for the upstream broker's address in every form
  Kafka puts a broker address on the wire: a STRING or COMPACT_STRING host
  immediately followed by an INT32 port (Metadata brokers, FindCoordinator,
  DescribeCluster, NodeEndpoints tagged fields), and ``host:port`` text.
  Pure function of bytes, so unit tests can use it on codec output.
"""

from __future__ import annotations

import ipaddress
import os
import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

ESTABLISHED = "01"


# --------------------------------------------------------------------------
# socket level


@dataclass(frozen=True)
class TcpSocket:
    local: tuple[str, int]
    remote: tuple[str, int]
    inode: int
    pids: frozenset[int] = frozenset()

    def describe(self) -> str:
        who = ",".join(f"{p}({_comm(p)})" for p in sorted(self.pids)) or "unknown pid"
        return (
            f"{self.local[0]}:{self.local[1]} -> {self.remote[0]}:{self.remote[1]} "
            f"inode={self.inode} pid={who}"
        )


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return "?"


def _decode_addr(hexaddr: str) -> tuple[str, int]:
    ip_hex, port_hex = hexaddr.split(":")
    raw = bytes.fromhex(ip_hex)
    # The kernel prints the address as 32-bit words in host (little-endian) order.
    words = [raw[i : i + 4][::-1] for i in range(0, len(raw), 4)]
    ip = ipaddress.ip_address(b"".join(words))
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip), int(port_hex, 16)


def parse_proc_net_tcp(text: str) -> list[tuple[tuple[str, int], tuple[str, int], str, int]]:
    """Rows of /proc/net/tcp or tcp6 as (local, remote, state hex, inode)."""
    rows = []
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) < 10:
            continue
        rows.append((_decode_addr(parts[1]), _decode_addr(parts[2]), parts[3], int(parts[9])))
    return rows


def established_to_port(port: int) -> list[tuple[tuple[str, int], tuple[str, int], int]]:
    """ESTABLISHED loopback sockets whose remote port is ``port``: (local, remote, inode)."""
    out = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            text = Path(name).read_text()
        except OSError:
            continue
        for local, remote, state, inode in parse_proc_net_tcp(text):
            if state != ESTABLISHED or remote[1] != port:
                continue
            if not ipaddress.ip_address(remote[0]).is_loopback:
                continue
            out.append((local, remote, inode))
    return out


def socket_owners(inodes: Iterable[int]) -> dict[int, set[int]]:
    """Map socket inode -> pids holding an fd on it (only for the given inodes)."""
    wanted = {f"socket:[{i}]": i for i in inodes if i}
    owners: dict[int, set[int]] = {i: set() for i in wanted.values()}
    if not wanted:
        return owners
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        fd_dir = f"/proc/{entry.name}/fd"
        try:
            fds = os.listdir(fd_dir)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"{fd_dir}/{fd}")
            except OSError:
                continue
            inode = wanted.get(target)
            if inode is not None:
                owners[inode].add(int(entry.name))
    return owners


def descendants(pid: int) -> set[int]:
    """pid and all its descendants (from /proc/*/stat ppid fields)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry.name}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        if p in out:
            continue
        out.add(p)
        todo.extend(children.get(p, ()))
    return out


def direct_connections(upstream_port: int) -> list[TcpSocket]:
    """Every live loopback connection to ``upstream_port``, with owning pids."""
    conns = established_to_port(upstream_port)
    owners = socket_owners(inode for _, _, inode in conns)
    return [
        TcpSocket(local, remote, inode, frozenset(owners.get(inode, ())))
        for local, remote, inode in conns
    ]


def foreign_connections(upstream_port: int, allowed_pids: Iterable[int]) -> list[TcpSocket]:
    """Connections to the upstream port not owned (only) by allowed pids.

    A socket whose owner cannot be determined counts as foreign (fail closed).
    """
    allowed = set(allowed_pids)
    return [s for s in direct_connections(upstream_port) if not s.pids or not s.pids <= allowed]


def assert_no_direct_connections(upstream_port: int, proxy_pid: int, context: str = "") -> None:
    """Fail if any process other than the proxy (or its children) talks to upstream.

    A socket no process owned is looked at once more: one the proxy closed between the
    read of /proc/net/tcp and that of the owners (its own short-lived connections, e.g.
    an admin client's every 30 s) is gone or owned the second time; a leak is not."""
    bad = foreign_connections(upstream_port, descendants(proxy_pid))
    if bad and all(not s.pids for s in bad):
        time.sleep(0.2)
        again = {s.inode for s in foreign_connections(upstream_port, descendants(proxy_pid))}
        bad = [s for s in bad if s.inode in again]
    if bad:
        lines = "\n  ".join(s.describe() for s in bad)
        raise AssertionError(
            f"address leak{' (' + context + ')' if context else ''}: "
            f"{len(bad)} connection(s) to upstream port {upstream_port} bypass the proxy "
            f"(pid {proxy_pid}):\n  {lines}"
        )


# --------------------------------------------------------------------------
# byte level


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


@dataclass(frozen=True)
class AddressLeak:
    offset: int
    form: str
    snippet: bytes

    def __str__(self) -> str:
        return f"{self.form} at byte {self.offset}: {self.snippet!r}"


def address_patterns(host: str, port: int) -> dict[str, bytes]:
    """Every byte form in which Kafka encodes host+port of a broker."""
    h = host.encode()
    p = struct.pack(">i", port)
    return {
        "STRING host + INT32 port": struct.pack(">h", len(h)) + h + p,
        "COMPACT_STRING host + INT32 port": _uvarint(len(h) + 1) + h + p,
        "text host:port": f"{host}:{port}".encode(),
    }


def find_address_leaks(
    data: bytes, host: str, port: int, *, any_host_mention: bool = False
) -> list[AddressLeak]:
    """All places in ``data`` where the address host:port appears.

    With ``any_host_mention`` every occurrence of the host bytes counts too
    (useful when the upstream host name, e.g. ``localhost``, is distinct from
    the proxy's advertised host).
    """
    patterns = address_patterns(host, port)
    if any_host_mention:
        patterns["host bytes"] = host.encode()
    found: list[AddressLeak] = []
    seen: set[int] = set()
    for form, pat in patterns.items():
        start = 0
        while (i := data.find(pat, start)) >= 0:
            start = i + 1
            if form == "host bytes" and any(i >= s and i < s + 64 for s in seen):
                continue  # already reported in a richer form
            seen.add(i)
            found.append(AddressLeak(i, form, data[max(0, i - 8) : i + len(pat) + 8]))
    return sorted(found, key=lambda x: x.offset)


def assert_no_address_leak(
    data: bytes, host: str, port: int, *, any_host_mention: bool = False, context: str = ""
) -> None:
    leaks = find_address_leaks(data, host, port, any_host_mention=any_host_mention)
    if leaks:
        raise AssertionError(
            f"upstream address {host}:{port} leaked{' in ' + context if context else ''}: "
            + "; ".join(map(str, leaks))
        )
