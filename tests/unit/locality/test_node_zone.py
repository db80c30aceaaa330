"""``rackguard node-zone`` against a fake Kubernetes API on 127.0.0.1 (HTTPS with a CA
made for the test, as the in-cluster API is reached): the node's zone label, the token
sent, and the failures that must stop the proxy with a clear line."""

from __future__ import annotations

import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from proxy.locality.node_zone import main, node_zone
from proxy.locality.source import resolve_client_rack
from proxy.settings import load_settings
from tests.tls_certs import make_pki

NODES = {
    "node-a1": {"kind": "Node", "metadata": {"name": "node-a1", "labels": {
        "kubernetes.io/hostname": "node-a1", "topology.kubernetes.io/zone": "eu-west-1a",
        "topology.kubernetes.io/region": "eu-west-1"}}},
    "node-bare": {"kind": "Node", "metadata": {"name": "node-bare", "labels": {}}},
}
TOKEN = "token-of-the-pod"


class FakeApi(BaseHTTPRequestHandler):
    seen: list[tuple[str, str | None]] = []

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        FakeApi.seen.append((self.path, self.headers.get("Authorization")))
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self._answer(401, {"kind": "Status", "code": 401})
        name = self.path.removeprefix("/api/v1/nodes/")
        if name == "forbidden":
            return self._answer(403, {"kind": "Status", "reason": "Forbidden", "code": 403})
        node = NODES.get(name)
        if node is None:
            return self._answer(404, {"kind": "Status", "reason": "NotFound", "code": 404})
        self._answer(200, node)

    def _answer(self, code: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[str, Path, Path]]:
    """(the fake API's URL, its CA file, a token file)."""
    pki = make_pki(tmp_path, "apiserver")
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeApi)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki.cert, pki.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    FakeApi.seen.clear()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", pki.ca_file, token
    finally:
        server.shutdown()
        server.server_close()


def test_the_zone_label_of_the_named_node(api: tuple[str, Path, Path]) -> None:
    url, ca, _ = api
    assert node_zone(url, "node-a1", TOKEN, ca) == "eu-west-1a"
    assert node_zone(url, "node-a1", TOKEN, ca, "topology.kubernetes.io/region") == "eu-west-1"
    assert FakeApi.seen[0] == ("/api/v1/nodes/node-a1", f"Bearer {TOKEN}")


def test_the_command_prints_the_zone_from_the_pod_environment(
    api: tuple[str, Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    url, ca, token = api
    host, port = url.removeprefix("https://").split(":")
    env = {"NODE_NAME": "node-a1", "KUBERNETES_SERVICE_HOST": host,
           "KUBERNETES_SERVICE_PORT": port}
    assert main(["--token-file", str(token), "--ca-file", str(ca)], env) == 0
    assert capsys.readouterr().out == "eu-west-1a\n"


@pytest.mark.parametrize(("node", "token", "expected"), [
    ("node-bare", TOKEN, "node node-bare has no label topology.kubernetes.io/zone"),
    ("forbidden", TOKEN, "HTTP 403 Forbidden (the service account needs get on nodes"),
    ("no-such-node", TOKEN, "HTTP 404"),
    ("node-a1", "a-wrong-token", "HTTP 401"),
])
def test_failures_are_one_line_and_exit_status_1(
    api: tuple[str, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
    node: str, token: str, expected: str,
) -> None:
    url, ca, _ = api
    token_file = tmp_path / "other-token"
    token_file.write_text(token)
    assert main(["--node", node, "--api", url, "--token-file", str(token_file),
                 "--ca-file", str(ca)], {}) == 1
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1


def test_a_server_the_ca_did_not_sign_is_refused(api: tuple[str, Path, Path],
                                                 tmp_path: Path) -> None:
    url, _, token = api
    other = make_pki(tmp_path, "other").ca_file
    assert main(["--node", "node-a1", "--api", url, "--token-file", str(token),
                 "--ca-file", str(other)], {}) == 1


def test_without_node_name_or_api_it_says_what_is_missing(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main([], {}) == 1
    assert "NODE_NAME" in capsys.readouterr().err
    token = tmp_path / "t"
    token.write_text("x")
    assert main(["--node", "n", "--token-file", str(token)], {}) == 1
    assert "KUBERNETES_SERVICE_HOST" in capsys.readouterr().err


def test_the_proxy_takes_client_rack_from_the_command(api: tuple[str, Path, Path]) -> None:
    """The chart's client_rack_command, run as the proxy runs it at start."""
    url, ca, token = api
    command = (f"rackguard node-zone --node node-a1 --api {url} --token-file {token} "
               f"--ca-file {ca}")
    settings = load_settings({"upstream": "k:9092", "client_rack_command": command})
    assert resolve_client_rack(settings, run=lambda c: _run_cli(c)) == "eu-west-1a"


def _run_cli(command: str) -> str:
    """The command line run in this process (the installed script is the same main)."""
    import contextlib
    import io
    import shlex

    from proxy.cli import main as cli

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli(shlex.split(command)[1:]) == 0
    return out.getvalue()


def test_a_failing_lookup_stops_the_proxy_with_the_commands_reason(tmp_path: Path) -> None:
    import sys

    from proxy.locality.source import RackSourceError

    command = (f"{sys.executable} -m proxy.cli node-zone --node n --api https://127.0.0.1:1 "
               f"--token-file {tmp_path / 'absent'}")
    settings = load_settings({"upstream": "k:9092", "client_rack_command": command})
    with pytest.raises(RackSourceError, match="exit status 1: rackguard node-zone: service "
                       "account token"):
        resolve_client_rack(settings)
