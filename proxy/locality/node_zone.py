"""``rackguard node-zone``: print the zone label of the Kubernetes node this pod runs on.

For ``client_rack_command`` in a pod (the Helm chart sets ``client_rack_command =
"rackguard node-zone --label topology.kubernetes.io/zone"``): one GET of the node object
from the in-cluster API with the pod's service account, which needs ``get`` on
``nodes`` (a ClusterRole; docs/kubernetes.md). The node's name comes from ``NODE_NAME``
(the downward API's ``spec.nodeName``), the API's address from
``KUBERNETES_SERVICE_HOST``/``KUBERNETES_SERVICE_PORT``, the token and CA from the
service account's mounted files; each can be given as a flag instead.

Invariants: one request, bounded by ``--timeout``; the label's value alone is printed
(one line) and the exit status is 0; anything else (no node name, no token, an HTTP
error, no such label) is one line on stderr and exit status 1, which the proxy reports
when it refuses to start without the rack it was asked for.
"""

from __future__ import annotations

import argparse
import json
import os
import ssl
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

ZONE_LABEL = "topology.kubernetes.io/zone"
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")


class NodeZoneError(Exception):
    """The zone could not be read; the message is one line."""


def api_url_from_env(env: dict[str, str]) -> str:
    host = env.get("KUBERNETES_SERVICE_HOST")
    if not host:
        raise NodeZoneError("KUBERNETES_SERVICE_HOST is not set: not in a pod (or give --api)")
    port = env.get("KUBERNETES_SERVICE_PORT", "443")
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    return f"https://{host}:{port}"


def node_zone(api: str, node: str, token: str, ca_file: Path | None, label: str = ZONE_LABEL,
              timeout_s: float = 5.0) -> str:
    """The value of ``label`` on node ``node``, read from the API server at ``api``."""
    url = f"{api.rstrip('/')}/api/v1/nodes/{urllib.parse.quote(node, safe='')}"
    request = urllib.request.Request(url, headers={
        "Authorization": f"Bearer {token}", "Accept": "application/json"})
    context = ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
    try:
        with urllib.request.urlopen(request, timeout=timeout_s, context=context) as answer:
            body = json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        hint = " (the service account needs get on nodes: a ClusterRole)" \
            if exc.code == 403 else ""
        raise NodeZoneError(f"GET node {node}: HTTP {exc.code} {exc.reason}{hint}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        raise NodeZoneError(f"GET node {node} from {api}: {reason}") from None
    labels = body.get("metadata", {}).get("labels") or {} if isinstance(body, dict) else {}
    zone = labels.get(label)
    if not isinstance(zone, str) or not zone.strip():
        raise NodeZoneError(f"node {node} has no label {label}")
    return zone.strip()


def main(argv: list[str], env: dict[str, str] | None = None) -> int:
    env = dict(os.environ) if env is None else env
    parser = argparse.ArgumentParser(
        prog="rackguard node-zone",
        description="Print the zone label of the Kubernetes node this pod runs on (for "
        "client_rack_command).")
    parser.add_argument("--label", default=ZONE_LABEL, help=f"node label (default {ZONE_LABEL})")
    parser.add_argument("--node", default=env.get("NODE_NAME"),
                        help="node name (default: $NODE_NAME, the downward API's spec.nodeName)")
    parser.add_argument("--api", help="API server URL (default: from KUBERNETES_SERVICE_HOST)")
    parser.add_argument("--token-file", type=Path, default=SERVICE_ACCOUNT / "token")
    parser.add_argument("--ca-file", type=Path, default=SERVICE_ACCOUNT / "ca.crt")
    parser.add_argument("--timeout", type=float, default=5.0, metavar="SECONDS")
    args = parser.parse_args(argv)
    try:
        if not args.node:
            raise NodeZoneError("no node name: set NODE_NAME from the downward API "
                                "(fieldRef spec.nodeName) or give --node")
        api = args.api or api_url_from_env(env)
        try:
            token = args.token_file.read_text().strip()
        except OSError as exc:
            raise NodeZoneError(f"service account token: {exc}") from None
        ca = args.ca_file if args.ca_file.is_file() else None
        print(node_zone(api, args.node, token, ca, args.label, args.timeout))
    except NodeZoneError as exc:
        print(f"rackguard node-zone: {exc}", file=sys.stderr)
        return 1
    return 0
