"""``rackguard streams audit`` end to end against a scripted coordinator (a socket server
answering FindCoordinator, ApiVersions, DescribeGroups and StreamsGroupDescribe with
frames of the KIP-708 example) and a sidecar's /streams document: the text and JSON
reports, the exit codes, the zones from the sidecars, a rebalancing group."""

from __future__ import annotations

import io
import json
import socket
import struct
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from kafka.protocol.admin import DescribeGroupsResponse

from benchmarks.fuzz_admin import framed
from benchmarks.fuzz_streams import streams_describe_response
from protocol.headers import parse_request_header
from proxy.streams.command import main
from tests.unit.streams._wire import (
    assignment_info,
    member_assignment,
    member_metadata,
    subscription_info,
)
from tests.unit.streams.test_watch import kip_assignments, process, tags

APP = "wordcount"


def describe_groups(state: str, copied: dict[int, str] | None = None) -> bytes:
    grp = DescribeGroupsResponse.DescribedGroup
    mem = grp.DescribedGroupMember
    plan = kip_assignments()
    members = [mem(member_id=f"node-{n}-StreamThread-1-consumer-{n:04d}",
                   group_instance_id=None, client_id=f"node-{n}-StreamThread-1-consumer",
                   client_host="/127.0.0.1",
                   member_metadata=member_metadata(subscription_info(process(n),
                                                                     tags(n, copied), {})),
                   member_assignment=member_assignment(assignment_info(*plan[n])))
               for n in range(1, 10)]
    return framed(DescribeGroupsResponse(version=5, throttle_time_ms=0, groups=[
        grp(error_code=0, error_message=None, group_id=APP, group_state=state,
            protocol_type="consumer", protocol_data="stream", members=members)]))


class Coordinator:
    """Answers one request per connection read, by api key, until closed."""

    def __init__(self, describe: bytes, streams: bool) -> None:
        self.describe, self.streams = describe, streams
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._talk, args=(conn,), daemon=True).start()

    def _talk(self, conn: socket.socket) -> None:
        with conn:
            while True:
                head = conn.recv(4, socket.MSG_WAITALL)
                if len(head) < 4:
                    return
                body = conn.recv(struct.unpack(">i", head)[0], socket.MSG_WAITALL)
                header = parse_request_header(head + body)
                conn.sendall(self._answer(header.api_key, header.correlation_id))

    def _answer(self, key: int, corr: int) -> bytes:
        if key == 10:  # FindCoordinator v2
            host = b"127.0.0.1"
            body = struct.pack(">ihhih", 0, 0, -1, 1, len(host)) + host + struct.pack(
                ">i", self.port)
        elif key == 18:  # ApiVersions v0
            apis = [(10, 0, 4), (15, 0, 5), (18, 0, 3)] + ([(89, 0, 0)] if self.streams
                                                           else [])
            body = struct.pack(">hi", 0, len(apis)) + b"".join(
                struct.pack(">hhh", *a) for a in apis)
        elif key == 89:
            return struct.pack(">i", corr).join(
                [streams_describe_response()[:4], streams_describe_response()[8:]])
        else:
            frame = self.describe
            return frame[:4] + struct.pack(">i", corr) + frame[8:]
        return struct.pack(">ii", len(body) + 4, corr) + body

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def sidecar() -> Iterator[str]:
    """A sidecar's /streams: nodes 3, 6, 9 run in zone c (their zone tags say so or not)."""
    rows = [{"group": APP, "process_id": process(n), "client_rack": z}
            for n, z in ((1, "eu-central-1a"), (2, "eu-central-1b"), (3, "eu-central-1c"),
                         (4, "eu-central-1a"), (5, "eu-central-1b"), (6, "eu-central-1c"),
                         (7, "eu-central-1a"), (8, "eu-central-1b"), (9, "eu-central-1c"))]

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802
            body = json.dumps({"members": rows, "audits": {}}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    return main(["audit", *argv], out), out.getvalue()


def test_the_kip_example_from_describe_groups(sidecar: str) -> None:
    c = Coordinator(describe_groups("Stable"), streams=False)
    try:
        code, text = run("--bootstrap", f"127.0.0.1:{c.port}", "--group", APP,
                         "--tags", "zone,cluster", "--sidecar", sidecar)
        assert code == 0, text
        assert "classic protocol, Stable" in text
        assert "12 of 12 tasks fully spread on every dimension" in text
        code, out = run("--bootstrap", f"127.0.0.1:{c.port}", "--group", APP, "--json",
                        "--sidecar", sidecar)
        doc = json.loads(out)
        assert doc["spread"]["sidecar-zone"]["full"] == 12
        assert {i["label"] for i in doc["instances"]} == {
            f"node-{n}-StreamThread-1-consumer" for n in range(1, 10)}
    finally:
        c.close()


def test_copied_zone_tags_exit_1_and_are_named(sidecar: str) -> None:
    c = Coordinator(describe_groups("Stable", {3: "eu-central-1a", 6: "eu-central-1a",
                                               9: "eu-central-1a"}), streams=False)
    try:
        code, out = run("--bootstrap", f"127.0.0.1:{c.port}", "--group", APP, "--json",
                        "--tags", "zone,cluster", "--sidecar", sidecar)
        assert code == 1
        doc = json.loads(out)
        assert sorted(m["label"] for m in doc["zone_mismatch"]) == [
            f"node-{n}-StreamThread-1-consumer" for n in (3, 6, 9)]
    finally:
        c.close()


def test_a_rebalancing_group_and_an_unreachable_cluster(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    c = Coordinator(describe_groups("PreparingRebalance"), streams=False)
    try:
        assert run("--bootstrap", f"127.0.0.1:{c.port}", "--group", APP)[0] == 2
        assert "PreparingRebalance" in capsys.readouterr().err
    finally:
        c.close()
    assert run("--bootstrap", "127.0.0.1:1", "--group", APP)[0] == 2


def test_a_streams_group_is_read_with_streams_group_describe() -> None:
    c = Coordinator(describe_groups("Stable"), streams=True)
    try:
        code, out = run("--bootstrap", f"127.0.0.1:{c.port}", "--group", APP, "--json")
        doc = json.loads(out)
        assert doc["protocol"] == "streams" and doc["tasks_total"] == 4  # 2 standbys, 2 stateful
        assert doc["instances"][0]["rack"] == "eu-central-1a"
    finally:
        c.close()
