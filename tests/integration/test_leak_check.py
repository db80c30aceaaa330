"""The leak checks themselves must be able to fail: prove they fire."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import time

import pytest
from kafka.protocol.admin import DescribeClusterResponse
from kafka.protocol.metadata import FindCoordinatorResponse, MetadataResponse

from .harness import leak
from .harness.procs import TansuBroker
from .harness.targets import Target

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def tansu(it_logs):
    """A private broker: no other test's lingering client sockets on its port."""
    from .conftest import _start_tansu

    broker = _start_tansu(it_logs)
    yield broker
    broker.stop()


class FakeProxy:
    """Stands in for RackguardProxy: only pid/alive/describe are used by the check."""

    def __init__(self, pid: int):
        self.pid = pid

    def alive(self) -> bool:
        return True

    def describe(self) -> str:
        return f"fake proxy pid={self.pid}"

    def broker_address(self, node_id: int) -> tuple[str, int]:
        return ("127.0.0.1", 20000 + node_id)


def _child_connected_to(port: int, grandchild: bool = False) -> subprocess.Popen:
    """A child (or a child's child) holding a connection to 127.0.0.1:port."""
    code = (
        "import socket,sys,time\n"
        f"s=socket.create_connection(('127.0.0.1',{port}))\n"
        "print('up',flush=True)\n"
        "sys.stdin.readline()\n"
    )
    argv = [sys.executable, "-c", code]
    if grandchild:  # sh cannot exec (work follows), so python runs as its child
        argv = ["/bin/sh", "-c", '"$@"; true', "sh", *argv]
    p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stdout.readline().strip() == "up"
    return p


def _stop(p: subprocess.Popen) -> None:
    try:
        assert p.stdin is not None
        p.stdin.write("\n")
        p.stdin.flush()
    except BrokenPipeError:
        pass
    try:
        p.wait(10)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait(5)


def test_socket_check_fires_on_direct_connection(tansu: TansuBroker) -> None:
    stand_in = _child_connected_to(tansu.port)  # plays the proxy: allowed
    try:
        # only the allowed child is connected: clean
        leak.assert_no_direct_connections(tansu.port, stand_in.pid, "baseline")
        target = Target("proxy", tansu, FakeProxy(stand_in.pid))  # type: ignore[arg-type]
        target.check_connections(context="baseline")

        with socket.create_connection((tansu.host, tansu.port)) as s:
            s.settimeout(5)
            bad = leak.foreign_connections(tansu.port, {stand_in.pid})
            assert [b.pids for b in bad] == [frozenset({os.getpid()})], bad
            assert bad[0].local == s.getsockname()
            with pytest.raises(AssertionError, match=rf"(?s)bypass the proxy.*pid={os.getpid()}"):
                leak.assert_no_direct_connections(tansu.port, stand_in.pid, "leaky")
            with pytest.raises(AssertionError, match="address leak"):
                target.check_connections(context="leaky")
            # direct target: the positive control sees us
            Target("direct", tansu).check_connections([os.getpid()], "direct")

        deadline = time.monotonic() + 5
        while leak.foreign_connections(tansu.port, {stand_in.pid}):
            assert time.monotonic() < deadline, "closed socket still counted"
            time.sleep(0.05)
    finally:
        _stop(stand_in)


def test_socket_check_allows_proxy_descendants(tansu: TansuBroker) -> None:
    p = _child_connected_to(tansu.port, grandchild=True)
    try:
        holders = {pid for s in leak.direct_connections(tansu.port) for pid in s.pids}
        assert p.pid not in holders and holders, holders  # held by a grandchild
        assert holders <= leak.descendants(p.pid)
        leak.assert_no_direct_connections(tansu.port, p.pid, "descendant")
        with pytest.raises(AssertionError, match="bypass the proxy"):
            leak.assert_no_direct_connections(tansu.port, os.getpid() + 10**7, "stranger")
    finally:
        _stop(p)


def test_direct_check_is_not_blind(tansu: TansuBroker) -> None:
    with pytest.raises(AssertionError, match="leak check blind"):
        Target("direct", tansu).check_connections([os.getpid()], "nothing connected")


def test_parse_proc_net_tcp() -> None:
    text = (
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt"
        "   uid  timeout inode\n"
        "   0: 0100007F:A1B2 0100007F:2382 01 00000000:00000000 00:00000000 00000000"
        "     0        0 424242 1 0000000000000000 20 4 30 10 -1\n"
    )
    ((local, remote, state, inode),) = leak.parse_proc_net_tcp(text)
    assert local == ("127.0.0.1", 0xA1B2) and remote == ("127.0.0.1", 9090)
    assert (state, inode) == ("01", 424242)
    text6 = text.replace("0100007F:2382", "0000000000000000FFFF00000100007F:2382")
    assert leak.parse_proc_net_tcp(text6)[0][1] == ("127.0.0.1", 9090)
    text6 = text.replace("0100007F:2382", "00000000000000000000000001000000:2382")
    assert leak.parse_proc_net_tcp(text6)[0][1] == ("::1", 9090)


# ---------------------------------------------------------------------------
# byte level


def _metadata(version: int, host: str, port: int) -> bytes:
    b = MetadataResponse.MetadataResponseBroker(node_id=111, host=host, port=port, rack=None)
    resp = MetadataResponse(
        throttle_time_ms=0,
        brokers=[b],
        cluster_id="c",
        controller_id=111,
        topics=[],
        version=version,
    )
    return resp.encode(version=version)


@pytest.mark.parametrize("version", [0, 1, 8, 9, 12])
def test_byte_check_finds_broker_address_in_metadata(version: int) -> None:
    leaked = _metadata(version, "localhost", 19092)
    found = leak.find_address_leaks(leaked, "localhost", 19092)
    assert len(found) == 1, found
    assert found[0].form.startswith("COMPACT" if version >= 9 else "STRING"), found
    with pytest.raises(AssertionError, match="leaked"):
        leak.assert_no_address_leak(leaked, "localhost", 19092, context=f"Metadata v{version}")

    clean = _metadata(version, "127.0.0.1", 20111)
    leak.assert_no_address_leak(clean, "localhost", 19092, any_host_mention=True)
    # same host, other port: not the upstream address
    assert not leak.find_address_leaks(_metadata(version, "localhost", 19093), "localhost", 19092)


def test_byte_check_other_carriers() -> None:
    fc = FindCoordinatorResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        node_id=111,
        host="localhost",
        port=19092,
        version=2,
    ).encode(version=2)
    assert leak.find_address_leaks(fc, "localhost", 19092)
    dc_broker = DescribeClusterResponse.DescribeClusterBroker(
        broker_id=111, host="localhost", port=19092, rack="r1"
    )
    dc = DescribeClusterResponse(
        throttle_time_ms=0,
        error_code=0,
        error_message=None,
        endpoint_type=1,
        cluster_id="c",
        controller_id=111,
        brokers=[dc_broker],
        version=1,
    ).encode(version=1)
    assert leak.find_address_leaks(dc, "localhost", 19092)
    text = b"\x00\x2bNOT_LEADER: try localhost:19092 instead"
    (hit,) = leak.find_address_leaks(text, "localhost", 19092)
    assert hit.form == "text host:port"
    # host mentioned without the port: only flagged on request
    bare = struct.pack(">h", 9) + b"localhost"
    assert not leak.find_address_leaks(bare, "localhost", 19092)
    assert leak.find_address_leaks(bare, "localhost", 19092, any_host_mention=True)
